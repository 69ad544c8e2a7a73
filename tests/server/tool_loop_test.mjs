// An OpenAI tool loop (tools -> assistant tool_calls with content null ->
// tool result -> the next turn), what every agent framework sends, against a
// real `kvserve serve`: on the bundled model (ChatML without tool support,
// issue 36's 400) and on stories260K served with real chat templates from
// ../shared/templates through model.chat_template (--chat-template), streamed
// and not. The prompt the server rendered is read back through /tokenize +
// /detokenize and must hold the user's text, the tool's name, the call's
// arguments and the tool's result; the start-up log names the polyfills.
// Also: a forced call (tool_choice required) on a template without tool
// support comes back parsed in the syntax the polyfill teaches, and goes
// round the loop again; forced calls under tight max_tokens (Hy3, DeepSeek)
// end in time, or come back cut with JSON arguments; the override's errors.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";

import { binary, madeTempDir, parseSse, realModelPath, request, sharedDir, skipFile, sourceDir, startServer } from "./common.mjs";

if (!existsSync(binary)) skipFile(`kvserve binary not found at ${binary} (build the kvserve target)`);

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", enum: ["Paris", "Oslo"] } },
        required: ["city"],
        additionalProperties: false,
      },
    },
  },
];
const LOOP = [
  { role: "user", content: "What is the weather?" },
  {
    role: "assistant",
    content: null,
    tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } }],
  },
  { role: "tool", tool_call_id: "call_1", content: "sunny" },
];

const servers = [];
after(async () => {
  for (const s of servers) assert.equal((await s.stop()).code, 0, s.stderr());
});

async function serve(args) {
  const s = await startServer({ fake: false, args: [...args, "--threads", "1", "--access-log", "off"] });
  servers.push(s);
  const model = (await request(s, "GET", "/v1/models")).json.data[0].id;
  return { s, model };
}

async function stop(entry) {
  servers.splice(servers.indexOf(entry.s), 1);
  assert.equal((await entry.s.stop()).code, 0);
}

// The loop, non-streaming and streaming; then the prompt the server built.
async function checkLoop({ s, model }, messages = LOOP, wants = ["What is the weather?", "get_weather", "Paris", "sunny"]) {
  const body = { model, messages, tools: TOOLS, max_tokens: 6, temperature: 0 };
  const r = await request(s, "POST", "/v1/chat/completions", body);
  assert.equal(r.status, 200, r.text);
  assert.equal(r.json.choices.length, 1);
  assert.ok(["stop", "length", "tool_calls"].includes(r.json.choices[0].finish_reason), r.text);
  assert.ok(r.json.usage.prompt_tokens > 20, r.text);

  const st = await request(s, "POST", "/v1/chat/completions", { ...body, stream: true });
  assert.equal(st.status, 200, st.text);
  const events = parseSse(st.text);
  assert.equal(events.at(-1).data, "[DONE]");
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data));
  assert.ok(chunks.some((c) => c.choices?.[0]?.finish_reason), st.text);

  const t = await request(s, "POST", "/tokenize", { model, messages, tools: TOOLS });
  assert.equal(t.status, 200, t.text);
  assert.equal(t.json.count, r.json.usage.prompt_tokens, "/tokenize counts the chat request's prompt");
  const d = await request(s, "POST", "/detokenize", { model, tokens: t.json.tokens });
  assert.equal(d.status, 200, d.text);
  for (const want of wants) {
    assert.ok(d.json.prompt.includes(want), `${want} is not in the prompt:\n${d.json.prompt}`);
  }
  return d.json.prompt;
}

describe("the bundled model (ChatML without tool support)", () => {
  test("the issue's tool loop answers 200, streamed and not; the log names the polyfills", async () => {
    const entry = await serve(["--config", path.join(sourceDir, "configs/default.yaml")]);
    const prompt = await checkLoop(entry);
    assert.ok(prompt.includes('<tool_call>\n{"name": "get_weather", "arguments": {"city":"Paris"}}\n</tool_call>'), prompt);
    assert.match(entry.s.stderr(), /chat template polyfills: tool-calls-as-text, tool-definitions-in-system/);
    assert.match(entry.s.stderr(), /tool calls: hermes syntax/);
    await stop(entry);
  });
});

const stories = realModelPath();
const templates = path.join(sharedDir, "templates");

// file -> [polyfills in the start-up log ("none": a template that renders the
// whole loop itself), the server's tool-call syntax].
const CASES = {
  "Qwen-Qwen2.5-7B-Instruct.jinja": ["object-arguments", "hermes"],
  "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": ["tools-list, tool-descriptions", "hermes"],
  "meta-llama-Llama-3.1-8B-Instruct.jinja": ["object-arguments", "llama3_json"],
  "Mistral-Small-3.2-24B-Instruct-2506.jinja": ["object-arguments, call-ids", "mistral"],
  "GLM-4.6.jinja": ["object-arguments", "glm45"],
  "microsoft-Phi-3.5-mini-instruct.jinja": ["tool-calls-as-text, tool-results-as-user, tool-definitions-in-system", "hermes"],
  "llama-cpp-rwkv-world.jinja": ["tool-calls-as-text, tool-results-as-user, tool-definitions-in-system", "hermes"],
  "google-gemma-4-31B-it.jinja": ["none", "gemma4"],
  "deepseek-ai-DeepSeek-V3.1.jinja": ["object-arguments, tool-definitions-in-system", "deepseek_v31"],
  "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": ["empty-content, string-arguments, tool-definitions-in-system", "deepseek_v3"],
  "Qwen-QwQ-32B.jinja": ["null-content, object-arguments", "hermes"],
  "Qwen3-Coder.jinja": ["object-arguments", "qwen3_coder"],
};
// (../shared/templates holds no gpt-oss / harmony template.)

describe("stories260K with real templates (model.chat_template)", { skip: !stories || !existsSync(templates) }, () => {
  for (const [file, [polyfills, syntax]] of Object.entries(CASES)) {
    test(file, async () => {
      const entry = await serve(["--model", stories, "--chat-template", path.join(templates, file)]);
      const log = entry.s.stderr();
      assert.ok(log.includes(`chat template: file ${path.join(templates, file)} (model.chat_template)`), log);
      if (polyfills === "none") {
        assert.ok(log.includes("chat template polyfills: none"), log);
      } else {
        assert.ok(log.includes(`chat template polyfills: ${polyfills} (`), log);
      }
      assert.ok(log.includes(`tool calls: ${syntax} syntax`), log);
      await checkLoop(entry);
      await stop(entry);
    });
  }

  test("a forced call on a template without tool support parses back and goes round again", async () => {
    const entry = await serve(["--model", stories, "--chat-template", path.join(templates, "microsoft-Phi-3.5-mini-instruct.jinja")]);
    const { s, model } = entry;
    const first = [{ role: "user", content: "What is the weather?" }];
    const r = await request(s, "POST", "/v1/chat/completions", {
      model, messages: first, tools: TOOLS, tool_choice: "required", parallel_tool_calls: false, max_tokens: 200, seed: 1,
    });
    assert.equal(r.status, 200, r.text);
    const msg = r.json.choices[0].message;
    assert.equal(r.json.choices[0].finish_reason, "tool_calls", r.text);
    assert.equal(msg.tool_calls.length, 1, r.text);
    assert.equal(msg.tool_calls[0].function.name, "get_weather");
    const city = JSON.parse(msg.tool_calls[0].function.arguments).city;
    assert.ok(["Paris", "Oslo"].includes(city), r.text);
    // The client sends the call back with its result, as agents do.
    const loop = [...first, { role: "assistant", content: msg.content, tool_calls: msg.tool_calls },
      { role: "tool", tool_call_id: msg.tool_calls[0].id, content: "sunny" }];
    const prompt = await checkLoop(entry, loop, ["What is the weather?", "get_weather", city, "sunny"]);
    assert.ok(prompt.includes(`Result of the tool call get_weather (id ${msg.tool_calls[0].id}):\nsunny`), prompt);
    await stop(entry);
  });

  test("a built-in template by name", async () => {
    const entry = await serve(["--model", stories, "--chat-template", "llama3"]);
    assert.match(entry.s.stderr(), /chat template: built-in llama3 \(model\.chat_template\)/);
    const prompt = await checkLoop(entry);
    assert.ok(prompt.includes("assistant<|end_header_id|>"), prompt);
    await stop(entry);
  });
});

// Forced calls and max_tokens (stories260K spells tags in one- and two-byte
// tokens: Hy3's shortest call is ~240 tokens, DeepSeek's markers a dozen byte
// tokens each). With max_tokens at or above the shortest call's token count
// the steering ends the call in time ("tool_calls", arguments valid), also
// when optional parameters tempt the model into a part it cannot finish;
// a call cut by a smaller budget comes back with JSON arguments (or, before
// its name, as text), never the tags.
const WEATHER2 = {
  type: "object",
  properties: { city: { type: "string", enum: ["Oslo", "Paris", "Rome"] }, unit: { type: "string", enum: ["c", "f"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const OPTIONAL = {
  type: "object",
  properties: { ...WEATHER2.properties, days: { type: "integer" }, note: { type: "string" } },
  required: ["city"],
  additionalProperties: false,
};
const weatherTool = (parameters) => [{ type: "function", function: { name: "get_weather", description: "Weather", parameters } }];
const hy3 = (args) => "<tool_calls:opensource><tool_call:opensource>get_weather<tool_sep:opensource>" +
  args.map(([k, v]) => `<arg_key:opensource>${k}</arg_key:opensource><arg_value:opensource>${v}</arg_value:opensource>`).join("") +
  "</tool_call:opensource></tool_calls:opensource>";
const BUDGET_CASES = {
  "tencent-Hy3.jinja": { shortest: hy3([["city", "Oslo"], ["unit", "c"]]), shortestRequired: hy3([["city", "Oslo"]]) },
  "deepseek-ai-DeepSeek-V3.1.jinja": {
    shortest: '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city":"Oslo","unit":"c"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    shortestRequired: '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city":"Oslo"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
  },
};

// One forced call, streamed or not: {finish, calls: [{name, arguments}], content}.
async function forcedCall({ s, model }, parameters, maxTokens, seed, stream) {
  const body = {
    model, messages: [{ role: "user", content: "What is the weather in Oslo?" }], tools: weatherTool(parameters),
    tool_choice: { type: "function", function: { name: "get_weather" } }, parallel_tool_calls: false,
    max_tokens: maxTokens, seed, stream,
  };
  const r = await request(s, "POST", "/v1/chat/completions", body);
  assert.equal(r.status, 200, r.text);
  if (!stream) {
    const c = r.json.choices[0];
    const calls = (c.message.tool_calls ?? []).map((t) => ({ name: t.function.name, arguments: t.function.arguments }));
    return { finish: c.finish_reason, calls, content: c.message.content ?? "", tokens: r.json.usage.completion_tokens };
  }
  const out = { finish: null, calls: [], content: "" };
  for (const e of parseSse(r.text).slice(0, -1)) {
    const c = JSON.parse(e.data).choices[0];
    if (!c) continue;
    out.content += c.delta?.content ?? "";
    for (const d of c.delta?.tool_calls ?? []) {
      out.calls[d.index] ??= { name: "", arguments: "" };
      out.calls[d.index].name += d.function?.name ?? "";
      out.calls[d.index].arguments += d.function?.arguments ?? "";
    }
    out.finish = c.finish_reason ?? out.finish;
  }
  return out;
}

function assertValidArgs(args, schema, text) {
  const v = JSON.parse(args);
  for (const k of schema.required) assert.ok(k in v, `${k} missing: ${text}`);
  for (const [k, x] of Object.entries(v)) {
    const p = schema.properties[k];
    assert.ok(p, `unknown parameter ${k}: ${text}`);
    if (p.enum) assert.ok(p.enum.includes(x), `${k}=${x}: ${text}`);
    if (p.type === "integer") assert.ok(Number.isInteger(x), `${k}=${x}: ${text}`);
  }
}

// A sweep of ~60 forced calls: Release only. Under the sanitizers (CI's
// KVSERVE_SANITIZED, where it took 140 s) the same steering runs in
// engine_test (AFreeDrawNeverPutsTheEndOutOfReach) and the cut-call parsing in
// tool_call_templates_test.cc / tool_call_formats_test.
describe("forced calls within max_tokens (stories260K)", { skip: !stories || !existsSync(templates) || !!process.env.KVSERVE_SANITIZED }, () => {
  for (const [file, { shortest, shortestRequired }] of Object.entries(BUDGET_CASES)) {
    test(file, async () => {
      const entry = await serve(["--model", stories, "--chat-template", path.join(templates, file)]);
      // Tokens of a text as the model writes it. stories260K's SentencePiece
      // reads DeepSeek's "▁" (U+2581) as its space mark, a one-token piece,
      // while the model has to write its three bytes: count a three-byte
      // character without merges in its place.
      const count = async (text) => {
        const prompt = text.replaceAll("▁", "▂");
        const t = await request(entry.s, "POST", "/tokenize", { model: entry.model, prompt, add_special_tokens: false });
        assert.equal(t.status, 200, t.text);
        return t.json.count;
      };
      // Tight budgets: the shortest call's tokens and its stop token, and 1.5
      // times that.
      const n = await count(shortest);
      for (const budget of [n + 1, Math.ceil(1.5 * n)]) {
        for (const stream of [false, true]) {
          for (const seed of [1, 2]) {
            const got = await forcedCall(entry, WEATHER2, budget, seed, stream);
            const what = `max_tokens ${budget} (shortest call ${n}), ${stream ? "streamed" : "whole"}: ${JSON.stringify(got)}`;
            assert.equal(got.finish, "tool_calls", what);
            assert.equal(got.calls.length, 1, what);
            assert.equal(got.calls[0].name, "get_weather", what);
            assertValidArgs(got.calls[0].arguments, WEATHER2, what);
          }
        }
      }
      // Optional parameters: no budget from the shortest call up lets a free
      // token open a parameter whose tags no longer fit.
      const m = await count(shortestRequired);
      for (const k of [1, 1.25, 1.5, 1.75, 2, 2.5]) {
        for (const seed of [1, 2, 3]) {
          const got = await forcedCall(entry, OPTIONAL, Math.ceil(k * m), seed, false);
          const what = `max_tokens ${Math.ceil(k * m)} (shortest call ${m}): ${JSON.stringify(got)}`;
          assert.equal(got.finish, "tool_calls", what);
          assertValidArgs(got.calls[0].arguments, OPTIONAL, what);
        }
      }
      // Too small a budget: the call is cut, the same streamed and not. After
      // its name it is a call with JSON arguments (what was complete); before
      // it, the text as written (a character cut in its bytes shows as U+FFFD).
      for (const budget of [Math.floor(0.8 * n), Math.floor(0.5 * n), 8]) {
        const whole = await forcedCall(entry, WEATHER2, budget, 1, false);
        const streamed = await forcedCall(entry, WEATHER2, budget, 1, true);
        const what = `max_tokens ${budget}: ${JSON.stringify(whole)}`;
        assert.equal(whole.finish, "length", what);
        assert.deepEqual(streamed.calls, whole.calls, `streamed: ${JSON.stringify(streamed)}`);
        assert.equal(streamed.content, whole.content, `streamed: ${JSON.stringify(streamed)}`);
        if (budget === 8) assert.equal(whole.calls.length, 0, what);
        if (budget === Math.floor(0.8 * n)) assert.equal(whole.calls.length, 1, what);
        if (whole.calls.length) {
          const args = JSON.parse(whole.calls[0].arguments);
          for (const [k, v] of Object.entries(args)) assert.ok(WEATHER2.properties[k].enum.includes(v), what);
        } else {
          assert.ok(shortest.startsWith(whole.content.replace(/\uFFFD+$/, "")), what);
        }
      }
      await stop(entry);
    });
  }
});

// Runs `kvserve serve` that must fail; resolves {code, stderr}.
function serveFails(args) {
  return new Promise((resolve) => {
    const child = spawn(binary, ["serve", "--port", "0", "--threads", "1", ...args], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stderr });
    });
  });
}

describe("model.chat_template errors", () => {
  test("a missing file stops the start-up (exit 2), naming the key", async () => {
    const { code, stderr } = await serveFails(["--chat-template", "/nonexistent/chat.jinja"]);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /model\.chat_template: \/nonexistent\/chat\.jinja is neither a built-in template \(chatml, .*\) nor a readable file/);
  });
  test("a template that does not parse fails the model load, naming the file and line", async () => {
    const dir = madeTempDir("kvserve-tmpl-");
    const broken = path.join(dir, "broken.jinja");
    writeFileSync(broken, "{% for m in messages %}\n{{ m.content }}\n{% if %}");
    const { code, stderr } = await serveFails(["--chat-template", broken]);
    assert.equal(code, 1, stderr);
    assert.ok(stderr.includes(`chat template ${broken}`), stderr);
    assert.match(stderr, /line 3/);
  });
});
