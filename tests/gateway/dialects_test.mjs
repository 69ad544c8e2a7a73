// Every dialect of the replica's public API through `kvserve gateway`
// (issues 32 and 36): a real `kvserve serve` replica of the bundled model
// behind a real gateway with tenant keys, driven over HTTP and by the
// official SDKs, as a client that works against a replica would:
//   * the replica's whole public route table (`kvserve serve --print-routes`,
//     the one table both front ends are built from) answers through the
//     gateway with the same status and the same answer as directly, at
//     temperature 0; the gateway's metrics label each endpoint;
//   * openai's responses.create (streamed and not) and @anthropic-ai/sdk's
//     messages.create / messages.stream through the gateway give what they
//     give directly;
//   * the gateway's own 401, 429 and 404 on /v1/messages are in Anthropic's
//     shape (the SDK's error classes recognise them), on /v1/responses in OpenAI's;
//   * a tenant's token budget is charged with the real usage of /v1/messages
//     and /v1/responses answers (streamed and not), read in each dialect's
//     shape (the gateway's metrics, and the "used" of the next refusal);
//   * tenants never share prefix-cache blocks through these dialects either
//     (the replica honours cache_salt on both; B gets 0 cached tokens on A's
//     long prompt, A's repeat is cached);
//   * a replica killed before the first token (its stream had sent only
//     message_start / response.created ...) is retried: streaming /v1/messages
//     and /v1/responses requests complete on the other replica (fake-backend
//     replicas, so the kill lands before the first token).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import http from "node:http";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  addKey, auditLine, auth, binary, bundled, freePort, loadOpenAI, metricSum, parseSse, request, requireBinary,
  skipFile, sourceDir, startGateway, startReplica, tempDir, waitFor,
} from "./common.mjs";

requireBinary();
const modelPath = bundled();
if (!modelPath) skipFile("models/kvserve-tiny.gguf is not present");
const oracles = path.join(sourceDir, "tests/oracles/node_modules");
if (!existsSync(path.join(oracles, "@anthropic-ai/sdk"))) skipFile("@anthropic-ai/sdk is missing (scripts/setup.sh installs the npm test oracles)");
const OpenAI = await loadOpenAI();
const Anthropic = (await import(path.join(oracles, "@anthropic-ai/sdk/index.mjs"))).default;

const MODEL = "kvserve-tiny";
const REPLICA_KEY = "sk-replica-dialects-only-the-gateway-knows";
const PROMPT = "Tell me a story about a cat.";
const TPM = 900;  // the metered tenant's tokens per minute

const cleanup = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

// What may differ between two greedy answers to one request: ids, clocks,
// and how much of the prompt the prefix cache served (the gateway's
// requests run in the tenant's cache namespace). Usage is kept as the
// dialect's prompt and completion counts.
function normalize(v) {
  if (Array.isArray(v)) return v.map(normalize);
  if (v === null || typeof v !== "object") return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    if (["id", "created", "created_at", "system_fingerprint"].includes(k)) continue;
    if (k === "usage" && x && typeof x === "object") {
      out.usage = {
        prompt: x.prompt_tokens ?? (x.input_tokens ?? 0) + (x.cache_read_input_tokens ?? 0),
        completion: x.completion_tokens ?? x.output_tokens,
      };
      continue;
    }
    out[k] = normalize(x);
  }
  return out;
}

// The model cards: the gateway adds the pools that serve a model.
const card = (m) => ({ id: m.id, object: m.object, max_model_len: m.max_model_len });

// A long system prompt (many KV blocks) that only its tenant may hit in cache.
const SECRET = "The vault code is 4417 and the launch word is heliotrope. ".repeat(8);
const messagesOf = (system, extra = {}) => ({
  model: MODEL, max_tokens: 2, temperature: 0, system, messages: [{ role: "user", content: "Hello." }], ...extra,
});
const responsesOf = (instructions, extra = {}) => ({
  model: MODEL, max_output_tokens: 2, temperature: 0, instructions, input: "Hello.", ...extra,
});
const cachedMessages = (r) => r.json.usage.cache_read_input_tokens;
const cachedResponses = (r) => r.json.usage.input_tokens_details.cached_tokens;

describe("the public API through the gateway (bundled model)", () => {
  let replica, gw, keyA, keyB, keyMetered;
  before(async () => {
    const dir = tempDir();
    const keyFile = path.join(dir, "keys.yaml");
    keyA = addKey(keyFile, "tenant-a");
    keyB = addKey(keyFile, "tenant-b");
    keyMetered = addKey(keyFile, "metered", { "tokens-per-minute": TPM });
    replica = await startReplica({ model: modelPath, args: ["--max-context-length", "1024", "--api-keys", REPLICA_KEY] });
    cleanup.push(() => replica.stop());
    gw = await startGateway({
      model: modelPath, dir, gateway: { key_file: keyFile },
      pools: [{ name: "main", max_context: 1024, api_key: REPLICA_KEY, replicas: [replica.baseURL] }],
    });
    cleanup.push(() => gw.stop());
  });

  test("every route of the replica's public table answers through the gateway as directly", async () => {
    const routes = JSON.parse(execFileSync(binary, ["serve", "--print-routes"], { encoding: "utf8" }));
    const direct = (method, p, body) => request(replica, method, p, body, auth(REPLICA_KEY));
    const tokens = (await direct("POST", "/tokenize", { model: MODEL, prompt: PROMPT })).json.tokens;
    // One request per route; a route added to the table needs one here.
    const samples = {
      "GET /v1/models": {},
      "GET /v1/models/": { suffix: MODEL },
      "POST /v1/completions": { body: { model: MODEL, prompt: "Once upon a time", max_tokens: 8, temperature: 0 } },
      "POST /v1/chat/completions": {
        body: { model: MODEL, messages: [{ role: "user", content: PROMPT }], max_tokens: 8, temperature: 0 },
      },
      "POST /v1/responses": { body: { model: MODEL, input: PROMPT, max_output_tokens: 8, temperature: 0 } },
      "POST /v1/messages": {
        body: { model: MODEL, max_tokens: 8, temperature: 0, messages: [{ role: "user", content: PROMPT }] },
      },
      "POST /tokenize": { body: { model: MODEL, messages: [{ role: "user", content: PROMPT }] } },
      "POST /detokenize": { body: { tokens } },
    };
    assert.ok(routes.length >= Object.keys(samples).length, JSON.stringify(routes));
    for (const r of routes) {
      const name = `${r.method} ${r.path}`;
      const s = samples[name];
      assert.ok(s, `no sample request for ${name}: add one to this test`);
      const p = r.path + (r.prefix ? s.suffix : "");
      const want = await direct(r.method, p, s.body);
      const got = await request(gw, r.method, p, s.body, auth(keyA));
      assert.equal(want.status, 200, `${name} direct: ${want.text}`);
      assert.equal(got.status, want.status, `${name} through the gateway: ${got.text}`);
      if (r.action === "models") {
        const cards = (j) => (j.data ? j.data.map(card) : card(j));
        assert.deepEqual(cards(got.json), cards(want.json), name);
      } else {
        assert.deepEqual(normalize(got.json), normalize(want.json), name);
      }
      if (r.method === "POST") {
        // Counted when the request finishes, which may come just after the
        // client has the whole answer (slower under the sanitizers).
        const counted = () => metricSum(gw, "kvserve_gateway:requests_total", { endpoint: r.path, status: "200", tenant: "tenant-a" });
        await waitFor(async () => (await counted()) >= 1, 5000).catch(() => {});
        assert.equal(await counted(), 1, `${name} counted under its endpoint`);
        const line = await auditLine(gw, (l) => l.id === got.headers["x-request-id"]);
        assert.equal(line.path, r.path);
        assert.equal(line.replica, replica.baseURL);
      }
    }
    // The table's dialects are all there.
    assert.deepEqual(new Set(routes.filter((r) => r.dialect).map((r) => r.dialect)), new Set(["openai", "responses", "anthropic"]));
  });

  test("the official SDKs through the gateway: responses.create and messages.create/stream", async () => {
    const viaGw = new OpenAI({ apiKey: keyA, baseURL: `${gw.baseURL}/v1`, maxRetries: 0 });
    const whole = await viaGw.responses.create({ model: MODEL, input: PROMPT, max_output_tokens: 16, temperature: 0 });
    assert.equal(whole.object, "response");
    assert.ok(whole.output_text.length > 0);
    const stream = await viaGw.responses.create({ model: MODEL, input: PROMPT, max_output_tokens: 16, temperature: 0, stream: true });
    let text = "";
    let seq = -1;
    const types = [];
    let last;
    for await (const ev of stream) {
      assert.equal(ev.sequence_number, seq + 1, "the held opening events go out in order");
      seq = ev.sequence_number;
      types.push(ev.type);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      last = ev;
    }
    assert.deepEqual(types.slice(0, 2), ["response.created", "response.in_progress"]);
    assert.ok(["response.completed", "response.incomplete"].includes(last.type));
    assert.equal(text, whole.output_text);
    assert.equal(last.response.usage.output_tokens, whole.usage.output_tokens);

    const anthropic = new Anthropic({ apiKey: keyA, baseURL: gw.baseURL, maxRetries: 0 });
    const body = { model: MODEL, max_tokens: 16, temperature: 0, system: "Be brief.", messages: [{ role: "user", content: PROMPT }] };
    const m = await anthropic.messages.create(body);
    assert.equal(m.type, "message");
    assert.equal(m.content[0].type, "text");
    const direct = new Anthropic({ apiKey: REPLICA_KEY, baseURL: replica.baseURL, maxRetries: 0 });
    assert.deepEqual(m.content, (await direct.messages.create(body)).content);
    const final = await anthropic.messages.stream(body).finalMessage();
    assert.deepEqual(final.content, m.content);
    assert.equal(final.stop_reason, m.stop_reason);
    assert.equal(final.usage.output_tokens, m.usage.output_tokens);
    // The raw stream: Anthropic's named events, in the replica's order.
    const raw = await request(gw, "POST", "/v1/messages", { ...body, stream: true }, { "x-api-key": keyA });
    assert.equal(raw.status, 200, raw.text);
    const names = parseSse(raw.text).map((e) => e.event);
    assert.deepEqual(names.slice(0, 3), ["message_start", "ping", "content_block_start"]);
    assert.deepEqual(names.slice(-2), ["message_delta", "message_stop"]);
    assert.ok(!names.includes(null), "no unnamed event (no [DONE]) in an Anthropic stream");
  });

  test("the gateway's own errors on /v1/messages are in Anthropic's shape", async () => {
    const body = messagesOf("Be brief.");
    for (const headers of [{}, { "x-api-key": "sk-wrong" }, auth("sk-wrong")]) {
      const r = await request(gw, "POST", "/v1/messages", body, headers);
      assert.equal(r.status, 401, r.text);
      assert.equal(r.json.type, "error");
      assert.equal(r.json.error.type, "authentication_error");
      assert.ok(r.json.error.message.length > 0);
    }
    const sdk = new Anthropic({ apiKey: "sk-wrong", baseURL: gw.baseURL, maxRetries: 0 });
    await assert.rejects(sdk.messages.create(body), (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
    const unknown = await request(gw, "POST", "/v1/messages", { ...body, model: "no-such-model" }, auth(keyA));
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(unknown.json.error.type, "not_found_error");
    const long = await request(gw, "POST", "/v1/messages", { ...body, max_tokens: 5000 }, auth(keyA));
    assert.equal(long.status, 400, long.text);
    assert.equal(long.json.error.type, "invalid_request_error");
    assert.match(long.json.error.message, /longest context served here is 1024/);
    // /v1/responses errors are OpenAI's, naming its own fields.
    const r = await request(gw, "POST", "/v1/responses", responsesOf("x", { max_output_tokens: 5000 }), auth(keyA));
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.code, "context_length_exceeded");
    assert.equal(r.json.error.param, "max_output_tokens");
    const noKey = await request(gw, "POST", "/v1/responses", responsesOf("x"));
    assert.equal(noKey.status, 401);
    assert.equal(noKey.json.error.code, "invalid_api_key");
  });

  test("a tenant's token budget is charged with the real usage of /v1/messages and /v1/responses", async () => {
    // Answers shorter than their reservation: a stop sequence ends the
    // Messages reply, a JSON schema the Responses one.
    const free = await request(gw, "POST", "/v1/messages", messagesOf("Be brief.", { max_tokens: 24 }), auth(keyA));
    const words = free.json.content[0].text.split(" ").filter((w) => w.length >= 2);
    assert.ok(words.length >= 3, free.text);
    const stopped = messagesOf("Be brief.", { max_tokens: 48, stop_sequences: [words[2]] });
    const schema = { type: "object", properties: { ok: { type: "boolean" } }, required: ["ok"], additionalProperties: false };
    const json = responsesOf("Answer in JSON.", { max_output_tokens: 48, text: { format: { type: "json_schema", name: "a", schema } } });
    const k = auth(keyMetered);
    const used = [];
    const m1 = await request(gw, "POST", "/v1/messages", stopped, k);
    assert.equal(m1.status, 200, m1.text);
    assert.equal(m1.json.stop_reason, "stop_sequence");
    used.push([m1.json.usage.input_tokens + m1.json.usage.cache_read_input_tokens, m1.json.usage.output_tokens]);
    const m2 = await request(gw, "POST", "/v1/messages", { ...stopped, stream: true }, k);
    const delta = parseSse(m2.text).find((e) => e.event === "message_delta");
    const u2 = JSON.parse(delta.data).usage;
    used.push([u2.input_tokens + u2.cache_read_input_tokens, u2.output_tokens]);
    const r1 = await request(gw, "POST", "/v1/responses", json, k);
    assert.equal(r1.status, 200, r1.text);
    assert.equal(r1.json.status, "completed", r1.text);
    used.push([r1.json.usage.input_tokens, r1.json.usage.output_tokens]);
    const r2 = await request(gw, "POST", "/v1/responses", { ...json, stream: true }, k);
    const done = parseSse(r2.text).find((e) => e.event === "response.completed");
    assert.ok(done, r2.text.slice(-400));
    const u4 = JSON.parse(done.data).response.usage;
    used.push([u4.input_tokens, u4.output_tokens]);
    for (const [, out] of used) assert.ok(out < 48, `the answer is shorter than its reservation: ${JSON.stringify(used)}`);

    const prompt = used.reduce((a, [p]) => a + p, 0);
    const completion = used.reduce((a, [, c]) => a + c, 0);
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:tokens_used_total", { tenant: "metered" })) === prompt + completion);
    assert.equal(await metricSum(gw, "kvserve_gateway:tokens_used_total", { tenant: "metered", kind: "prompt" }), prompt);
    assert.equal(await metricSum(gw, "kvserve_gateway:tokens_used_total", { tenant: "metered", kind: "completion" }), completion);
    const reserved = await metricSum(gw, "kvserve_gateway:tokens_reserved_total", { tenant: "metered" });
    assert.equal(reserved, prompt + 4 * 48, "charged prompt + max_tokens at admission");
    // The budget holds the corrected charges: a request that fits the limit
    // alone is refused with "used" = the real usage, in Anthropic's shape.
    const big = messagesOf("Be brief.", { max_tokens: TPM - used[0][0] });
    let refusal;
    await waitFor(async () => {
      refusal = await request(gw, "POST", "/v1/messages", big, k);
      return refusal.status === 429 && refusal.json.error.message.includes(`used ${prompt + completion},`);
    }, 5000, 50).catch(() => assert.fail(`refusal: ${refusal.status} ${refusal.text}`));
    assert.equal(refusal.json.type, "error");
    assert.equal(refusal.json.error.type, "rate_limit_error");
    assert.match(refusal.headers["retry-after"], /^[1-9][0-9]*$/);
    const sdk = new Anthropic({ apiKey: keyMetered, baseURL: gw.baseURL, maxRetries: 0 });
    await assert.rejects(sdk.messages.create(big), (e) => e instanceof Anthropic.RateLimitError && e.status === 429);
  });

  test("tenants never share prefix-cache blocks through /v1/messages or /v1/responses", async () => {
    // The replica honours cache_salt on both dialects: another salt misses.
    const direct = (p, body) => request(replica, "POST", p, body, auth(REPLICA_KEY));
    const secret = `Direct. ${SECRET}`;
    assert.equal((await direct("/v1/messages", messagesOf(secret, { cache_salt: "s1" }))).status, 200);
    assert.ok(cachedMessages(await direct("/v1/messages", messagesOf(secret, { cache_salt: "s1" }))) >= 64);
    assert.equal(cachedMessages(await direct("/v1/messages", messagesOf(secret, { cache_salt: "s2" }))), 0);
    assert.equal((await direct("/v1/responses", responsesOf(secret, { cache_salt: "s3" }))).status, 200);
    assert.ok(cachedResponses(await direct("/v1/responses", responsesOf(secret, { cache_salt: "s3" }))) >= 64);
    assert.equal(cachedResponses(await direct("/v1/responses", responsesOf(secret, { cache_salt: "s4" }))), 0);

    for (const [p, make, cached] of [
      ["/v1/messages", messagesOf, cachedMessages],
      ["/v1/responses", responsesOf, cachedResponses],
    ]) {
      const body = make(`${p}: ${SECRET}`);
      const a1 = await request(gw, "POST", p, body, auth(keyA));
      assert.equal(a1.status, 200, a1.text);
      const a2 = await request(gw, "POST", p, body, auth(keyA));
      assert.ok(cached(a2) >= 64, `${p}: A's repeat hits its own prefix (${cached(a2)} cached)`);
      // Whatever salt B sends (A's name, one shaped like the gateway's, none), it stays in B's namespace.
      for (const salt of ["tenant-a", `t:${"0".repeat(64)}`, undefined]) {
        const b = await request(gw, "POST", p, { ...body, cache_salt: salt }, auth(keyB));
        assert.equal(b.status, 200, b.text);
        assert.equal(cached(b), 0, `${p}: B's copy of A's prompt (cache_salt ${JSON.stringify(salt)}) is not served from A's cache`);
      }
    }
  });
});

// A streamed POST through the gateway: resolves with its status, events and id.
function stream(gw, p, body) {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const req = http.request({ host: "127.0.0.1", port: gw.port, method: "POST", path: p, agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } }, (res) => {
      let text = "";
      res.on("data", (c) => (text += c));
      res.on("end", () => resolve({ status: res.statusCode, id: res.headers["x-request-id"], events: parseSse(text) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(payload);
  });
}

describe("a replica killed before the first token (fake-backend replicas)", () => {
  test("streaming /v1/messages and /v1/responses requests are retried on the other replica", async () => {
    // Replica a runs one sequence at a time and is kept busy, so the
    // gateway's streams wait in its queue: their opening events (message_start,
    // ping; response.created, response.in_progress) are sent, no token is.
    const a = await startReplica({ args: ["--fake-step-ms", "20", "--runtime.max_batch_size", "1"] });
    cleanup.push(() => a.stop("SIGKILL"));
    const bPort = await freePort();
    const bURL = `http://127.0.0.1:${bPort}`;
    const g = await startGateway({
      model: modelPath, gateway: { allow_anonymous: true, eject_after_failures: 1 },
      pools: [{ name: "main", max_context: 4096, max_retries: 2, replicas: [a.baseURL, bURL] }],
    });
    cleanup.push(() => g.stop());
    const busy = request(a, "POST", "/v1/completions", { model: "fake-model", prompt: "x", max_tokens: 2000, ignore_eos: true });
    await waitFor(async () => (await metricSum(a, "kvserve:num_requests_running")) === 1);
    const msgs = { model: "fake-model", max_tokens: 12, temperature: 0, stream: true, messages: [{ role: "user", content: "Hi" }] };
    const resp = { model: "fake-model", max_output_tokens: 12, temperature: 0, stream: true, input: "Hi" };
    const m = stream(g, "/v1/messages", msgs);
    const r = stream(g, "/v1/responses", resp);
    await waitFor(async () => (await metricSum(a, "kvserve:num_requests_waiting")) === 2);
    // b comes up; once the gateway routes to it, a dies with both streams open.
    const b = await startReplica({ port: bPort, args: ["--fake-step-ms", "2"] });
    cleanup.push(() => b.stop("SIGKILL"));
    await waitFor(async () => (await metricSum(g, "kvserve_gateway:replica_healthy", { replica: bURL })) === 1, 10000);
    a.child.kill("SIGKILL");
    await busy.catch(() => {});

    const [mr, rr] = await Promise.all([m, r]);
    assert.equal(mr.status, 200);
    const names = mr.events.map((e) => e.event);
    assert.ok(!names.includes("error"), JSON.stringify(mr.events));
    assert.deepEqual(names.slice(0, 3), ["message_start", "ping", "content_block_start"], "one stream, from b alone");
    assert.equal(names.filter((n) => n === "message_start").length, 1);
    assert.equal(names.at(-1), "message_stop");
    const text = mr.events.filter((e) => e.event === "content_block_delta").map((e) => JSON.parse(e.data).delta.text).join("");
    assert.ok(text.length > 0);

    assert.equal(rr.status, 200);
    const types = rr.events.map((e) => JSON.parse(e.data).type);
    assert.ok(!types.includes("error"), JSON.stringify(rr.events));
    assert.equal(types.filter((t) => t === "response.created").length, 1);
    rr.events.forEach((e, i) => assert.equal(JSON.parse(e.data).sequence_number, i, "one stream's numbering"));
    assert.ok(["response.completed", "response.incomplete"].includes(types.at(-1)));

    for (const res of [mr, rr]) {
      const line = await auditLine(g, (l) => l.id === res.id);
      assert.equal(line.status, 200);
      assert.equal(line.retries, 1, JSON.stringify(line));
      assert.equal(line.replica, bURL);
    }
    assert.equal(await metricSum(g, "kvserve_gateway:stream_errors_total"), 0);
    assert.equal(await metricSum(g, "kvserve_gateway:retries_total"), 2);
  });
});
