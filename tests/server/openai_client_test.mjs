// kvserve serve (fake backend) driven by the official `openai` npm client:
// completions and chat, streaming, usage, n, logprobs, stop strings, models,
// and the errors the client surfaces.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { STORY, loadOpenAI, requireBinary, startServer } from "./common.mjs";

requireBinary();
const OpenAI = await loadOpenAI();

const KEY = "sk-test-key-1";
let server;
let client;
const MODEL = "fake-model";

before(async () => {
  server = await startServer({ args: ["--api-keys", `${KEY},sk-other`, "--served-model-name", MODEL] });
  client = new OpenAI({ apiKey: KEY, baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
});

after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, "kvserve exits 0 after SIGTERM");
});

describe("completions", () => {
  test("greedy completion returns the story with usage", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: "Hello", max_tokens: 10, temperature: 0 });
    assert.equal(r.object, "text_completion");
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.model, MODEL);
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].index, 0);
    assert.equal(r.choices[0].finish_reason, "length");
    assert.equal(r.choices[0].text, "Once upon a time, there was a little girl");
    assert.equal(r.usage.completion_tokens, 10);
    assert.ok(r.usage.prompt_tokens >= 2, "BOS + prompt");
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
    assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, "number");
  });

  test("the story ends with EOS: finish_reason stop", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: "x", max_tokens: 200, temperature: 0 });
    assert.equal(r.choices[0].text, STORY);
    assert.equal(r.choices[0].finish_reason, "stop");
    assert.equal(r.usage.completion_tokens, 47);
  });

  test("stop strings spanning tokens end the text before them", async () => {
    const r = await client.completions.create({
      model: MODEL,
      prompt: "x",
      max_tokens: 100,
      temperature: 0,
      stop: ["girl named Li", "never"],
    });
    assert.equal(r.choices[0].text, "Once upon a time, there was a little ");
    assert.equal(r.choices[0].finish_reason, "stop");
    // Tokens up to the one completing the stop string were generated.
    assert.equal(r.usage.completion_tokens, 12);
  });

  test("a stop string inside a multi-byte character's tokens", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: "x", max_tokens: 100, temperature: 0, stop: ["é w"] });
    assert.equal(r.choices[0].text, "Once upon a time, there was a little girl named Lily. She loved to play in the park. One day, she went to a caf");
  });

  test("streaming: text deltas join to the non-streamed text; usage chunk last", async () => {
    const stream = await client.completions.create({
      model: MODEL,
      prompt: "Hello",
      max_tokens: 40,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      assert.equal(chunk.object, "text_completion");
      if (chunk.usage) {
        usage = chunk.usage;
        assert.deepEqual(chunk.choices, []);
        continue;
      }
      assert.equal(chunk.usage, null, "every other chunk has usage: null");
      for (const c of chunk.choices) {
        text += c.text;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.ok(chunks > 10);
    assert.equal(text, STORY.slice(0, text.length));
    assert.equal(finish, "length");
    assert.equal(usage.completion_tokens, 40);
    assert.equal(usage.total_tokens, usage.prompt_tokens + 40);
  });

  test("n=3 with a seed gives three indexed choices; usage counts all", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: "Hi", max_tokens: 5, n: 3, seed: 4 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    assert.equal(r.usage.completion_tokens, 15);
    // Seeds 4, 5, 6: each choice starts at a different story position.
    assert.equal(new Set(r.choices.map((c) => c.text)).size, 3);
    const again = await client.completions.create({ model: MODEL, prompt: "Hi", max_tokens: 5, n: 3, seed: 4 });
    assert.deepEqual(again.choices.map((c) => c.text), r.choices.map((c) => c.text), "same seed, same output");
  });

  test("several prompts and token-id prompts", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: ["a", "b"], max_tokens: 2, temperature: 0 });
    assert.equal(r.choices.length, 2);
    assert.deepEqual(r.choices.map((c) => c.text), ["Once upon", "Once upon"]);
    const ids = await client.completions.create({ model: MODEL, prompt: [1, 70, 71], max_tokens: 1, temperature: 0 });
    assert.equal(ids.usage.prompt_tokens, 3);
  });

  test("echo prepends the prompt", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: "Say: ", max_tokens: 1, temperature: 0, echo: true });
    assert.equal(r.choices[0].text, "Say: Once");
  });

  test("logprobs: tokens, token_logprobs, top_logprobs, text_offset", async () => {
    const r = await client.completions.create({ model: MODEL, prompt: "x", max_tokens: 4, temperature: 0, logprobs: 2 });
    const lp = r.choices[0].logprobs;
    assert.deepEqual(lp.tokens, ["Once", " upon", " a", " time"]);
    assert.equal(lp.token_logprobs.length, 4);
    assert.ok(lp.token_logprobs.every((v) => v < 0));
    assert.equal(lp.top_logprobs.length, 4);
    assert.equal(Object.keys(lp.top_logprobs[0]).length, 2);
    assert.deepEqual(lp.text_offset, [0, 4, 9, 11]);
  });
});

describe("chat", () => {
  test("chat completion with usage", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: "system", content: "You tell stories." },
        { role: "user", content: "Tell me one." },
      ],
      max_completion_tokens: 6,
      temperature: 0,
    });
    assert.equal(r.object, "chat.completion");
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.choices[0].message.role, "assistant");
    assert.equal(r.choices[0].message.content, "Once upon a time, there");
    assert.equal(r.choices[0].finish_reason, "length");
    assert.equal(r.usage.completion_tokens, 6);
  });

  test("chat without max_tokens runs to the end of the story", async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Go" }], temperature: 0 });
    assert.equal(r.choices[0].message.content, STORY);
    assert.equal(r.choices[0].finish_reason, "stop");
  });

  test("streaming chat: role first, content deltas, finish chunk, usage", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: [{ type: "text", text: "Tell" }, { type: "text", text: "me" }] }],
      max_tokens: 31,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let content = "";
    let role = null;
    let finish = null;
    let usage = null;
    for await (const chunk of stream) {
      assert.equal(chunk.object, "chat.completion.chunk");
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (c.delta.role) role = c.delta.role;
        if (c.delta.content) content += c.delta.content;
        if (c.finish_reason) finish = c.finish_reason;
      }
    }
    assert.equal(role, "assistant");
    // 31 tokens end just after the two byte tokens of "é".
    assert.equal(content, "Once upon a time, there was a little girl named Lily. She loved to play in the park. One day, she went to a café");
    assert.equal(finish, "length");
    assert.equal(usage.completion_tokens, 31);
  });

  test("chat logprobs with top_logprobs", async () => {
    const r = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "x" }],
      max_tokens: 3,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = r.choices[0].logprobs.content;
    assert.deepEqual(content.map((t) => t.token), ["Once", " upon", " a"]);
    assert.deepEqual(content[0].bytes, [...Buffer.from("Once")]);
    assert.equal(content[0].top_logprobs.length, 3);
    assert.equal(content[0].top_logprobs[0].token, "Once");
  });

  test("streaming chat with n=2 interleaves indexed choices", async () => {
    const stream = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "x" }],
      max_tokens: 4,
      temperature: 0,
      n: 2,
      stream: true,
    });
    const text = ["", ""];
    const finish = [null, null];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        text[c.index] += c.delta.content ?? "";
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
    assert.deepEqual(text, ["Once upon a time", "Once upon a time"]);
    assert.deepEqual(finish, ["length", "length"]);
  });
});

describe("models and errors through the client", () => {
  test("models.list shows the model with sha256 and load time", async () => {
    const page = await client.models.list();
    assert.equal(page.data.length, 1);
    const m = page.data[0];
    assert.equal(m.id, MODEL);
    assert.equal(m.object, "model");
    assert.equal(typeof m.created, "number");
    assert.equal(typeof m.load_time_seconds, "number");
    const one = await client.models.retrieve(MODEL);
    assert.equal(one.id, MODEL);
  });

  test("wrong key: AuthenticationError (401)", async () => {
    const bad = new OpenAI({ apiKey: "sk-wrong", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e.status === 401 && e.code === "invalid_api_key");
    const other = new OpenAI({ apiKey: "sk-other", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
    assert.equal((await other.models.list()).data.length, 1, "every configured key works");
  });

  test("unknown model: NotFoundError (404)", async () => {
    await assert.rejects(
      client.completions.create({ model: "gpt-4", prompt: "x" }),
      (e) => e.status === 404 && e.code === "model_not_found" && e.param === "model",
    );
  });

  test("bad field: BadRequestError naming the field", async () => {
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "x" }], temperature: 7 }),
      (e) => e.status === 400 && e.param === "temperature" && /temperature/.test(e.message),
    );
  });

  test("too long: 400 context_length_exceeded with the numbers", async () => {
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: "x", max_tokens: 100000 }),
      (e) =>
        e.status === 400 &&
        e.code === "context_length_exceeded" &&
        e.error.max_tokens === 100000 &&
        e.error.max_context_length === 32768 &&
        typeof e.error.prompt_tokens === "number",
    );
  });
});
