// The other API shapes end to end on the bundled model: OpenAI's Responses
// API through the official openai client (responses.create, streamed and
// not, and the responses.stream helper that re-assembles the events), and
// Anthropic's Messages API through the official @anthropic-ai/sdk
// (messages.create, messages.stream) plus raw HTTP for the error shapes;
// and the openai client's chat.completions.parse helper. Greedy replies are
// compared with /v1/chat/completions on the same conversation (one engine
// path underneath); tool calls and JSON are checked by ajv.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { loadOpenAI, parseSse, request, requireBinary, skipFile, sourceDir, startServer } from "./common.mjs";

requireBinary();
const OpenAI = await loadOpenAI();
const oracles = path.join(sourceDir, "tests/oracles/node_modules");
for (const p of ["ajv", "ajv-formats", "@anthropic-ai/sdk"]) {
  if (!existsSync(path.join(oracles, p))) skipFile(`${p} is missing (run scripts/setup.sh to install the npm test oracles)`);
}
const Anthropic = (await import(path.join(oracles, "@anthropic-ai/sdk/index.mjs"))).default;
const Ajv2020 = (await import(path.join(oracles, "ajv/dist/2020.js"))).default;
const addFormats = (await import(path.join(oracles, "ajv-formats/dist/index.js"))).default;
const ajv = new Ajv2020({ strict: false });
addFormats(ajv);

let server;
let client;
let anthropic;
let MODEL;

before(async () => {
  server = await startServer({
    fake: false,
    args: ["--config", path.join(sourceDir, "configs/default.yaml"), "--threads", "2"],
  });
  client = new OpenAI({ apiKey: "none", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
  anthropic = new Anthropic({ apiKey: "none", baseURL: server.baseURL, maxRetries: 0 });
  MODEL = (await client.models.list()).data[0].id;
});

after(async () => {
  if (server) assert.equal((await server.stop()).code, 0);
});

const PROMPT = "Tell me a story about a cat.";

// The greedy chat completion of PROMPT with max_tokens n: what every dialect must reproduce.
async function greedyChat(n, extra = {}) {
  const r = await client.chat.completions.create({
    model: MODEL,
    messages: [{ role: "user", content: PROMPT }],
    max_tokens: n,
    temperature: 0,
    ...extra,
  });
  return r.choices[0];
}

const WEATHER = {
  type: "object",
  properties: { city: { type: "string", minLength: 1, maxLength: 10 }, unit: { enum: ["c", "f"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const validateWeather = ajv.compile(WEATHER);

describe("/v1/responses (openai client)", () => {
  test("a string input: output_text and usage as chat completions give them", async () => {
    const chat = await greedyChat(24);
    const r = await client.responses.create({ model: MODEL, input: PROMPT, max_output_tokens: 24, temperature: 0 });
    assert.equal(r.object, "response");
    assert.match(r.id, /^resp_/);
    assert.equal(r.output_text, chat.message.content);
    assert.equal(r.output[0].type, "message");
    assert.equal(r.output[0].role, "assistant");
    assert.equal(r.output[0].content[0].type, "output_text");
    assert.equal(r.status, chat.finish_reason === "length" ? "incomplete" : "completed");
    if (r.status === "incomplete") assert.equal(r.incomplete_details.reason, "max_output_tokens");
    assert.ok(r.usage.input_tokens > 0);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
    assert.equal(r.max_output_tokens, 24);
  });

  test("streamed: typed events in order, deltas join to the whole text", async () => {
    const whole = await client.responses.create({ model: MODEL, input: PROMPT, max_output_tokens: 20, temperature: 0 });
    const stream = await client.responses.create({
      model: MODEL,
      input: [{ role: "user", content: [{ type: "input_text", text: PROMPT }] }],
      max_output_tokens: 20,
      temperature: 0,
      stream: true,
    });
    const types = [];
    let text = "";
    let seq = -1;
    let last;
    for await (const ev of stream) {
      assert.equal(ev.sequence_number, seq + 1, "sequence numbers count up");
      seq = ev.sequence_number;
      types.push(ev.type);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.output_text.done") assert.equal(ev.text, text);
      last = ev;
    }
    assert.deepEqual(types.slice(0, 4), [
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    assert.ok(types.includes("response.output_text.delta"));
    assert.deepEqual(types.slice(-4, -1), ["response.output_text.done", "response.content_part.done", "response.output_item.done"]);
    assert.ok(["response.completed", "response.incomplete"].includes(last.type));
    assert.equal(text, whole.output_text);
    assert.equal(last.response.output[0].content[0].text, text);
    assert.equal(last.response.usage.output_tokens, whole.usage.output_tokens);
  });

  test("the responses.stream helper re-assembles the same response", async () => {
    const whole = await client.responses.create({ model: MODEL, input: PROMPT, instructions: "Be brief.", max_output_tokens: 16, temperature: 0 });
    const final = await client.responses.stream({ model: MODEL, input: PROMPT, instructions: "Be brief.", max_output_tokens: 16, temperature: 0 }).finalResponse();
    assert.equal(final.output_text, whole.output_text);
    assert.equal(final.instructions, "Be brief.");
  });

  test("function tools: a forced call is a function_call item with valid arguments, streamed too", async () => {
    const tools = [{ type: "function", name: "get_weather", description: "Weather in a city", parameters: WEATHER, strict: true }];
    const r = await client.responses.create({ model: MODEL, input: "Weather in Oslo?", tools, tool_choice: "required", max_output_tokens: 400, seed: 3 });
    const calls = r.output.filter((o) => o.type === "function_call");
    assert.ok(calls.length >= 1, JSON.stringify(r.output));
    for (const c of calls) {
      assert.equal(c.name, "get_weather");
      assert.match(c.call_id, /^call_/);
      assert.ok(validateWeather(JSON.parse(c.arguments)), c.arguments);
    }
    const stream = await client.responses.create({
      model: MODEL,
      input: "Weather in Oslo?",
      tools,
      tool_choice: { type: "function", name: "get_weather" },
      parallel_tool_calls: false,
      max_output_tokens: 400,
      seed: 5,
      stream: true,
    });
    let args = "";
    let added = null;
    let done = null;
    for await (const ev of stream) {
      if (ev.type === "response.output_item.added" && ev.item.type === "function_call") added = ev.item;
      if (ev.type === "response.function_call_arguments.delta") args += ev.delta;
      if (ev.type === "response.function_call_arguments.done") done = ev.arguments;
    }
    assert.equal(added.name, "get_weather");
    assert.equal(done, args);
    assert.ok(validateWeather(JSON.parse(args)), args);
  });

  test("a conversation with a call and its output is served; text.format json_schema gives valid JSON", async () => {
    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };
    const r = await client.responses.create({
      model: MODEL,
      input: [
        { role: "user", content: "Weather in Oslo?" },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: '{"city":"Oslo","unit":"c"}' },
        { type: "function_call_output", call_id: "call_1", output: "12 C" },
        { role: "user", content: "Answer as JSON." },
      ],
      tools: [{ type: "function", name: "get_weather", parameters: WEATHER }],
      text: { format: { type: "json_schema", name: "answer", schema, strict: true } },
      max_output_tokens: 100,
      seed: 1,
    });
    assert.equal(r.status, "completed");
    assert.ok(ajv.validate(schema, JSON.parse(r.output_text)), r.output_text);
  });

  test("what cannot be served is a 400 naming the field", async () => {
    const cases = [
      [{ previous_response_id: "resp_x" }, "previous_response_id"],
      [{ tools: [{ type: "web_search" }] }, "tools[0].type"],
      [{ input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] }, "input[0].content[0].type"],
      [{ max_output_tokens: 0 }, "max_output_tokens"],
      [{ input: 5 }, "input"],
    ];
    for (const [extra, param] of cases) {
      const res = await request(server, "POST", "/v1/responses", { model: MODEL, input: "hi", ...extra });
      assert.equal(res.status, 400, JSON.stringify(extra));
      assert.equal(res.json.error.param, param, res.text);
    }
  });
});

describe("/v1/messages (@anthropic-ai/sdk)", () => {
  test("a reply with text blocks, stop_reason and usage; same text as chat completions", async () => {
    const chat = await greedyChat(24);
    const m = await anthropic.messages.create({ model: MODEL, max_tokens: 24, temperature: 0, messages: [{ role: "user", content: PROMPT }] });
    assert.equal(m.type, "message");
    assert.equal(m.role, "assistant");
    assert.match(m.id, /^msg_/);
    assert.equal(m.content[0].type, "text");
    assert.equal(m.content[0].text, chat.message.content);
    assert.equal(m.stop_reason, chat.finish_reason === "length" ? "max_tokens" : "end_turn");
    assert.ok(m.usage.output_tokens > 0 && m.usage.output_tokens <= 24, JSON.stringify(m.usage));
    assert.ok(m.usage.input_tokens + m.usage.cache_read_input_tokens > 0);
  });

  test("streamed: the SDK's MessageStream assembles the same message; events are named as their type", async () => {
    const whole = await anthropic.messages.create({ model: MODEL, max_tokens: 20, temperature: 0, system: "Be brief.", messages: [{ role: "user", content: PROMPT }] });
    const final = await anthropic.messages.stream({ model: MODEL, max_tokens: 20, temperature: 0, system: "Be brief.", messages: [{ role: "user", content: PROMPT }] }).finalMessage();
    assert.deepEqual(final.content, whole.content);
    assert.equal(final.stop_reason, whole.stop_reason);
    // Same prompt; how much of it the prefix cache served may differ.
    assert.equal(final.usage.output_tokens, whole.usage.output_tokens);
    assert.equal(final.usage.input_tokens + final.usage.cache_read_input_tokens, whole.usage.input_tokens + whole.usage.cache_read_input_tokens);
    const raw = await request(server, "POST", "/v1/messages", {
      model: MODEL,
      max_tokens: 20,
      temperature: 0,
      system: [{ type: "text", text: "Be brief." }],
      messages: [{ role: "user", content: [{ type: "text", text: PROMPT }] }],
      stream: true,
    });
    const events = parseSse(raw.text).map((e) => ({ name: e.event, data: JSON.parse(e.data) }));
    for (const e of events) assert.equal(e.name, e.data.type);
    const names = events.map((e) => e.name);
    assert.deepEqual(names.slice(0, 3), ["message_start", "ping", "content_block_start"]);
    assert.deepEqual(names.slice(-3), ["content_block_stop", "message_delta", "message_stop"]);
    const text = events.filter((e) => e.name === "content_block_delta").map((e) => e.data.delta.text).join("");
    assert.equal(text, whole.content[0].text);
  });

  test("stop_sequences: stop_reason stop_sequence names the one that matched", async () => {
    const free = await anthropic.messages.create({ model: MODEL, max_tokens: 24, temperature: 0, messages: [{ role: "user", content: PROMPT }] });
    const text = free.content[0].text;
    const words = text.split(" ").filter((w) => w.length >= 2);
    assert.ok(words.length >= 3, text);
    const stop = words[2];
    const m = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 24,
      temperature: 0,
      stop_sequences: ["\u0001never", stop],
      messages: [{ role: "user", content: PROMPT }],
    });
    assert.equal(m.stop_reason, "stop_sequence");
    assert.equal(m.stop_sequence, stop);
    assert.equal(m.content[0].text, text.slice(0, text.indexOf(stop)));
  });

  test("tools: tool_choice any gives tool_use blocks with valid input; streamed input_json_delta too", async () => {
    const tools = [{ name: "get_weather", description: "Weather in a city", input_schema: WEATHER }];
    const m = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 400,
      tools,
      tool_choice: { type: "any" },
      messages: [{ role: "user", content: "Weather in Oslo?" }],
    });
    assert.equal(m.stop_reason, "tool_use");
    const uses = m.content.filter((b) => b.type === "tool_use");
    assert.ok(uses.length >= 1);
    for (const u of uses) {
      assert.match(u.id, /^toolu_/);
      assert.equal(u.name, "get_weather");
      assert.ok(validateWeather(u.input), JSON.stringify(u.input));
    }
    const final = await anthropic.messages
      .stream({
        model: MODEL,
        max_tokens: 400,
        tools,
        tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
        messages: [{ role: "user", content: "Weather in Oslo?" }],
      })
      .finalMessage();
    assert.equal(final.stop_reason, "tool_use");
    const streamed = final.content.filter((b) => b.type === "tool_use");
    assert.equal(streamed.length, 1);
    assert.ok(validateWeather(streamed[0].input), JSON.stringify(streamed[0].input));
    // The call and its result go back in: the next turn is served.
    const next = await anthropic.messages.create({
      model: MODEL,
      max_tokens: 8,
      tools,
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        { role: "assistant", content: [{ type: "tool_use", id: streamed[0].id, name: "get_weather", input: streamed[0].input }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: streamed[0].id, content: "12 C" }] },
      ],
    });
    assert.equal(next.type, "message");
  });

  test("errors come in Anthropic's shape with the right status", async () => {
    const cases = [
      [{ messages: [{ role: "user", content: "hi" }] }, 400, /max_tokens/],
      [{ max_tokens: 5, messages: [{ role: "user", content: [{ type: "image", source: {} }] }] }, 400, /image/],
      [{ max_tokens: 5, messages: [{ role: "system", content: "x" }] }, 400, /system/],
      [{ max_tokens: 5, messages: [{ role: "user", content: "hi" }], tools: [{ type: "bash_20250124", name: "bash" }] }, 400, /server tools/],
      [{ max_tokens: 5, messages: [{ role: "user", content: "hi" }], model: "nope" }, 404, /nope/],
    ];
    for (const [body, status, re] of cases) {
      const res = await request(server, "POST", "/v1/messages", { model: MODEL, ...body });
      assert.equal(res.status, status, res.text);
      assert.equal(res.json.type, "error");
      assert.equal(res.json.error.type, status === 404 ? "not_found_error" : "invalid_request_error");
      assert.match(res.json.error.message, re);
    }
    await assert.rejects(anthropic.messages.create({ model: MODEL, max_tokens: 0, messages: [{ role: "user", content: "hi" }] }), (e) => e.status === 400);
  });
});

describe("API keys on the dialect routes (fake backend)", () => {
  test("x-api-key (Anthropic's header) and Bearer both work; a wrong key is a 401 in each route's shape", async () => {
    const keyed = await startServer({ args: ["--api-keys", "sk-test-1"] });
    try {
      const model = (await request(keyed, "GET", "/v1/models", undefined, { authorization: "Bearer sk-test-1" })).json.data[0].id;
      const ok = new Anthropic({ apiKey: "sk-test-1", baseURL: keyed.baseURL, maxRetries: 0 });
      const m = await ok.messages.create({ model, max_tokens: 4, messages: [{ role: "user", content: "hi" }] });
      assert.equal(m.type, "message");
      const bad = await request(keyed, "POST", "/v1/messages", { model, max_tokens: 4, messages: [{ role: "user", content: "hi" }] }, { "x-api-key": "sk-wrong" });
      assert.equal(bad.status, 401);
      assert.deepEqual(bad.json.error.type, "authentication_error");
      assert.equal(bad.json.type, "error");
      const r = await new OpenAI({ apiKey: "sk-test-1", baseURL: `${keyed.baseURL}/v1`, maxRetries: 0 }).responses.create({ model, input: "hi", max_output_tokens: 4 });
      assert.equal(r.object, "response");
      const badResp = await request(keyed, "POST", "/v1/responses", { model, input: "hi" }, { authorization: "Bearer sk-wrong" });
      assert.equal(badResp.status, 401);
      assert.equal(badResp.json.error.code, "invalid_api_key");
    } finally {
      assert.equal((await keyed.stop()).code, 0);
    }
  });
});

describe("chat.completions.parse (openai client)", () => {
  test("a strict json_schema reply comes back parsed and valid", async () => {
    const schema = {
      type: "object",
      properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer", minimum: 0, maximum: 99 } },
      required: ["name", "age"],
      additionalProperties: false,
    };
    const r = await client.chat.completions.parse({
      model: MODEL,
      messages: [{ role: "user", content: "A person as JSON." }],
      max_tokens: 200,
      seed: 2,
      response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } },
    });
    const parsed = r.choices[0].message.parsed;
    assert.ok(parsed && ajv.validate(schema, parsed), JSON.stringify(parsed));
    assert.deepEqual(parsed, JSON.parse(r.choices[0].message.content));
  });

  test("strict function tools come back with parsed_arguments", async () => {
    const r = await client.chat.completions.parse({
      model: MODEL,
      messages: [{ role: "user", content: "Weather in Oslo?" }],
      tools: [{ type: "function", function: { name: "get_weather", parameters: WEATHER, strict: true } }],
      tool_choice: "required",
      max_tokens: 400,
      seed: 9,
    });
    const call = r.choices[0].message.tool_calls[0];
    assert.ok(validateWeather(call.function.parsed_arguments), call.function.arguments);
  });
});
