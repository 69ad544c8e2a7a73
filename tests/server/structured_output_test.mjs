// Structured output end to end: `kvserve serve` on the bundled model, driven
// by the official openai client. response_format json_schema replies are
// checked by ajv (an independent validator), json_object replies by
// JSON.parse; vLLM's guided_choice / guided_regex, streaming, logit_bias, and
// the 400s for what cannot be served.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { existsSync } from "node:fs";

import { loadOpenAI, request, requireBinary, skipFile, sourceDir, startServer } from "./common.mjs";

requireBinary();
const OpenAI = await loadOpenAI();
const ajvDir = path.join(sourceDir, "tests/oracles/node_modules/ajv");
if (!existsSync(ajvDir)) skipFile("ajv is missing (run scripts/setup.sh to install the npm test oracles)");
const Ajv2020 = (await import(path.join(ajvDir, "dist/2020.js"))).default;
const addFormats = (await import(path.join(sourceDir, "tests/oracles/node_modules/ajv-formats/dist/index.js"))).default;
const ajv = new Ajv2020({ strict: false });
addFormats(ajv);

let server;
let client;
let MODEL;
const messages = [{ role: "user", content: "Describe a person as JSON." }];

before(async () => {
  server = await startServer({
    fake: false,
    args: ["--config", path.join(sourceDir, "configs/default.yaml"), "--threads", "2"],
  });
  client = new OpenAI({ apiKey: "none", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
  MODEL = (await client.models.list()).data[0].id;
});

after(async () => {
  if (server) assert.equal((await server.stop()).code, 0);
});

// Every value bounded, so a reply always completes well within max_tokens.
const PERSON = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 8 },
    age: { type: "integer", minimum: 0, maximum: 120 },
    role: { enum: ["admin", "user", "guest"] },
    tags: { type: "array", items: { type: "string", maxLength: 4 }, maxItems: 3 },
    born: { type: "string", format: "date" },
    active: { type: "boolean" },
  },
  required: ["name", "age", "role", "active"],
  additionalProperties: false,
};

describe("response_format", () => {
  test("json_schema: every choice is valid against the schema (ajv)", async () => {
    const validate = ajv.compile(PERSON);
    const r = await client.chat.completions.create({
      model: MODEL,
      messages,
      n: 6,
      seed: 1,
      temperature: 1,
      max_tokens: 1500,
      response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: PERSON } },
    });
    assert.equal(r.choices.length, 6);
    const texts = new Set();
    for (const c of r.choices) {
      assert.equal(c.finish_reason, "stop", c.message.content);
      const value = JSON.parse(c.message.content);
      assert.ok(validate(value), `${c.message.content}: ${JSON.stringify(validate.errors)}`);
      texts.add(c.message.content);
    }
    assert.ok(texts.size > 1, "sampled choices differ");
  });

  test("json_schema streamed: the deltas join to a valid document", async () => {
    const validate = ajv.compile(PERSON);
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages,
      seed: 7,
      max_tokens: 1500,
      stream: true,
      response_format: { type: "json_schema", json_schema: { name: "person", schema: PERSON } },
    });
    let text = "";
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        text += c.delta.content ?? "";
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(finish, "stop");
    assert.ok(validate(JSON.parse(text)), text);
  });

  test("json_object: a reply that ends is one JSON object", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages,
      n: 4,
      seed: 3,
      max_tokens: 400,
      response_format: { type: "json_object" },
    });
    let stopped = 0;
    for (const c of r.choices) {
      const t = c.message.content;
      assert.match(t, /^\{/, t);
      if (c.finish_reason === "stop") {
        const v = JSON.parse(t);
        assert.equal(typeof v, "object");
        assert.ok(v !== null && !Array.isArray(v), t);
        ++stopped;
      } else {
        assert.equal(c.finish_reason, "length");
      }
    }
    assert.ok(stopped > 0, "at least one reply completes");
  });

  test("near max_tokens the reply is steered to a valid end", async () => {
    // An unbounded string: left alone the model would write past 24 tokens.
    const schema = { type: "object", properties: { story: { type: "string" } }, required: ["story"], additionalProperties: false };
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Tell a long story as JSON." }],
      n: 4,
      seed: 5,
      temperature: 1,
      max_tokens: 24,
      response_format: { type: "json_schema", json_schema: { name: "story", strict: true, schema } },
    });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, "stop", c.message.content);
      assert.ok(ajv.validate(schema, JSON.parse(c.message.content)), c.message.content);
    }
    assert.ok(r.usage.completion_tokens > 4 * 12, "the replies use their budget before closing");
  });

  test("an unsupported schema construct is a 400 naming it", async () => {
    await assert.rejects(
      client.chat.completions.create({
        model: MODEL,
        messages,
        response_format: {
          type: "json_schema",
          json_schema: { name: "x", schema: { type: "array", items: { type: "integer" }, uniqueItems: true } },
        },
      }),
      (e) => {
        assert.equal(e.status, 400);
        assert.match(e.message, /uniqueItems/);
        assert.equal(e.param, "response_format.json_schema.schema");
        return true;
      },
    );
  });
});

describe("vLLM guided decoding", () => {
  test("guided_choice on completions: exactly one of the choices", async () => {
    const choices = ["positive", "negative", "neutral"];
    const r = await client.completions.create({ model: MODEL, prompt: "Sentiment:", n: 5, seed: 2, max_tokens: 20, guided_choice: choices });
    for (const c of r.choices) {
      assert.ok(choices.includes(c.text), c.text);
      assert.equal(c.finish_reason, "stop");
    }
  });

  test("guided_regex: the whole output matches", async () => {
    const r = await client.completions.create({
      model: MODEL,
      prompt: "Phone:",
      n: 4,
      seed: 5,
      max_tokens: 40,
      guided_regex: "\\+1-[0-9]{3}-[0-9]{4}",
    });
    for (const c of r.choices) {
      assert.match(c.text, /^\+1-[0-9]{3}-[0-9]{4}$/);
      assert.equal(c.finish_reason, "stop");
    }
  });

  test("two constraints at once are a 400", async () => {
    const res = await request(server, "POST", "/v1/completions", {
      model: MODEL,
      prompt: "x",
      guided_regex: "a",
      guided_choice: ["a"],
    });
    assert.equal(res.status, 400);
    assert.match(res.json.error.message, /at most one/);
  });
});

describe("logit_bias", () => {
  test("+100 forces a token, -100 bans it", async () => {
    const free = await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 8, temperature: 0 });
    const first = (await request(server, "POST", "/tokenize", { prompt: free.choices[0].text, add_special_tokens: false })).json
      .tokens[0];
    const banned = await client.completions.create({
      model: MODEL,
      prompt: "Once upon a time",
      max_tokens: 8,
      temperature: 0,
      logit_bias: { [first]: -100 },
    });
    assert.notEqual(banned.choices[0].text, free.choices[0].text, "banning the greedy first token changes the reply");
    const forced = await client.completions.create({
      model: MODEL,
      prompt: "Once upon a time",
      max_tokens: 4,
      temperature: 0.8,
      seed: 1,
      logit_bias: { [first]: 100 },
    });
    const expected = (await request(server, "POST", "/detokenize", { tokens: [first, first, first, first] })).json;
    assert.equal(forced.choices[0].text, expected.prompt);
  });

  test("a token id outside the vocabulary is a 400 on logit_bias", async () => {
    const res = await request(server, "POST", "/v1/completions", { model: MODEL, prompt: "x", logit_bias: { 99999999: 5 } });
    assert.equal(res.status, 400);
    assert.equal(res.json.error.param, "logit_bias");
  });
});

// The bundled model's ChatML template shows no tool syntax of its own, so
// the server uses Hermes's (<tool_call>{json}</tool_call>).
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", minLength: 1, maxLength: 10 }, unit: { enum: ["c", "f"] } },
        required: ["city", "unit"],
        additionalProperties: false,
      },
    },
  },
  {
    type: "function",
    function: {
      name: "get_time",
      parameters: {
        type: "object",
        properties: { zone: { enum: ["UTC", "CET", "PST"] } },
        required: ["zone"],
        additionalProperties: false,
      },
    },
  },
];
const validators = Object.fromEntries(TOOLS.map((t) => [t.function.name, ajv.compile(t.function.parameters)]));

function checkCall(call) {
  assert.equal(call.type, "function");
  assert.match(call.id, /^call_/);
  const validate = validators[call.function.name];
  assert.ok(validate, `unknown function ${call.function.name}`);
  const args = JSON.parse(call.function.arguments);
  assert.ok(validate(args), `${call.function.arguments}: ${JSON.stringify(validate.errors)}`);
}

describe("tools", () => {
  const toolMessages = [{ role: "user", content: "What is the weather in Oslo?" }];

  test("tool_choice required: every reply is a valid call, finish_reason tool_calls", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: toolMessages,
      tools: TOOLS,
      tool_choice: "required",
      n: 4,
      seed: 11,
      max_tokens: 600,
    });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, "tool_calls", JSON.stringify(c.message));
      assert.ok(c.message.tool_calls.length >= 1);
      for (const call of c.message.tool_calls) checkCall(call);
    }
  });

  test("a named function, no parallel calls: exactly that one call", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: toolMessages,
      tools: TOOLS,
      tool_choice: { type: "function", function: { name: "get_time" } },
      parallel_tool_calls: false,
      n: 3,
      seed: 4,
      max_tokens: 600,
    });
    for (const c of r.choices) {
      assert.equal(c.finish_reason, "tool_calls");
      assert.equal(c.message.tool_calls.length, 1);
      assert.equal(c.message.tool_calls[0].function.name, "get_time");
      checkCall(c.message.tool_calls[0]);
    }
  });

  test("streamed: id and name first, then argument fragments that join to valid JSON", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: toolMessages,
      tools: TOOLS,
      tool_choice: { type: "function", function: { name: "get_weather" } },
      parallel_tool_calls: false,
      seed: 8,
      max_tokens: 600,
      stream: true,
    });
    const calls = [];
    let finish = null;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        for (const t of c.delta.tool_calls ?? []) {
          if (!calls[t.index]) {
            assert.ok(t.id && t.function.name, "the first fragment of a call has its id and name");
            calls[t.index] = { id: t.id, type: t.type, function: { name: t.function.name, arguments: "" } };
          }
          calls[t.index].function.arguments += t.function.arguments ?? "";
        }
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(finish, "tool_calls");
    assert.equal(calls.length, 1);
    assert.equal(calls[0].function.name, "get_weather");
    checkCall(calls[0]);
  });

  test("tool_choice naming an unknown function is a 400", async () => {
    await assert.rejects(
      client.chat.completions.create({
        model: MODEL,
        messages: toolMessages,
        tools: TOOLS,
        tool_choice: { type: "function", function: { name: "nope" } },
      }),
      (e) => e.status === 400 && e.param === "tool_choice",
    );
  });
});
