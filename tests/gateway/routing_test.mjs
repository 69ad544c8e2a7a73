// Cache-aware routing through `kvserve gateway` in front of three real
// `kvserve serve` replicas of the bundled model (the gateway counts tokens
// with the same GGUF, so it computes the replicas' own block hashes):
//   * a replica publishes its prefix-cache blocks (GET /v1/cache/blocks);
//   * each tenant's second request lands on the replica that cached its
//     system prompt, and the replica's cached_tokens match the gateway's
//     prediction (metrics and audit carry both);
//   * a hot prefix sent concurrently spreads over the replicas instead of
//     piling onto the one that caches it;
//   * fairness: with the replica at max_requests_per_replica, a tenant's
//     burst waits in the gateway's weighted fair queue and another tenant's
//     request is served next, not after the burst; a waiter times out with
//     503 queue_timeout.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  addKey, auditLine, auth, bundled, metricSum, request, requireBinary, skipFile, startGateway, startReplica, tempDir,
  waitFor,
} from "./common.mjs";

requireBinary();
const modelPath = bundled();
if (!modelPath) skipFile("models/kvserve-tiny.gguf is not present");
const MODEL = "kvserve-tiny";
const STORY = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her big red ball. ";

function chat(tenant, question, extra = {}) {
  return {
    model: MODEL,
    messages: [
      { role: "system", content: `You tell stories for ${tenant}. ${STORY.repeat(5)}Always be kind to ${tenant}.` },
      { role: "user", content: question },
    ],
    max_tokens: 4,
    temperature: 0,
    ...extra,
  };
}

describe("cache-aware routing over three replicas", () => {
  let replicas, gw;
  before(async () => {
    replicas = await Promise.all([0, 1, 2].map(() => startReplica({ model: modelPath, args: ["--max-context-length", "1024"] })));
    gw = await startGateway({
      model: modelPath,
      gateway: { allow_anonymous: true },
      dir: tempDir(),
      pools: [{ name: "main", max_context: 1024, routing: "cache_aware", replicas: replicas.map((r) => r.baseURL) }],
      waitAll: true,
    });
  });
  after(async () => {
    await gw.stop();
    await Promise.all(replicas.map((r) => r.stop()));
  });

  test("a replica publishes its prefix-cache blocks; paging by epoch and sequence number", async () => {
    const r = replicas[0];
    const first = await request(r, "GET", "/v1/cache/blocks");
    assert.equal(first.status, 200, first.text);
    assert.equal(first.json.object, "cache.blocks");
    assert.equal(first.json.reset, true, "a reader without an epoch gets the whole set");
    assert.ok(first.json.block_size > 0);
    const c = await request(r, "POST", "/v1/completions", { model: MODEL, prompt: STORY.repeat(2), max_tokens: 1 });
    assert.equal(c.status, 200, c.text);
    const next = await request(r, "GET", `/v1/cache/blocks?epoch=${first.json.epoch}&since=${first.json.seq}`);
    assert.equal(next.json.reset, false);
    assert.ok(next.json.events.length > 0);
    assert.ok(next.json.events.every((e) => /^[+-][0-9a-f]{32}$/.test(e)));
    assert.ok(next.json.seq > first.json.seq);
    const other = await request(r, "GET", `/v1/cache/blocks?epoch=1&since=${next.json.seq}`);
    assert.equal(other.json.reset, true, "another epoch (a restarted replica) resyncs");
    assert.ok(other.json.blocks.length >= next.json.events.filter((e) => e.startsWith("+")).length);
    const bad = await request(r, "GET", "/v1/cache/blocks?since=-1");
    assert.equal(bad.status, 400);
    assert.equal(bad.json.error.param, "since");
  });

  test("each tenant's next request lands where its system prompt is cached; prediction = cached_tokens", async () => {
    const tenants = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];
    const home = {};
    for (const t of tenants) {
      const r = await request(gw, "POST", "/v1/chat/completions", chat(t, "Tell me a story."));
      assert.equal(r.status, 200, r.text);
      home[t] = (await auditLine(gw, (l) => l.id === r.headers["x-request-id"])).replica;
    }
    assert.ok(new Set(Object.values(home)).size >= 2, `first requests spread: ${JSON.stringify(home)}`);
    // Let every replica index catch up (polled every 0.2 s), then the next turn.
    await new Promise((res) => setTimeout(res, 600));
    for (const t of tenants) {
      const r = await request(gw, "POST", "/v1/chat/completions", chat(t, "Tell me another story, please."));
      assert.equal(r.status, 200, r.text);
      const cached = r.json.usage.prompt_tokens_details.cached_tokens;
      const line = await auditLine(gw, (l) => l.id === r.headers["x-request-id"]);
      assert.equal(line.replica, home[t], `${t} returns to the replica holding its prefix`);
      assert.ok(cached >= 64, `${t}: ${cached} cached tokens`);
      assert.equal(line.cached_tokens, cached);
      assert.ok(Math.abs(line.predicted_cached_tokens - cached) < 16, `${t}: predicted ${line.predicted_cached_tokens}, cached ${cached}`);
    }
    assert.ok((await metricSum(gw, "kvserve_gateway:prefix_cached_tokens_total")) >= 6 * 64);
    assert.ok((await metricSum(gw, "kvserve_gateway:prefix_predicted_cached_tokens_total")) >= 6 * 64);
    assert.equal(await metricSum(gw, "kvserve_gateway:prefix_mispredictions_total", { kind: "stale_index" }), 0);
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:prefix_index_blocks")) > 0, 5000);
    assert.ok((await metricSum(gw, "kvserve_gateway:prefix_index_resyncs_total")) >= 3, "one initial sync per replica");
  });

  test("a hot prefix sent concurrently spreads over the replicas", async () => {
    const warm = await request(gw, "POST", "/v1/chat/completions", chat("hotco", "Warm up."));
    assert.equal(warm.status, 200, warm.text);
    const n = 12;
    const rs = await Promise.all(Array.from({ length: n }, (_, i) =>
      request(gw, "POST", "/v1/chat/completions", chat("hotco", `Story number ${i}.`, { max_tokens: 200, ignore_eos: true }))));
    const counts = {};
    for (const r of rs) {
      assert.equal(r.status, 200, r.text);
      const line = await auditLine(gw, (l) => l.id === r.headers["x-request-id"]);
      counts[line.replica] = (counts[line.replica] || 0) + 1;
    }
    assert.equal(Object.keys(counts).length, 3, `every replica takes a share: ${JSON.stringify(counts)}`);
    assert.ok(Math.max(...Object.values(counts)) <= n / 2, `no pile-up: ${JSON.stringify(counts)}`);
    assert.ok((await metricSum(gw, "kvserve_gateway:prefix_routed_away_tokens_total")) > 0, "load won over affinity");
  });
});

describe("weighted fair queueing across tenants", () => {
  let replica, gw, bulkKey, chatKey;
  before(async () => {
    const dir = tempDir();
    const keyFile = `${dir}/keys.yaml`;
    bulkKey = addKey(keyFile, "bulk");
    chatKey = addKey(keyFile, "chat", { weight: 2, priority: 0 });
    // A fake replica at 10 ms a step: the real bundled model generates
    // thousands of tokens a second, so its first bulk request could end
    // (and the next start) before a loaded machine saw five queued, and the
    // wait in the test timed out in CI.
    replica = await startReplica({ args: ["--max-context-length", "1024", "--fake-step-ms", "10"] });
    gw = await startGateway({
      model: modelPath, gateway: { key_file: keyFile }, dir,
      pools: [{ name: "main", max_context: 1024, max_requests_per_replica: 1, queue_timeout_seconds: 20,
        replicas: [replica.baseURL] }],
    });
  });
  after(async () => {
    await gw.stop();
    await replica.stop();
  });

  test("a burst of one tenant does not starve another; order by fair share", async () => {
    // Each bulk request runs 1 s (100 steps), so the other five are still
    // queued behind the first when the wait below sees them.
    const long = { model: "fake-model", prompt: STORY.repeat(3), max_tokens: 100, temperature: 0, ignore_eos: true };
    const done = [];
    const bulk = Array.from({ length: 6 }, (_, i) =>
      request(gw, "POST", "/v1/completions", long, auth(bulkKey)).then((r) => { done.push(`bulk${i}`); return r; }));
    // All six are in the gateway: five queued behind the running one, or
    // (when a loaded machine admitted the burst slowly) fewer queued and the
    // rest already done. At least two must still wait for the order to mean
    // anything.
    let finishedBeforeChat = 0;
    await waitFor(async () => {
      const queued = await metricSum(gw, "kvserve_gateway:queued_requests", { pool: "main" });
      finishedBeforeChat = done.length;
      return queued >= 2 && queued + finishedBeforeChat >= 5;
    }, 10000, 5);
    const chat = await request(gw, "POST", "/v1/completions", { ...long, max_tokens: 8 }, auth(chatKey));
    done.push("chat");
    assert.equal(chat.status, 200, chat.text);
    for (const r of await Promise.all(bulk)) assert.equal(r.status, 200, r.text);
    // One bulk request was running and the next may have had its turn before
    // chat arrived; chat went ahead of the rest of the burst (at least one
    // bulk request ends after it).
    assert.ok(done.indexOf("chat") <= finishedBeforeChat + 2, `completion order: ${done.join(", ")}`);
    assert.ok(done.indexOf("chat") < done.length - 1, `completion order: ${done.join(", ")}`);
    assert.equal(await metricSum(gw, "kvserve_gateway:queued_requests", { pool: "main" }), 0);
  });
});
