// Reasoning output end to end (docs/structured-output.md, "Reasoning").
// (a) kvserve_fake --fake-reasoning: a reasoning model's template (the
// generation prompt opens <think>) and a scripted answer (thinking, </think>,
// then the story): chat completions streamed and not (reasoning_content,
// completion_tokens_details.reasoning_tokens, stop strings on the content
// only, max_tokens inside the reasoning), chat_template_kwargs and
// reasoning_effort reaching the template (/tokenize), Anthropic thinking
// blocks through @anthropic-ai/sdk (messages.create, messages.stream),
// Responses reasoning items through the openai client (responses.create,
// responses.stream), model.reasoning_parser none.
// (b) the real engine on ../shared/models/stories260K.gguf, served with a
// reasoning template (model.chat_template): the tiny model
// never closes the section, so the whole reply is reasoning; with a JSON
// schema the grammar leaves the reasoning free and the content after the
// end tag is valid JSON.
import assert from "node:assert/strict";
import { existsSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  STORY,
  loadOpenAI,
  madeTempDir,
  parseSse,
  realModelPath,
  request,
  requireBinary,
  skipFile,
  sourceDir,
  startServer,
} from "./common.mjs";

requireBinary();
const OpenAI = await loadOpenAI();
const anthropicPath = path.join(sourceDir, "tests/oracles/node_modules/@anthropic-ai/sdk/index.mjs");
if (!existsSync(anthropicPath)) skipFile(`${anthropicPath} is missing (run scripts/setup.sh)`);
const Anthropic = (await import(anthropicPath)).default;

// What the fake thinks (FakeBackend::ReasoningScript, trimmed as the parser trims it).
const THOUGHT = "The user wants a story. One about Lily at the café will do.";
const MESSAGES = [{ role: "user", content: "Tell me a story." }];

describe("fake reasoning model", () => {
  let server;
  let client;
  let anthropic;

  before(async () => {
    server = await startServer({ args: ["--fake-reasoning", "--fake-step-ms", "0.2"] });
    client = new OpenAI({ apiKey: "none", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
    anthropic = new Anthropic({ apiKey: "none", baseURL: server.baseURL, maxRetries: 0 });
  });
  after(async () => {
    if (server) assert.equal((await server.stop()).code, 0);
  });

  test("chat: reasoning_content, content and reasoning_tokens", async () => {
    const r = await client.chat.completions.create({ model: "fake-model", messages: MESSAGES, temperature: 0 });
    const m = r.choices[0].message;
    assert.equal(m.reasoning_content, THOUGHT);
    assert.equal(m.content, STORY);
    assert.equal(r.choices[0].finish_reason, "stop");
    const reasoning = r.usage.completion_tokens_details.reasoning_tokens;
    assert.ok(reasoning > 0 && reasoning < r.usage.completion_tokens, JSON.stringify(r.usage));
  });

  test("chat stream: reasoning deltas first, then content; the client sees the same text", async () => {
    const stream = await client.chat.completions.create({
      model: "fake-model",
      messages: MESSAGES,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let reasoning = "";
    let content = "";
    let contentStarted = false;
    let usage;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      const d = chunk.choices[0]?.delta;
      if (!d) continue;
      if (d.reasoning_content) {
        assert.ok(!contentStarted, "reasoning after content");
        reasoning += d.reasoning_content;
      }
      if (d.content) {
        contentStarted = true;
        content += d.content;
      }
    }
    assert.equal(reasoning, THOUGHT);
    assert.equal(content, STORY);
    assert.ok(usage.completion_tokens_details.reasoning_tokens > 0);
  });

  test("max_tokens inside the reasoning: all reasoning, empty content", async () => {
    const r = await client.chat.completions.create({
      model: "fake-model",
      messages: MESSAGES,
      temperature: 0,
      max_tokens: 12,
    });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "length");
    assert.equal(m.content, "");
    assert.ok(m.reasoning_content.length > 0 && THOUGHT.startsWith(m.reasoning_content), m.reasoning_content);
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 12);
  });

  test("stop strings apply to the content only", async () => {
    // "café" is in the thought and in the story: only the story's ends the reply.
    const r = await client.chat.completions.create({
      model: "fake-model",
      messages: MESSAGES,
      temperature: 0,
      stop: ["café"],
    });
    assert.equal(r.choices[0].message.reasoning_content, THOUGHT);
    assert.equal(r.choices[0].message.content, STORY.slice(0, STORY.indexOf("café")));
    assert.equal(r.choices[0].finish_reason, "stop");
  });

  test("chat_template_kwargs: thinking off in the template, no reasoning in the reply", async () => {
    const r = await client.chat.completions.create({
      model: "fake-model",
      messages: MESSAGES,
      temperature: 0,
      chat_template_kwargs: { enable_thinking: false },
    });
    assert.equal(r.choices[0].message.content, STORY);
    assert.equal(r.choices[0].message.reasoning_content, null);
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 0);
  });

  test("/tokenize renders chat_template_kwargs and reasoning_effort into the prompt", async () => {
    const r = await request(server, "POST", "/tokenize", {
      messages: MESSAGES,
      reasoning_effort: "high",
      chat_template_kwargs: { enable_thinking: false },
      return_token_strs: true,
    });
    assert.equal(r.status, 200, r.text);
    const prompt = r.json.token_strs.join("");
    assert.ok(prompt.includes('[kwargs] {"reasoning_effort":"high","enable_thinking":false}'), prompt);
    assert.ok(prompt.endsWith("[assistant]<think>\n\n</think>\n\n"), prompt);
  });

  test("bad template inputs are 400s naming the field", async () => {
    const cases = [
      [{ chat_template_kwargs: "x" }, "chat_template_kwargs"],
      [{ chat_template_kwargs: { messages: [] } }, "chat_template_kwargs.messages"],
      [{ reasoning_effort: 3 }, "reasoning_effort"],
    ];
    for (const [extra, param] of cases) {
      const r = await request(server, "POST", "/v1/chat/completions", { model: "fake-model", messages: MESSAGES, ...extra });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.json.error.param, param);
    }
    const m = await request(server, "POST", "/v1/messages", {
      model: "fake-model",
      max_tokens: 5,
      messages: MESSAGES,
      thinking: { type: "sometimes" },
    });
    assert.equal(m.status, 400, m.text);
    assert.equal(m.json.error.type, "invalid_request_error");
  });

  test("Messages: a thinking block before the text (messages.create)", async () => {
    const msg = await anthropic.messages.create({
      model: "fake-model",
      max_tokens: 400,
      temperature: 0,
      thinking: { type: "enabled", budget_tokens: 1024 },
      messages: MESSAGES,
    });
    assert.equal(msg.content.length, 2, JSON.stringify(msg.content));
    assert.equal(msg.content[0].type, "thinking");
    assert.equal(msg.content[0].thinking, THOUGHT);
    assert.match(msg.content[0].signature, /^kvs-sha256-[0-9a-f]{64}$/);
    assert.equal(msg.content[1].type, "text");
    assert.equal(msg.content[1].text, STORY);
    assert.equal(msg.stop_reason, "end_turn");

    const off = await anthropic.messages.create({
      model: "fake-model",
      max_tokens: 400,
      temperature: 0,
      thinking: { type: "disabled" },
      messages: MESSAGES,
    });
    assert.deepEqual(
      off.content.map((b) => b.type),
      ["text"],
    );
    assert.equal(off.content[0].text, STORY);
  });

  test("Messages: messages.stream assembles the thinking block", async () => {
    const stream = anthropic.messages.stream({
      model: "fake-model",
      max_tokens: 400,
      temperature: 0,
      messages: MESSAGES,
    });
    let thinking = "";
    let signature = "";
    stream.on("thinking", (delta) => (thinking += delta));
    stream.on("signature", (s) => (signature = s));
    const msg = await stream.finalMessage();
    assert.equal(thinking, THOUGHT);
    assert.equal(msg.content[0].type, "thinking");
    assert.equal(msg.content[0].thinking, THOUGHT);
    assert.equal(msg.content[0].signature, signature);
    assert.match(signature, /^kvs-sha256-/);
    assert.equal(msg.content[1].text, STORY);
    // The assistant's thinking goes back in the next turn (the template gets it as reasoning_content).
    const next = await anthropic.messages.create({
      model: "fake-model",
      max_tokens: 8,
      messages: [...MESSAGES, { role: "assistant", content: msg.content }, { role: "user", content: "Again." }],
    });
    assert.equal(next.content[0].type, "thinking");
  });

  test("Responses: a reasoning item before the message (create, stream)", async () => {
    const r = await client.responses.create({
      model: "fake-model",
      input: "Tell me a story.",
      temperature: 0,
      reasoning: { effort: "low" },
    });
    assert.equal(r.output.length, 2, JSON.stringify(r.output));
    assert.equal(r.output[0].type, "reasoning");
    assert.deepEqual(r.output[0].content, [{ type: "reasoning_text", text: THOUGHT }]);
    assert.deepEqual(r.output[0].summary, []);
    assert.equal(r.output_text, STORY);
    assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
    assert.equal(r.reasoning.effort, "low");

    const stream = client.responses.stream({ model: "fake-model", input: "Tell me a story.", temperature: 0 });
    let deltas = "";
    stream.on("response.reasoning_text.delta", (e) => (deltas += e.delta));
    const fin = await stream.finalResponse();
    assert.equal(deltas, THOUGHT);
    assert.equal(fin.output[0].type, "reasoning");
    assert.equal(fin.output[0].content[0].text, THOUGHT);
    assert.equal(fin.output_text, STORY);

    // The reasoning item goes back as input of the next turn.
    const next = await client.responses.create({
      model: "fake-model",
      input: [{ role: "user", content: "Tell me a story." }, ...r.output, { role: "user", content: "Again." }],
      max_output_tokens: 8,
    });
    assert.equal(next.output[0].type, "reasoning");
  });
});

// (c) The same through a real `kvserve gateway` (one key, the fake replica
// behind it): every dialect's reasoning reaches the client through the
// gateway's relay, streamed and not (the gateway counts prompts with
// stories260K's tokenizer; the fake's replies are what is checked).
describe("through a gateway", { skip: !realModelPath() }, () => {
  let replica, gw, client, anthropic;
  before(async () => {
    const { addKey, startGateway, tempDir } = await import("../gateway/common.mjs");
    replica = await startServer({ args: ["--fake-reasoning", "--fake-step-ms", "0.2"] });
    const keyFile = path.join(tempDir(), "keys.yaml");
    const key = addKey(keyFile, "thinkers");
    gw = await startGateway({
      model: realModelPath(),
      gateway: { key_file: keyFile },
      pools: [{ name: "main", max_context: 4096, replicas: [replica.baseURL] }],
    });
    client = new OpenAI({ apiKey: key, baseURL: `${gw.baseURL}/v1`, maxRetries: 0 });
    anthropic = new Anthropic({ apiKey: key, baseURL: gw.baseURL, maxRetries: 0 });
  });
  after(async () => {
    if (gw) assert.equal((await gw.stop()).code, 0);
    if (replica) await replica.stop();
  });

  test("chat: reasoning_content whole and streamed", async () => {
    const r = await client.chat.completions.create({ model: "fake-model", messages: MESSAGES, temperature: 0 });
    assert.equal(r.choices[0].message.reasoning_content, THOUGHT);
    assert.equal(r.choices[0].message.content, STORY);
    const stream = await client.chat.completions.create({ model: "fake-model", messages: MESSAGES, temperature: 0, stream: true });
    let reasoning = "";
    let content = "";
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta ?? {};
      reasoning += d.reasoning_content ?? "";
      content += d.content ?? "";
    }
    assert.equal(reasoning, THOUGHT);
    assert.equal(content, STORY);
  });

  test("Messages: the SDK's stream assembles the thinking block", async () => {
    const msg = await anthropic.messages
      .stream({ model: "fake-model", max_tokens: 400, temperature: 0, messages: MESSAGES, thinking: { type: "enabled", budget_tokens: 1024 } })
      .finalMessage();
    assert.equal(msg.content[0].type, "thinking");
    assert.equal(msg.content[0].thinking, THOUGHT);
    assert.equal(msg.content[1].type, "text");
    assert.equal(msg.content[1].text, STORY);
  });

  test("Responses: a reasoning item before the message, created and streamed", async () => {
    const r = await client.responses.create({ model: "fake-model", input: "Tell me a story.", temperature: 0 });
    assert.equal(r.output[0].type, "reasoning");
    assert.deepEqual(r.output[0].content, [{ type: "reasoning_text", text: THOUGHT }]);
    assert.equal(r.output_text, STORY);
    const streamed = await client.responses.stream({ model: "fake-model", input: "Tell me a story.", temperature: 0 }).finalResponse();
    assert.deepEqual(streamed.output[0].content, r.output[0].content);
    assert.equal(streamed.output_text, STORY);
  });
});

describe("model.reasoning_parser none", () => {
  test("the raw text is content", async () => {
    const server = await startServer({ args: ["--fake-reasoning", "--fake-step-ms", "0.2", "--reasoning-parser", "none"] });
    try {
      const r = await request(server, "POST", "/v1/chat/completions", {
        model: "fake-model",
        messages: MESSAGES,
        temperature: 0,
      });
      assert.equal(r.status, 200, r.text);
      const m = r.json.choices[0].message;
      assert.equal(m.reasoning_content, undefined);
      assert.ok(m.content.startsWith(THOUGHT + "\n</think>\n\n"), m.content);
      assert.equal(r.json.usage.completion_tokens_details, undefined);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  });
});

describe("real engine, reasoning template", () => {
  let server;
  let client;

  before(async () => {
    const model = realModelPath();
    if (!model) return;
    const dir = madeTempDir("kvserve-reasoning-");
    const tmpl = path.join(dir, "reasoning.jinja");
    // A reasoning model's template: the generation prompt opens the section
    // (an empty closed one with enable_thinking false).
    writeFileSync(
      tmpl,
      "{%- for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}" +
        "{%- if add_generation_prompt %}assistant: " +
        "{%- if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n" +
        "{%- else %}<think>\n{% endif %}{% endif %}",
    );
    server = await startServer({
      fake: false,
      args: ["-m", model, "--chat-template", tmpl, "--threads", "2", "--max-context-length", "512"],
    });
    client = new OpenAI({ apiKey: "none", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
  });
  after(async () => {
    if (server) assert.equal((await server.stop()).code, 0);
  });

  test("a reply that never closes the section is all reasoning", async (t) => {
    if (!server) return t.skip("../shared/models/stories260K.gguf is absent");
    const r = await client.chat.completions.create({
      model: "stories260K",
      messages: MESSAGES,
      temperature: 0,
      max_tokens: 24,
    });
    const m = r.choices[0].message;
    assert.equal(m.content, "");
    assert.ok(m.reasoning_content.length > 20, m.reasoning_content);
    assert.equal(r.choices[0].finish_reason, "length");
    assert.equal(r.usage.completion_tokens_details.reasoning_tokens, 24);
  });

  test("a JSON schema constrains the content after the reasoning", async (t) => {
    if (!server) return t.skip("../shared/models/stories260K.gguf is absent");
    const schema = {
      type: "object",
      properties: { answer: { type: "integer" } },
      required: ["answer"],
      additionalProperties: false,
    };
    const body = {
      model: "stories260K",
      messages: MESSAGES,
      temperature: 0,
      max_tokens: 48,
      response_format: { type: "json_schema", json_schema: { name: "a", schema, strict: true } },
    };
    const r = await client.chat.completions.create(body);
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "stop", JSON.stringify(m));
    // The reasoning ran free (story text, not JSON) until the end had to come.
    assert.ok(m.reasoning_content.length > 20, m.reasoning_content);
    assert.ok(!m.reasoning_content.trimStart().startsWith("{"), m.reasoning_content);
    const parsed = JSON.parse(m.content);
    assert.deepEqual(Object.keys(parsed), ["answer"]);
    assert.ok(Number.isInteger(parsed.answer));

    // Streamed: the same text (greedy), reasoning first.
    const raw = await request(server, "POST", "/v1/chat/completions", { ...body, stream: true });
    let reasoning = "";
    let content = "";
    for (const e of parseSse(raw.text)) {
      if (e.data === "[DONE]") continue;
      const d = JSON.parse(e.data).choices[0]?.delta ?? {};
      reasoning += d.reasoning_content ?? "";
      content += d.content ?? "";
    }
    assert.equal(reasoning, m.reasoning_content);
    assert.equal(content, m.content);

    // Thinking off: the grammar binds the whole reply.
    const off = await client.chat.completions.create({ ...body, chat_template_kwargs: { enable_thinking: false } });
    assert.equal(off.choices[0].message.reasoning_content, null);
    assert.deepEqual(Object.keys(JSON.parse(off.choices[0].message.content)), ["answer"]);
  });
});
