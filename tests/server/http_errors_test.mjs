// Every error kvserve serve answers, over raw HTTP, in OpenAI's error shape
// ({"error": {"message", "type", "param", "code"}}), plus the plain
// endpoints (/health, /ready, /metrics, /tokenize, /detokenize).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import net from "node:net";
import { after, before, describe, test } from "node:test";

import { metric, metrics, parseSse, request, requireBinary, startServer, waitFor } from "./common.mjs";

requireBinary();

const KEY = "sk-errors";
const AUTH = { authorization: `Bearer ${KEY}` };
let server;

function assertError(r, status, { code, param, type } = {}) {
  assert.equal(r.status, status, r.text);
  assert.ok(r.json && r.json.error, `OpenAI error shape: ${r.text}`);
  const e = r.json.error;
  for (const k of ["message", "type", "param", "code"]) assert.ok(k in e, `error.${k} present`);
  assert.equal(typeof e.message, "string");
  assert.ok(e.message.length > 0);
  if (code !== undefined) assert.equal(e.code, code);
  if (param !== undefined) assert.equal(e.param, param);
  if (type !== undefined) assert.equal(e.type, type);
  return e;
}

before(async () => {
  server = await startServer({
    args: ["--api-keys", KEY, "--max-body-bytes", "4096", "--max-context-length", "64", "--max-concurrent-requests", "2",
      "--fake-step-ms", "20"],
  });
});

after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0);
});

describe("plain endpoints", () => {
  test("/health, /ready", async () => {
    assert.deepEqual((await request(server, "GET", "/health")).json, { status: "ok" });
    assert.deepEqual((await request(server, "GET", "/ready")).json, { status: "ready" });
  });

  test("/tokenize and /detokenize (vLLM shapes) round-trip", async () => {
    const t = await request(server, "POST", "/tokenize", { model: "fake-model", prompt: "Once upon a time", return_token_strs: true }, AUTH);
    assert.equal(t.status, 200, t.text);
    assert.equal(t.json.count, t.json.tokens.length);
    assert.equal(t.json.max_model_len, 64);
    assert.equal(t.json.tokens[0], 1, "BOS first (add_special_tokens defaults to true)");
    assert.deepEqual(t.json.token_strs.slice(1), ["Once", " upon", " a", " time"]);
    const d = await request(server, "POST", "/detokenize", { tokens: t.json.tokens }, AUTH);
    assert.equal(d.status, 200);
    assert.equal(d.json.prompt, "Once upon a time");
    const chat = await request(server, "POST", "/tokenize", { messages: [{ role: "user", content: "hi" }] }, AUTH);
    assert.equal(chat.status, 200);
    assert.ok(chat.json.count > 3);
    assertError(await request(server, "POST", "/detokenize", { tokens: [1, -5] }, AUTH), 400, { param: "tokens" });
    assertError(await request(server, "POST", "/tokenize", { text: "x" }, AUTH), 400);
  });

  test("/metrics is Prometheus text with kvserve: metrics", async () => {
    const r = await request(server, "GET", "/metrics");
    assert.equal(r.status, 200);
    assert.match(r.headers["content-type"], /^text\/plain; version=0\.0\.4/);
    for (const name of [
      "kvserve:num_requests_running", "kvserve:num_requests_waiting", "kvserve:kv_cache_blocks",
      "kvserve:kv_cache_blocks_used", "kvserve:kv_cache_blocks_cached", "kvserve:kv_cache_blocks_free",
      "kvserve:kv_cache_usage_ratio", "kvserve:memory_bytes", "kvserve:max_admissible_context_tokens",
      "kvserve:prefix_cache_queried_tokens_total", "kvserve:prefix_cache_hit_tokens_total",
      "kvserve:num_preemptions_total", "kvserve:time_to_first_token_seconds", "kvserve:inter_token_latency_seconds",
      "kvserve:e2e_request_latency_seconds", "kvserve:request_queue_time_seconds", "kvserve:prompt_tokens_total",
      "kvserve:generation_tokens_total", "kvserve:request_finished_total", "kvserve:http_requests_total",
      "kvserve:process_resident_memory_bytes",
    ]) {
      assert.match(r.text, new RegExp(`^# TYPE ${name} `, "m"), name);
    }
    const m = await metrics(server);
    assert.ok(metric(m, "kvserve:process_resident_memory_bytes") > 1e6);
    assert.ok(metric(m, 'kvserve:http_requests_total{path="/metrics",status="200"}') >= 2);
  });
});

describe("errors", () => {
  test("400 invalid JSON", async () => {
    assertError(await request(server, "POST", "/v1/completions", "{oops", AUTH), 400, { code: "invalid_json" });
  });

  test("400 invalid fields name the field", async () => {
    const cases = [
      [{ model: "fake-model", prompt: "x", max_tokens: -1 }, "max_tokens"],
      [{ model: "fake-model", prompt: "x", top_p: 2 }, "top_p"],
      [{ model: "fake-model", prompt: "x", n: "2" }, "n"],
      [{ model: "fake-model", prompt: 5 }, "prompt"],
      [{ prompt: "x" }, "model"],
    ];
    for (const [body, param] of cases) {
      assertError(await request(server, "POST", "/v1/completions", body, AUTH), 400, { param, type: "invalid_request_error" });
    }
    assertError(
      await request(server, "POST", "/v1/chat/completions", { model: "fake-model", messages: [{ role: "user" }] }, AUTH),
      400, { param: "messages[0].content" });
  });

  test("400 too long, with machine-readable numbers", async () => {
    let e = assertError(
      await request(server, "POST", "/v1/completions", { model: "fake-model", prompt: "x".repeat(100) }, AUTH), 400,
      { code: "context_length_exceeded", param: "prompt" });
    assert.equal(e.prompt_tokens, 101);
    assert.equal(e.max_context_length, 64);
    assert.equal(typeof e.max_tokens, "number");
    e = assertError(
      await request(server, "POST", "/v1/completions", { model: "fake-model", prompt: "xy", max_tokens: 62 }, AUTH), 400,
      { code: "context_length_exceeded", param: "max_tokens" });
    assert.deepEqual([e.prompt_tokens, e.max_tokens, e.max_context_length], [3, 62, 64]);
    const ok = await request(server, "POST", "/v1/completions", { model: "fake-model", prompt: "xy", max_tokens: 61, temperature: 0 }, AUTH);
    assert.equal(ok.status, 200, "exactly the context length is fine");
    // Its access-log line.
    await waitFor(() => readFileSync(server.accessLog, "utf8").includes(ok.json.id));
    const line = readFileSync(server.accessLog, "utf8").trim().split("\n").map((l) => JSON.parse(l)).find((l) => l.id === ok.json.id);
    assert.equal(line.method, "POST");
    assert.equal(line.path, "/v1/completions");
    assert.equal(line.status, 200);
    assert.equal(line.prompt_tokens, 3);
    assert.equal(line.completion_tokens, 47);
    assert.equal(line.cached_tokens, 0);
    assert.equal(line.finish_reason, "stop");
    assert.ok(line.ttft_ms > 0 && line.duration_ms >= line.ttft_ms);
    assert.match(line.key_id, /^k-[0-9a-f]{8}$/);
    assert.match(line.ts, /^\d{4}-\d\d-\d\dT/);
    e = assertError(await request(server, "POST", "/v1/chat/completions",
      { model: "fake-model", messages: [{ role: "user", content: "x".repeat(80) }] }, AUTH), 400,
      { code: "context_length_exceeded", param: "messages" });
  });

  test("401 without or with a wrong key; the key never reaches the access log", async () => {
    assertError(await request(server, "GET", "/v1/models"), 401, { code: "invalid_api_key" });
    const r = await request(server, "POST", "/v1/completions", { model: "fake-model", prompt: "x" }, { authorization: "Bearer nope" });
    assertError(r, 401, { code: "invalid_api_key" });
    assert.equal(r.headers["www-authenticate"], "Bearer");
    assert.equal((await request(server, "GET", "/v1/models", undefined, AUTH)).status, 200);
    // The line is written just after the response: wait for it.
    const authedLine = () => readFileSync(server.accessLog, "utf8").trim().split("\n").map((l) => JSON.parse(l))
      .find((l) => l.path === "/v1/models" && l.status === 200);
    await waitFor(() => authedLine() !== undefined);
    const log = readFileSync(server.accessLog, "utf8");
    assert.ok(log.includes('"status":401'));
    assert.ok(!log.includes(KEY) && !log.includes("nope"), "no key in the access log");
    const authed = authedLine();
    assert.match(authed.key_id, /^k-[0-9a-f]{8}$/);
  });

  test("404 unknown route and unknown model", async () => {
    assertError(await request(server, "GET", "/v2/nothing"), 404, { code: "not_found" });
    assertError(await request(server, "POST", "/v1/completions", { model: "other", prompt: "x" }, AUTH), 404,
      { code: "model_not_found", param: "model" });
    assertError(await request(server, "GET", "/v1/models/other", undefined, AUTH), 404, { code: "model_not_found" });
  });

  test("405 wrong method", async () => {
    assertError(await request(server, "GET", "/v1/completions", undefined, AUTH), 405, { code: "method_not_allowed" });
    assertError(await request(server, "POST", "/health", {}), 405);
  });

  test("413 body too large", async () => {
    const big = JSON.stringify({ model: "fake-model", prompt: "x".repeat(10000) });
    assertError(await request(server, "POST", "/v1/completions", big, AUTH), 413, { code: "request_too_large" });
    // The server is fine afterwards.
    assert.equal((await request(server, "GET", "/health")).status, 200);
  });

  test("429 with Retry-After when the queue bound is reached", async () => {
    // max_concurrent_requests 2: a request with n=2 fills it; the next is refused.
    const slow = request(server, "POST", "/v1/completions", { model: "fake-model", prompt: "x", max_tokens: 60, n: 2, ignore_eos: true }, AUTH);
    await waitFor(async () => metric(await metrics(server), "kvserve:sequences_in_flight") === 2);
    const r = await request(server, "POST", "/v1/completions", { model: "fake-model", prompt: "x", max_tokens: 1 }, AUTH);
    assertError(r, 429, { code: "rate_limit_exceeded" });
    assert.equal(r.headers["retry-after"], "1");
    assert.equal((await slow).status, 200);
    await waitFor(async () => metric(await metrics(server), "kvserve:sequences_in_flight") === 0);
    assert.equal((await request(server, "POST", "/v1/completions", { model: "fake-model", prompt: "x", max_tokens: 1 }, AUTH)).status, 200);
    // More sequences than the bound can ever hold: 400, not 429.
    assertError(await request(server, "POST", "/v1/completions", { model: "fake-model", prompt: "x", n: 3 }, AUTH), 400, { param: "n" });
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
    assert.match(text, /"error"/);
  });
});

describe("timeouts", () => {
  let slow;
  before(async () => {
    slow = await startServer({ args: ["--request-timeout", "0.3", "--fake-step-ms", "50"] });
  });
  after(async () => {
    assert.equal((await slow.stop()).code, 0);
  });

  test("504 when request_timeout_seconds expires", async () => {
    const r = await request(slow, "POST", "/v1/completions", { model: "fake-model", prompt: "x", max_tokens: 40, ignore_eos: true });
    assertError(r, 504, { code: "request_timeout", type: "timeout_error" });
    assert.match(r.json.error.message, /request_timeout_seconds/);
    const m = await metrics(slow);
    assert.ok(metric(m, 'kvserve:request_finished_total{finish_reason="timeout"}') >= 1);
    await waitFor(async () => metric(await metrics(slow), "kvserve:kv_cache_blocks_used") === 0);
  });

  test("after streaming started, a timeout is an SSE error event, then the stream ends", async () => {
    const r = await request(slow, "POST", "/v1/chat/completions",
      { model: "fake-model", messages: [{ role: "user", content: "x" }], max_tokens: 40, stream: true, ignore_eos: true });
    assert.equal(r.status, 200);
    assert.match(r.headers["content-type"], /^text\/event-stream/);
    const events = parseSse(r.text);
    const err = events.find((e) => e.event === "error");
    assert.ok(err, r.text);
    assert.equal(JSON.parse(err.data).error.code, "request_timeout");
    assert.ok(events.some((e) => e.data.startsWith("{") && JSON.parse(e.data).choices?.[0]?.delta?.content), "some content came first");
    assert.equal(events.at(-1).data, "[DONE]");
  });
});

describe("loading and draining", () => {
  test("503 while loading, then ready", async () => {
    const s = await startServer({ args: ["--fake-load-seconds", "1.5"], waitReady: false });
    try {
      const ready = await request(s, "GET", "/ready");
      assert.equal(ready.status, 503);
      assert.equal(ready.json.status, "loading");
      assert.equal((await request(s, "GET", "/health")).status, 200, "liveness holds while loading");
      const r = await request(s, "POST", "/v1/completions", { model: "fake-model", prompt: "x" });
      assertError(r, 503, { code: "model_loading" });
      assert.ok(r.headers["retry-after"]);
      await waitFor(async () => (await request(s, "GET", "/ready")).status === 200, 15000);
      assert.equal((await request(s, "POST", "/v1/completions", { model: "fake-model", prompt: "x" })).status, 200);
    } finally {
      assert.equal((await s.stop()).code, 0);
    }
  });

  // Issue 10 item 10: SIGTERM while the model loads exits promptly (0),
  // not after the load (here 60 s).
  test("SIGTERM during model load exits promptly", async () => {
    const s = await startServer({ args: ["--fake-load-seconds", "60"], waitReady: false });
    assert.equal((await request(s, "GET", "/ready")).status, 503);
    const t0 = Date.now();
    s.child.kill("SIGTERM");
    const exit = await Promise.race([s.exited, new Promise((r) => setTimeout(() => r(null), 10000))]);
    if (exit === null) s.child.kill("SIGKILL");
    assert.ok(exit !== null, "still running 10 s after SIGTERM (it waited for the load)");
    assert.equal(exit.code, 0);
    assert.ok(Date.now() - t0 < 5000, `exit took ${Date.now() - t0} ms`);
    assert.match(s.stderr(), /signal during model load/);
  });

  test("503 on a kept-alive connection while draining", async () => {
    const s = await startServer({ args: ["--fake-step-ms", "20"] });
    const http = await import("node:http");
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const post = (body) => new Promise((resolve, reject) => {
      const data = JSON.stringify(body);
      const req = http.request({ host: "127.0.0.1", port: s.port, method: "POST", path: "/v1/completions", agent,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data) } }, (res) => {
        let text = "";
        res.on("data", (d) => (text += d));
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, json: JSON.parse(text) }));
      });
      req.on("error", reject);
      req.end(data);
    });
    // Keep a request in flight so the drain lasts, and an idle keep-alive socket in the agent.
    assert.equal((await post({ model: "fake-model", prompt: "x", max_tokens: 1 })).status, 200);
    const inflight = request(s, "POST", "/v1/completions", { model: "fake-model", prompt: "x", max_tokens: 60, temperature: 0 });
    await waitFor(async () => metric(await metrics(s), "kvserve:sequences_in_flight") === 1);
    s.child.kill("SIGTERM");
    await new Promise((r) => setTimeout(r, 200));
    const refused = await post({ model: "fake-model", prompt: "x", max_tokens: 1 });
    assert.equal(refused.status, 503);
    assert.equal(refused.json.error.code, "server_draining");
    assert.equal(refused.headers.connection, "close");
    const done = await inflight;
    assert.equal(done.status, 200, "the in-flight request finishes");
    assert.equal(done.json.usage.completion_tokens, 47);
    assert.equal((await s.exited).code, 0);
    agent.destroy();
  });
});
