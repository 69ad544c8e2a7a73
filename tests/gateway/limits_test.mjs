// Rate limits and keys through the gateway (fake-backend replicas, the
// gateway counting tokens with a real tokenizer):
//   * a tenant with 2,000 tokens/min sending a burst gets exactly as many
//     requests admitted as their reservations fit (never more than 2,000 +
//     one reservation), the rest 429 + Retry-After in OpenAI's shape, and
//     the counts in the metrics;
//   * keys: none, wrong, revoked; rotation while a stream is open (it
//     completes); SIGHUP reload;
//   * two gateways sharing one budget through redis-server (started here),
//     and what each failure mode does when Redis goes away.
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";

import {
  addKey, auditLine, auth, bundled, freePort, keyIds, metricSum, parseSse, request, requireBinary, revokeKey,
  skipFile, startGateway, startRedis, startReplica, stories, tempDir, waitFor,
} from "./common.mjs";

requireBinary();
const tokenizer = stories() || bundled();
if (!tokenizer) skipFile("no GGUF for the gateway's tokenizer");
const MODEL = "fake-model";
const cleanup = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

const BODY = { model: MODEL, prompt: "Once upon a time", max_tokens: 200, temperature: 0, ignore_eos: true };

async function replica(step = "10") {
  const r = await startReplica({ args: ["--fake-step-ms", step] });
  cleanup.push(() => r.stop("SIGKILL"));
  return r;
}

async function gateway(opts) {
  const gw = await startGateway({ model: tokenizer, ...opts });
  cleanup.push(() => gw.stop());
  return gw;
}

// The tokens one BODY reserves (prompt + max_tokens), as the gateway counts.
async function reservation(gw, key) {
  const n = gw.audit().length;
  const r = await request(gw, "POST", "/v1/completions", { ...BODY, max_tokens: 1 }, auth(key));
  assert.equal(r.status, 200, r.text);
  await waitFor(() => gw.audit().length > n);
  return gw.audit().at(-1).prompt_tokens + BODY.max_tokens;
}

function checkRefusal(r) {
  assert.equal(r.status, 429, r.text);
  assert.match(r.headers["retry-after"], /^[1-9][0-9]*$/);
  assert.equal(r.json.error.type, "rate_limit_error");
  assert.equal(r.json.error.code, "rate_limit_exceeded");
  assert.equal(r.json.error.limit, "tokens");
  assert.match(r.json.error.message, /tokens per minute: limit 2000/);
}

describe("limits", () => {
  test("a burst against 2,000 tokens/min: admitted reservations fit the budget; 429s; metrics", async () => {
    const dir = tempDir();
    const keyFile = `${dir}/keys.yaml`;
    const probeKey = addKey(keyFile, "probe");
    const key = addKey(keyFile, "small", { "tokens-per-minute": 2000 });
    const rep = await replica();
    const gw = await gateway({ gateway: { key_file: keyFile }, pools: [{ name: "main", max_context: 4096, replicas: [rep.baseURL] }] });
    const R = await reservation(gw, probeKey);
    const burst = await Promise.all(Array.from({ length: 20 }, () => request(gw, "POST", "/v1/completions", BODY, auth(key))));
    const ok = burst.filter((r) => r.status === 200);
    for (const r of burst.filter((x) => x.status !== 200)) checkRefusal(r);
    assert.equal(ok.length, Math.floor(2000 / R), `reservation ${R}`);
    assert.ok(ok.length * R <= 2000 + R);
    assert.equal(await metricSum(gw, "kvserve_gateway:rate_limited_requests_total", { tenant: "small", reason: "tokens" }), 20 - ok.length);
    assert.equal(await metricSum(gw, "kvserve_gateway:rate_limited_tokens_total", { tenant: "small" }), (20 - ok.length) * R);
    assert.equal(await metricSum(gw, "kvserve_gateway:tokens_reserved_total", { tenant: "small" }), ok.length * R);
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:tokens_used_total", { tenant: "small", kind: "completion" })) === ok.length * 200);
    // One bigger than the whole budget can never run.
    const big = await request(gw, "POST", "/v1/completions", { ...BODY, max_tokens: 2500 }, auth(key));
    assert.equal(big.status, 429);
    assert.equal(big.json.error.code, "request_too_large");
    assert.equal(big.headers["retry-after"], undefined);
  });

  test("keys: none, wrong, revoked; rotation while a stream is open; SIGHUP", async () => {
    const dir = tempDir();
    const keyFile = `${dir}/keys.yaml`;
    const oldKey = addKey(keyFile, "rot");
    const rep = await replica("20");
    const gw = await gateway({ gateway: { key_file: keyFile, key_file_poll_seconds: 0.1 },
      pools: [{ name: "main", max_context: 4096, replicas: [rep.baseURL] }] });
    assert.equal((await request(gw, "POST", "/v1/completions", BODY)).status, 401);
    assert.equal((await request(gw, "POST", "/v1/completions", BODY, auth("sk-kvs-nope"))).status, 401);
    // A stream of ~2 s on the old key; meanwhile add a new key and revoke the old.
    const stream = request(gw, "POST", "/v1/completions", { ...BODY, max_tokens: 100, stream: true }, auth(oldKey));
    await waitFor(async () => (await metricSum(rep, "kvserve:num_requests_running")) === 1, 5000);
    const [oldId] = keyIds(keyFile);
    const newKey = addKey(keyFile, "rot");
    revokeKey(keyFile, oldId);
    await waitFor(async () => (await request(gw, "GET", "/v1/models", undefined, auth(oldKey))).status === 401, 5000);
    assert.equal((await request(gw, "GET", "/v1/models", undefined, auth(newKey))).status, 200);
    const s = await stream;
    assert.equal(s.status, 200);
    const events = parseSse(s.text);
    assert.ok(!events.some((e) => e.event === "error"), "the open stream completes");
    assert.equal(events.at(-1).data, "[DONE]");
    const usage = events.filter((e) => e.data.startsWith("{")).map((e) => JSON.parse(e.data));
    assert.equal(usage.filter((c) => c.choices[0]?.text).length > 0, true);
    const line = await auditLine(gw, (l) => l.stream && l.status === 200);
    assert.equal(line.completion_tokens, 100, "usage counted from the stream");
    // SIGHUP reloads too.
    const before = await metricSum(gw, "kvserve_gateway:key_file_reloads_total");
    gw.child.kill("SIGHUP");
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:key_file_reloads_total")) > before, 5000);
    assert.equal((await request(gw, "POST", "/v1/completions", { ...BODY, max_tokens: 2 }, auth(newKey))).status, 200);
  });

  test("two gateways share one budget through Redis; failure modes when Redis goes away", async (t) => {
    const port = await freePort();
    const redis = startRedis(port);
    if (!redis) return t.skip("redis-server is not installed (scripts/setup.sh installs it)");
    cleanup.push(() => redis.stop());
    await redis.ready();
    const dir = tempDir();
    const keyFile = `${dir}/keys.yaml`;
    const probeKey = addKey(keyFile, "probe");
    const key = addKey(keyFile, `shared${process.pid}`, { "tokens-per-minute": 2000 });
    const rep = await replica();
    const pools = [{ name: "main", max_context: 4096, replicas: [rep.baseURL] }];
    const shared = { key_file: keyFile, shared_state: `redis://127.0.0.1:${port}` };
    const g1 = await gateway({ gateway: { ...shared, shared_state_failure: "closed" }, pools, dir });
    const g2 = await gateway({ gateway: { ...shared, shared_state_failure: "local" }, pools, dir });
    const R = await reservation(g1, probeKey);
    const burst = await Promise.all(Array.from({ length: 20 }, (_, i) => request(i % 2 ? g1 : g2, "POST", "/v1/completions", BODY, auth(key))));
    const ok = burst.filter((r) => r.status === 200).length;
    for (const r of burst.filter((x) => x.status !== 200)) checkRefusal(r);
    assert.equal(ok, Math.floor(2000 / R), "one budget for both gateways");
    const refused = (await metricSum(g1, "kvserve_gateway:rate_limited_requests_total")) +
      (await metricSum(g2, "kvserve_gateway:rate_limited_requests_total"));
    assert.equal(refused, 20 - ok);

    await redis.stop();
    const closed = await request(g1, "POST", "/v1/completions", { ...BODY, max_tokens: 2 }, auth(probeKey));
    assert.equal(closed.status, 503);
    assert.equal(closed.json.error.code, "rate_limit_store_unavailable");
    const local = await request(g2, "POST", "/v1/completions", { ...BODY, max_tokens: 2 }, auth(probeKey));
    assert.equal(local.status, 200, "local: limits enforced in this process instead");
    assert.ok((await metricSum(g1, "kvserve_gateway:shared_state_errors_total")) >= 1);
  });
});
