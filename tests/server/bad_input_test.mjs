// The bad-input battery (issue 10), through the real `kvserve serve` binary
// on the bundled model (models/kvserve-tiny.gguf): every request a client or
// an attacker might send gets the right 4xx/5xx in OpenAI's error shape, and
// the process keeps serving; it never dies.
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";

import { request, requireBinary, sourceDir, startServer } from "./common.mjs";

requireBinary();

const MODEL = `${sourceDir}/models/kvserve-tiny.gguf`;
const KEY = "sk-battery";
const AUTH = { authorization: `Bearer ${KEY}` };
const OTHER = { authorization: "Bearer sk-other-tenant" };
let server;
let model;

function assertError(r, status, { code, param } = {}) {
  assert.equal(r.status, status, r.text.slice(0, 500));
  assert.ok(r.json && r.json.error, `OpenAI error shape: ${r.text.slice(0, 200)}`);
  for (const k of ["message", "type", "param", "code"]) assert.ok(k in r.json.error, `error.${k} present`);
  if (code !== undefined) assert.equal(r.json.error.code, code);
  if (param !== undefined) assert.equal(r.json.error.param, param);
  return r.json.error;
}

async function alive() {
  assert.equal(server.child.exitCode, null, `the server exited:\n${server.stderr().slice(-2000)}`);
  assert.equal((await request(server, "GET", "/health")).status, 200);
}

before(async () => {
  server = await startServer({
    fake: false,
    args: ["--model", MODEL, "--threads", "1", "--api-keys", `${KEY},sk-other-tenant`, "--max-concurrent-requests", "8"],
  });
  model = (await request(server, "GET", "/v1/models", undefined, AUTH)).json.data[0].id;
});

after(async () => {
  if (server) assert.equal((await server.stop()).code, 0, "a clean drain: the process never died");
});

describe("deep nesting (item 1)", () => {
  const deep = (n) => "[".repeat(n) + "]".repeat(n);
  test("a 100,000-deep prompt to /v1/completions is refused, naming the limit", async () => {
    const body = `{"model":"${model}","prompt":${deep(100000)}}`;
    const e = assertError(await request(server, "POST", "/v1/completions", body, AUTH), 400, { code: "invalid_json" });
    assert.match(e.message, /64/);
    await alive();
  });
  test("a chat message content nested 50,000 deep", async () => {
    const body = `{"model":"${model}","messages":[{"role":"user","content":${deep(50000)}}]}`;
    assertError(await request(server, "POST", "/v1/chat/completions", body, AUTH), 400);
    await alive();
  });
  test("deep tools, /tokenize and /detokenize bodies", async () => {
    const tools = `{"model":"${model}","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":${"{\"a\":".repeat(20000)}1${"}".repeat(20000)}}}]}`;
    assertError(await request(server, "POST", "/v1/chat/completions", tools, AUTH), 400);
    assertError(await request(server, "POST", "/tokenize", `{"prompt":${deep(100000)}}`, AUTH), 400);
    assertError(await request(server, "POST", "/tokenize", `{"messages":[{"role":"user","content":${deep(100000)}}]}`, AUTH), 400);
    assertError(await request(server, "POST", "/detokenize", `{"tokens":${deep(100000)}}`, AUTH), 400);
    await alive();
  });
  test("a wide value is never echoed whole in an error", async () => {
    const r = await request(server, "POST", "/v1/completions",
      { model, prompt: [1, Array.from({ length: 200000 }, (_, i) => i)] }, AUTH);
    const e = assertError(r, 400);
    assert.ok(e.message.length < 300, e.message);
    const role = await request(server, "POST", "/v1/chat/completions",
      { model, messages: [{ role: "x".repeat(1 << 20), content: "hi" }] }, AUTH);
    assert.ok(assertError(role, 400).message.length < 300);
    const name = await request(server, "POST", "/v1/completions", { model: "m".repeat(1 << 20), prompt: "x" }, AUTH);
    assert.ok(assertError(name, 404).message.length < 300);
    await alive();
  });
});

describe("tenants (item 7)", () => {
  test("each API key is its own prefix-cache namespace; cache_salt subdivides it", async () => {
    const prompt = "Once upon a time there was a little girl who liked to play in the park with her dog. ".repeat(4);
    const cached = async (auth, extra = {}) => {
      const r = await request(server, "POST", "/v1/completions", { model, prompt, max_tokens: 1, ...extra }, auth);
      assert.equal(r.status, 200, r.text);
      return r.json.usage.prompt_tokens_details.cached_tokens;
    };
    assert.equal(await cached(AUTH), 0);
    const full = await cached(AUTH);
    assert.ok(full > 0, "the same tenant reuses its prefix");
    assert.equal(await cached(OTHER), 0, "another tenant never sees it");
    assert.equal(await cached(OTHER, { cache_salt: "s" }), 0);
    assert.equal(await cached(AUTH, { cache_salt: "s" }), 0, "a salt subdivides a tenant's namespace");
    await alive();
  });
});

describe("what the other server tests cover, on the real model", () => {
  test("protocol errors", async () => {
    assertError(await request(server, "POST", "/v1/completions", "{oops", AUTH), 400, { code: "invalid_json" });
    assertError(await request(server, "POST", "/v1/completions", "[1,2]", AUTH), 400, { code: "invalid_json" });
    assertError(await request(server, "POST", "/v1/completions", { model, prompt: 5 }, AUTH), 400, { param: "prompt" });
    assertError(await request(server, "POST", "/v1/completions", { model, prompt: "x", max_tokens: -1 }, AUTH), 400,
      { param: "max_tokens" });
    assertError(await request(server, "POST", "/v1/completions", { model, prompt: [1, 100000] }, AUTH), 400,
      { param: "prompt" });
    assertError(await request(server, "POST", "/v1/completions", { model, prompt: "x", stop_token_ids: [100000] }, AUTH),
      400, { param: "stop_token_ids" });
    assertError(await request(server, "POST", "/v1/completions", { model, prompt: "x", max_tokens: 1000000 }, AUTH), 400,
      { code: "context_length_exceeded", param: "max_tokens" });
    assertError(await request(server, "POST", "/v1/chat/completions", { model, messages: [{ role: "user" }] }, AUTH), 400,
      { param: "messages[0].content" });
    assertError(await request(server, "POST", "/v1/completions", { model: "other", prompt: "x" }, AUTH), 404,
      { code: "model_not_found" });
    assertError(await request(server, "POST", "/v1/completions", { model, prompt: "x" }), 401, { code: "invalid_api_key" });
    assertError(await request(server, "GET", "/v1/completions", undefined, AUTH), 405);
    assertError(await request(server, "GET", "/nothing"), 404);
    assertError(await request(server, "POST", "/detokenize", { tokens: [1, -5] }, AUTH), 400, { param: "tokens" });
    assertError(await request(server, "POST", "/detokenize", { tokens: [100000] }, AUTH), 400, { param: "tokens" });
    await alive();
  });

  test("malformed HTTP gets 400 and a closed connection", async () => {
    const text = await new Promise((resolve, reject) => {
      const s = net.connect(server.port, "127.0.0.1", () => s.write("NOT AN HTTP REQUEST\r\n\r\n"));
      let got = "";
      s.on("data", (d) => (got += d));
      s.on("end", () => resolve(got));
      s.on("error", reject);
    });
    assert.match(text, /^HTTP\/1\.1 400 /);
    await alive();
  });
});
