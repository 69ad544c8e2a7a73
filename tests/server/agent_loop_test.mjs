// Agent loops with the official SDKs, as an agent framework drives them:
// a request with tools -> a tool call -> the call and the tool's result sent
// back -> an answer -> the next user turn -> another call. For one template
// of each tool-call family in ../shared/templates (stories260K, or the bundled
// model where the tool prompt is long, served with the template through
// `model.chat_template`) and for the bundled model
// (ChatML without tool support: every polyfill), with
//   - openai chat.completions (the assistant turn sent back with
//     `content: null` and `tool_calls`, the result as a `tool` message;
//     streamed calls assembled from deltas),
//   - openai responses (function_call / function_call_output items),
//   - @anthropic-ai/sdk messages (tool_use / tool_result blocks);
// and the same three loops through a real `kvserve gateway` in front of the
// bundled model. /tokenize with the conversation shows that the prompt the
// server built carries the call, its arguments and the tool's result.
// Under the sanitizers (KVSERVE_SANITIZED) three families run, not all: the
// served code is the same for each, the template differs.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { loadOpenAI, madeTempDir, realModelPath, request, requireBinary, sharedDir, skipFile, sourceDir, startServer } from "./common.mjs";

requireBinary();
const OpenAI = await loadOpenAI();
const oracles = path.join(sourceDir, "tests/oracles/node_modules");
for (const p of ["ajv", "@anthropic-ai/sdk"]) {
  if (!existsSync(path.join(oracles, p))) skipFile(`${p} is missing (run scripts/setup.sh to install the npm test oracles)`);
}
const Anthropic = (await import(path.join(oracles, "@anthropic-ai/sdk/index.mjs"))).default;
const Ajv2020 = (await import(path.join(oracles, "ajv/dist/2020.js"))).default;
const ajv = new Ajv2020({ strict: false });

const stories = realModelPath();
const bundled = path.join(sourceDir, "models/kvserve-tiny.gguf");
const templates = path.join(sharedDir, "templates");
if (!existsSync(bundled)) skipFile("models/kvserve-tiny.gguf is missing");

const WEATHER = {
  type: "object",
  properties: { city: { type: "string", enum: ["Oslo", "Paris", "Rome"] }, unit: { type: "string", enum: ["c", "f"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const validateWeather = ajv.compile(WEATHER);
const TIME = {
  type: "object",
  properties: { zone: { type: "string", enum: ["UTC", "CET", "PST"] } },
  required: ["zone"],
  additionalProperties: false,
};
const validateTime = ajv.compile(TIME);
const RESULT = "Sunny, 21 degrees";  // the weather tool's answer: must reach the prompt
// Tokens for one forced call (the grammar ends it in time): DeepSeek's markers
// (<｜tool▁calls▁end｜>) are dozens of byte tokens in stories260K's vocabulary;
// the others leave room for Llama 3.1's long tool prompt in 2,048 tokens.
const callBudget = (label) => (/DeepSeek|Hy3/.test(label) ? 300 : 200);

// One template per tool-call family (the file names in ../shared/templates).
const FAMILIES = [
  "Qwen-Qwen2.5-7B-Instruct",            // hermes
  "meta-llama-Llama-3.1-8B-Instruct",    // llama3_json
  "mistralai-Ministral-3-14B-Reasoning-2512", // mistral (and [THINK] reasoning)
  "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", // deepseek_v3
  "deepseek-ai-DeepSeek-V3.1",           // deepseek_v31
  "Qwen3-Coder",                         // qwen3_coder
  "meetkai-functionary-medium-v3.1",     // functionary_v3_1
  "GLM-4.6",                             // glm45
  "moonshotai-Kimi-K2",                  // kimi_k2
  "MiniMax-M1",                          // minimax_m1
  "NVIDIA-Nemotron-Nano-v2",             // nemotron
  "google-gemma-4-31B-it",               // gemma4
  "microsoft-Phi-3.5-mini-instruct",     // no tool support: polyfilled
  "ByteDance-Seed-OSS",                  // seed_oss
  "LFM2.5-8B-A1B",                       // lfm2
  "Apertus-8B-Instruct",                 // apertus
  "Apriel-1.6-15b-Thinker-fixed",        // apriel
  "GigaChat3.1-10B-A1.8B:bundled",       // gigachat3_1 (its tool prompt needs > 2,048 stories260K tokens)
  // command_r7b is not here: Command R7B's tool preamble alone is > 4,096 tokens
  // of either model; tool_call_templates_test.cc covers the syntax.
  "upstage-Solar-Open-100B",             // solar_open
  "muse-glimmer:bundled",                // atem
  "openbmb-MiniCPM5-1B",                 // minicpm5
  "MiniMax-M3:bundled",                  // minimax_m3
  "tencent-Hy3",                         // hy3
  "deepseek-ai-DeepSeek-V3.2",           // deepseek_v32
  "deepseek-ai-DeepSeek-V4",             // deepseek_v4
];
const sanitized = !!process.env.KVSERVE_SANITIZED;
// "NAME:bundled": served on the bundled model (4,096 tokens of context, a BPE
// vocabulary) rather than stories260K, for templates whose tool prompt is long.
const families = (sanitized ? FAMILIES.slice(0, 3) : FAMILIES)
  .map((f) => ({ name: f.split(":")[0], model: f.endsWith(":bundled") ? bundled : stories }))
  .filter((f) => f.model && existsSync(path.join(templates, `${f.name}.jinja`)));

// The three SDK loops against one endpoint (baseURL, key) serving `model`.
function loops(label, endpoint) {
  let openai, anthropic, model, context;
  before(async () => {
    const { baseURL, key } = endpoint();
    openai = new OpenAI({ apiKey: key, baseURL: `${baseURL}/v1`, maxRetries: 0 });
    anthropic = new Anthropic({ apiKey: key, baseURL, maxRetries: 0 });
    const m = (await openai.models.list()).data[0];
    model = m.id;
    context = m.max_model_len ?? 2048;
  });

  const tools = [
    { type: "function", function: { name: "get_weather", description: "The weather in a city", parameters: WEATHER } },
    { type: "function", function: { name: "get_time", description: "The time in a zone", parameters: TIME } },
  ];

  test(`${label}: chat completions, two calls and their results over three turns`, async () => {
    const messages = [{ role: "user", content: "What is the weather in Oslo?" }];
    const first = await openai.chat.completions.create({
      model, messages, tools, tool_choice: { type: "function", function: { name: "get_weather" } }, parallel_tool_calls: false, max_tokens: callBudget(label), seed: 1,
    });
    const msg = first.choices[0].message;
    assert.equal(first.choices[0].finish_reason, "tool_calls", JSON.stringify(first.choices[0]));
    assert.equal(msg.tool_calls.length, 1);
    const call = msg.tool_calls[0];
    assert.equal(call.function.name, "get_weather");
    assert.ok(validateWeather(JSON.parse(call.function.arguments)), call.function.arguments);
    // What every framework sends back: the assistant turn as it came (content null), then the result.
    messages.push({ role: "assistant", content: null, tool_calls: msg.tool_calls });
    messages.push({ role: "tool", tool_call_id: call.id, content: RESULT });
    const answer = await openai.chat.completions.create({ model, messages, tools, max_tokens: 12, temperature: 0 });
    assert.equal(typeof answer.choices[0].message.content, "string");
    assert.ok(["stop", "length", "tool_calls"].includes(answer.choices[0].finish_reason));
    assert.ok(answer.usage.prompt_tokens > first.usage.prompt_tokens, "the call and its result are in the prompt");
    messages.push({ role: "assistant", content: answer.choices[0].message.content });
    // Turn three, streamed: a call to the other tool, assembled from deltas.
    messages.push({ role: "user", content: "And what time is it in Berlin?" });
    // What is left of the context after the history (the new user turn and the template's markup: up to ~150).
    const budget = Math.min(callBudget(label), context - answer.usage.prompt_tokens - answer.usage.completion_tokens - 150);
    const stream = await openai.chat.completions.create({
      model, messages, tools, tool_choice: { type: "function", function: { name: "get_time" } }, parallel_tool_calls: false, max_tokens: budget, seed: 2, stream: true,
    });
    let name = "";
    let args = "";
    let finish = null;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (!c) continue;
      for (const d of c.delta?.tool_calls ?? []) {
        name += d.function?.name ?? "";
        args += d.function?.arguments ?? "";
      }
      finish = c.finish_reason ?? finish;
    }
    assert.equal(finish, "tool_calls");
    assert.equal(name, "get_time");
    assert.ok(validateTime(JSON.parse(args)), args);
  });

  test(`${label}: responses, function_call and function_call_output items`, async () => {
    const rtools = tools.map((t) => ({ type: "function", ...t.function }));
    const first = await openai.responses.create({
      model, input: "What is the weather in Oslo?", tools: rtools, tool_choice: { type: "function", name: "get_weather" }, parallel_tool_calls: false,
      max_output_tokens: callBudget(label), seed: 3,
    });
    const calls = first.output.filter((o) => o.type === "function_call");
    assert.equal(calls.length, 1, JSON.stringify(first.output));
    assert.ok(validateWeather(JSON.parse(calls[0].arguments)), calls[0].arguments);
    const input = [
      { role: "user", content: "What is the weather in Oslo?" },
      ...first.output,
      { type: "function_call_output", call_id: calls[0].call_id, output: RESULT },
    ];
    const answer = await openai.responses.stream({ model, input, tools: rtools, max_output_tokens: 12, temperature: 0 }).finalResponse();
    assert.equal(answer.object, "response");
    assert.ok(["completed", "incomplete"].includes(answer.status), answer.status);
    assert.ok(answer.usage.input_tokens + (answer.usage.input_tokens_details?.cached_tokens ?? 0) > first.usage.input_tokens);
  });

  test(`${label}: anthropic messages, tool_use and tool_result blocks`, async () => {
    const atools = tools.map((t) => ({ name: t.function.name, description: t.function.description, input_schema: t.function.parameters }));
    const messages = [{ role: "user", content: "What is the weather in Oslo?" }];
    const first = await anthropic.messages
      .stream({ model, max_tokens: callBudget(label), tools: atools, tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true }, messages })
      .finalMessage();
    assert.equal(first.stop_reason, "tool_use");
    const use = first.content.find((b) => b.type === "tool_use");
    assert.ok(use && validateWeather(use.input), JSON.stringify(first.content));
    messages.push({ role: "assistant", content: first.content });
    messages.push({ role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: RESULT }] });
    const answer = await anthropic.messages.create({ model, max_tokens: 12, temperature: 0, tools: atools, messages });
    assert.equal(answer.type, "message");
    assert.ok(["end_turn", "max_tokens", "tool_use", "stop_sequence"].includes(answer.stop_reason));
    assert.ok(answer.usage.input_tokens + (answer.usage.cache_read_input_tokens ?? 0) > first.usage.input_tokens);
  });
}

// The prompt the server renders for a conversation with a call and its result.
async function renderedPrompt(server, model) {
  const body = {
    model,
    messages: [
      { role: "user", content: "What is the weather in Oslo?" },
      {
        role: "assistant", content: null,
        tool_calls: [{ id: "call_7", type: "function", function: { name: "get_weather", arguments: '{"city":"Oslo","unit":"c"}' } }],
      },
      { role: "tool", tool_call_id: "call_7", content: RESULT },
    ],
    tools: [{ type: "function", function: { name: "get_weather", description: "The weather in a city", parameters: WEATHER } }],
  };
  const tok = await request(server, "POST", "/tokenize", body);
  assert.equal(tok.status, 200, tok.text);
  const text = await request(server, "POST", "/detokenize", { model, tokens: tok.json.tokens });
  assert.equal(text.status, 200, text.text);
  return text.json.prompt;
}

describe("the bundled model (ChatML, no tool support: polyfilled)", () => {
  let server;
  before(async () => {
    server = await startServer({ fake: false, args: ["--model", bundled, "--threads", "1"] });
  });
  after(async () => server && (await server.stop()));
  loops("kvserve-tiny", () => ({ baseURL: server.baseURL, key: "none" }));
  test("tools/tool_call_accuracy.mjs measures the model's own calls (tool_choice auto, no grammar)", () => {
    const out = path.join(madeTempDir("kvserve-acc-"), "acc.json");
    execFileSync(process.execPath, [path.join(sourceDir, "tools/tool_call_accuracy.mjs"), "--url", server.baseURL, "--n", "6", "--json", out], { stdio: "pipe" });
    const r = JSON.parse(readFileSync(out, "utf8"));
    assert.equal(r.requests, 6);
    assert.equal(r.calls + r.wrong_calls + r.failed_calls + r.text, 6);
    assert.equal(r.attempted, r.calls + r.wrong_calls + r.failed_calls);
    assert.equal(r.accuracy, r.attempted ? r.calls / r.attempted : null);
  });
  test("the prompt carries the call, its arguments and the tool's result", async () => {
    const prompt = await renderedPrompt(server, "kvserve-tiny");
    for (const s of ["get_weather", "Oslo", RESULT, "What is the weather in Oslo?"]) assert.ok(prompt.includes(s), `${s} in:\n${prompt}`);
  });
});

for (const family of families) {
  const modelName = path.basename(family.model, ".gguf");
  describe(`${modelName} with ${family.name}.jinja`, () => {
    let server;
    before(async () => {
      server = await startServer({
        fake: false,
        args: ["--model", family.model, "--threads", "1", "--chat-template", path.join(templates, `${family.name}.jinja`)],
      });
    });
    after(async () => server && (await server.stop()));
    loops(family.name, () => ({ baseURL: server.baseURL, key: "none" }));
    test(`${family.name}: the prompt carries the call, its arguments and the tool's result`, async () => {
      const prompt = await renderedPrompt(server, modelName);
      for (const s of ["get_weather", "Oslo", RESULT]) assert.ok(prompt.includes(s), `${s} in:\n${prompt}`);
    });
  });
}

// firefunction-v2's template renders nothing without the variables its
// clients pass (`functions`, the tools as JSON text, and `datetime`): with them
// as chat_template_kwargs, the loop runs like any other (openai chat only: the
// other dialects have no field for template variables).
const firefunction = path.join(templates, "fireworks-ai-llama-3-firefunction-v2.jinja");
describe("stories260K with fireworks-ai-llama-3-firefunction-v2.jinja (chat_template_kwargs)", { skip: !stories || !existsSync(firefunction) || sanitized }, () => {
  let server, openai;
  before(async () => {
    server = await startServer({ fake: false, args: ["--model", stories, "--threads", "1", "--chat-template", firefunction] });
    openai = new OpenAI({ apiKey: "none", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
  });
  after(async () => server && (await server.stop()));
  test("a forced call, its result, an answer", async () => {
    const tools = [{ type: "function", function: { name: "get_weather", description: "The weather in a city", parameters: WEATHER } }];
    const chat_template_kwargs = { functions: JSON.stringify(tools.map((t) => t.function)), datetime: "2026-12-06" };
    const messages = [{ role: "user", content: "What is the weather in Oslo?" }];
    const first = await openai.chat.completions.create({
      model: "stories260K", messages, tools, tool_choice: "required", parallel_tool_calls: false, max_tokens: 200, seed: 1, chat_template_kwargs,
    });
    assert.equal(first.choices[0].finish_reason, "tool_calls", JSON.stringify(first.choices[0]));
    const call = first.choices[0].message.tool_calls[0];
    assert.ok(validateWeather(JSON.parse(call.function.arguments)), call.function.arguments);
    messages.push({ role: "assistant", content: null, tool_calls: [call] }, { role: "tool", tool_call_id: call.id, content: RESULT });
    const answer = await openai.chat.completions.create({ model: "stories260K", messages, tools, max_tokens: 8, temperature: 0, chat_template_kwargs });
    assert.equal(typeof answer.choices[0].message.content, "string");
    assert.ok(answer.usage.prompt_tokens > first.usage.prompt_tokens);
  });
});

describe("through a gateway in front of the bundled model", () => {
  let replica, gw;
  before(async () => {
    const { startGateway, addKey, tempDir } = await import("../gateway/common.mjs");
    replica = await startServer({ fake: false, args: ["--model", bundled, "--threads", "1"] });
    const dir = tempDir();
    const keyFile = `${dir}/keys.yaml`;
    const key = addKey(keyFile, "agents");
    gw = await startGateway({
      model: bundled,
      gateway: { key_file: keyFile },
      pools: [{ name: "main", max_context: 2048, replicas: [replica.baseURL] }],
    });
    gw.key = key;
  });
  after(async () => {
    if (gw) assert.equal((await gw.stop()).code, 0);
    if (replica) await replica.stop();
  });
  loops("gateway", () => ({ baseURL: gw.baseURL, key: gw.key }));
});

