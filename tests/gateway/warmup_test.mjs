// Warm-up of joining replicas (pools[].warm_prompts_file): the gateway
// replays the listed prompts to a replica that joins -- at the gateway's
// start and when it is re-admitted after a restart -- before routing user
// traffic to it.
//   * real replicas (stories260K): the warm prompts reach each replica (its
//     prefix cache holds blocks before any user request) and the first user
//     requests sharing the prefixes, completions and chat, are served with
//     cached_tokens > 0, also on a replica restarted on the same port;
//   * replicas over the fake backend with slow steps (so that a warm-up lasts
//     long enough to observe): requests routed while a restarted replica is
//     warming all go to the other replica; afterwards it takes traffic again.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { after, describe, test } from "node:test";

import {
  auditLine, bundled, metricSum, request, requireBinary, skipFile, startGateway, startReplica, stories, tempDir,
  waitFor,
} from "./common.mjs";

requireBinary();
const modelPath = stories();
if (!modelPath) skipFile("../shared/models/stories260K.gguf is not present");
const tokenizer = modelPath || bundled();
const cleanup = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

const PREFIX = "Once upon a time, there was a little girl named Lily. She loved to play in the park with her big red ball. ".repeat(2);
const SYSTEM = "You tell short stories about a cat named Tom who lives on a farm with a dog and a cow. Be kind.";

function warmFile(lines) {
  const file = path.join(tempDir(), "warm.txt");
  writeFileSync(file, ["# hot prefixes", ...lines].join("\n") + "\n");
  return file;
}

const cached = (r) => r.json?.usage?.prompt_tokens_details?.cached_tokens ?? 0;

describe("warm-up of joining replicas", () => {
  test("real replicas: the warm prompts fill each replica's prefix cache, at start and after a restart", async () => {
    const file = warmFile([PREFIX.trim(), JSON.stringify({ messages: [{ role: "system", content: SYSTEM }] })]);
    const replicas = await Promise.all([0, 1].map(() => startReplica({ model: modelPath })));
    const gw = await startGateway({
      model: tokenizer,
      gateway: { allow_anonymous: true, readmit_after_probes: 2 },
      pools: [{ name: "main", max_context: 512, warm_prompts_file: file, warm_timeout_seconds: 20, replicas: replicas.map((r) => r.baseURL) }],
    });
    const extra = [];
    cleanup.push(async () => {
      await gw.stop();
      for (const r of [...replicas, ...extra]) await r.stop("SIGKILL");
    });
    const [a, b] = replicas;
    const model = (await request(a, "GET", "/v1/models")).json.data[0].id;

    // /ready says 200 once one replica is warm; both are warmed.
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_warmups_total", { outcome: "completed" })) === 2, 15000);
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_warmups_started_total"), 2);
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_warmups_total", { outcome: "completed" }), 2);
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_warmups_total", { outcome: "failed" }), 0);
    assert.equal(await metricSum(gw, "kvserve_gateway:warm_prompts_replayed_total", { outcome: "ok" }), 4);
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_warming"), 0);
    for (const r of replicas) {
      assert.ok((await metricSum(r, "kvserve:kv_cache_blocks_cached")) > 0, "warm prompts reached the replica");
      assert.equal(await metricSum(r, "kvserve:http_requests_total", { path: "/v1/completions" }), 1);
      assert.equal(await metricSum(r, "kvserve:http_requests_total", { path: "/v1/chat/completions" }), 1);
    }

    // The first user requests sharing the prefixes hit the cache, whichever replica serves them.
    const completion = { model, prompt: PREFIX + "One day, Lily", max_tokens: 2, temperature: 0 };
    const chat = { model, messages: [{ role: "system", content: SYSTEM }, { role: "user", content: "Tell me about Tom." }], max_tokens: 2, temperature: 0 };
    for (const [p, body] of [["/v1/completions", completion], ["/v1/completions", completion], ["/v1/chat/completions", chat], ["/v1/chat/completions", chat]]) {
      const r = await request(gw, "POST", p, body);
      assert.equal(r.status, 200, r.text);
      assert.ok(cached(r) > 0, `${p}: cached_tokens ${cached(r)} on its first use`);
    }

    // Restart b on the same port: ejected, re-admitted, warmed again before it takes traffic.
    await b.stop("SIGKILL");
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: b.baseURL })) === 0, 10000);
    const b2 = await startReplica({ model: modelPath, port: b.port });
    extra.push(b2);
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_warmups_total", { replica: b.baseURL, outcome: "completed" })) === 2, 15000);
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: b.baseURL })) === 1, 5000);
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_warmups_started_total", { replica: b.baseURL }), 2);
    assert.ok((await metricSum(b2, "kvserve:kv_cache_blocks_cached")) > 0);
    // Its first real request sharing the prefix is served from the warmed
    // cache: sent to the replica directly, with the cache_salt the gateway
    // gives the anonymous tenant's requests (docs/gateway.md, "Security model").
    const sha = (s) => createHash("sha256").update(s).digest("hex");
    const salt = "t:" + sha(sha("anonymous") + "\n");
    const first = await request(b2, "POST", "/v1/completions", { ...completion, cache_salt: salt });
    assert.equal(first.status, 200, first.text);
    assert.ok(cached(first) > 0, `cached_tokens ${cached(first)} on the restarted replica`);
  });

  test("requests routed while a restarted replica warms up go to the other replica", async () => {
    const MODEL = "fake-model";
    const file = warmFile(["Once upon a time", "She loved to play in the park", "One day, she went to a café",
      JSON.stringify({ prompt: "They ate cake and drank milk" })]);
    const args = ["--fake-step-ms", "80"];
    const replicas = await Promise.all([0, 1].map(() => startReplica({ args })));
    const gw = await startGateway({
      model: tokenizer,
      gateway: { allow_anonymous: true, readmit_after_probes: 1 },
      pools: [{ name: "main", max_context: 4096, warm_prompts_file: file, warm_concurrency: 1, warm_timeout_seconds: 20,
        replicas: replicas.map((r) => r.baseURL) }],
    });
    const extra = [];
    cleanup.push(async () => {
      await gw.stop();
      for (const r of [...replicas, ...extra]) await r.stop("SIGKILL");
    });
    const [a, b] = replicas;
    // Both first warm-ups done before b is killed: one still replaying when
    // b dies ends "failed", and b's completed count below would be 1, not 2.
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_warmups_total", { outcome: "completed" })) === 2, 20000);
    await b.stop("SIGKILL");
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: b.baseURL })) === 0, 10000);
    const b2 = await startReplica({ port: b.port, args });
    extra.push(b2);
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_warming", { replica: b.baseURL })) === 1, 10000);

    // Requests one after another while the warm-up lasts: those answered
    // while b is still warming were certainly routed during its warm-up.
    const body = { model: MODEL, prompt: "Once upon a time", max_tokens: 1, temperature: 0 };
    const during = [];
    let last;
    for (;;) {
      const r = await request(gw, "POST", "/v1/completions", body);
      assert.equal(r.status, 200, r.text);
      last = r.headers["x-request-id"];
      if ((await metricSum(gw, "kvserve_gateway:replica_warming", { replica: b.baseURL })) !== 1) break;
      during.push(last);
    }
    assert.ok(during.length >= 1, "some requests were routed during the warm-up");
    for (const id of during) assert.equal((await auditLine(gw, (l) => l.id === id)).replica, a.baseURL);
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_warmups_total", { replica: b.baseURL, outcome: "completed" }), 2);
    // b2 got the 4 warm prompts, and at most the one request sent as its warm-up ended.
    const lastOnB = (await auditLine(gw, (l) => l.id === last)).replica === b.baseURL ? 1 : 0;
    assert.equal(await metricSum(b2, "kvserve:http_requests_total", { path: "/v1/completions" }), 4 + lastOnB);

    // Warmed: b takes traffic again (least load spreads concurrent requests).
    const rs = await Promise.all(Array.from({ length: 6 }, () => request(gw, "POST", "/v1/completions", { ...body, max_tokens: 4 })));
    assert.ok(rs.every((r) => r.status === 200));
    assert.ok((await metricSum(b2, "kvserve:http_requests_total", { path: "/v1/completions" })) > 4, "b gets work again");
  });
});
