// Faults behind the gateway, with fake-backend replicas (deterministic,
// slow steps) and the gateway counting tokens with a real tokenizer:
//   * kill -9 of a replica under load: requests that had not streamed a
//     byte are retried on the other replica and succeed; streams that had
//     started end with an in-band error event; the replica is ejected, then
//     re-admitted after it restarts on the same port;
//   * a replica that hangs (SIGSTOP) hits the first-token timeout and the
//     stream is retried elsewhere;
//   * a client that disconnects cancels the upstream request: the replica's
//     metrics show it cancelled and its KV blocks freed.
import assert from "node:assert/strict";
import http from "node:http";
import { after, describe, test } from "node:test";

import {
  auditLine, bundled, metric, metricSum, metrics, parseSse, request, requireBinary, skipFile, startGateway,
  startReplica, stories, waitFor,
} from "./common.mjs";

requireBinary();
const tokenizer = stories() || bundled();
if (!tokenizer) skipFile("no GGUF for the gateway's tokenizer (../shared/models/stories260K.gguf or models/kvserve-tiny.gguf)");
const MODEL = "fake-model";
const cleanup = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

// A streamed POST: resolves `first` at the first data event, `done` at the end.
function openStream(gw, path, body) {
  let text = "";
  let id = null;
  let resolveFirst;
  const first = new Promise((r) => (resolveFirst = r));
  let req;
  const done = new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    req = http.request({ host: "127.0.0.1", port: gw.port, method: "POST", path, agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(payload) } }, (res) => {
      id = res.headers["x-request-id"];
      res.on("data", (c) => {
        text += c;
        if (/data: \{/.test(text)) resolveFirst();
      });
      res.on("end", () => resolve({ id, status: res.statusCode, events: parseSse(text) }));
      res.on("error", () => resolve({ id, status: res.statusCode, events: parseSse(text), aborted: true }));
    });
    req.on("error", (e) => (e.code === "ECONNRESET" ? resolve({ aborted: true, events: parseSse(text) }) : reject(e)));
    req.end(payload);
  });
  return { first, done, abort: () => req.destroy() };
}

async function start(replicaArgs, n, gateway, pool = {}) {
  const replicas = await Promise.all(Array.from({ length: n }, () => startReplica({ args: replicaArgs })));
  const gw = await startGateway({
    model: tokenizer,
    gateway: { allow_anonymous: true, ...gateway },
    pools: [{ name: "main", max_context: 4096, replicas: replicas.map((r) => r.baseURL), ...pool }],
    waitAll: true,
  });
  cleanup.push(async () => {
    await gw.stop();
    for (const r of replicas) await r.stop("SIGKILL");
  });
  return { gw, replicas };
}

describe("faults", () => {
  test("kill -9 under load: retried before the first byte, in-band error after; ejection and re-admission", async () => {
    const { gw, replicas } = await start(["--fake-step-ms", "25"], 2,
      { eject_after_failures: 1, readmit_after_probes: 2 }, { max_retries: 2, first_token_timeout_seconds: 10 });
    // Streams take 5 s (200 steps of 25 ms), so those on the replica killed
    // (`a`) are still running when it is killed, a few metric reads after
    // their first bytes (a stream that ended before the kill, on a loaded
    // machine, is not expected to fail). The plain requests are longer still.
    const body = { model: MODEL, prompt: "Once upon a time", max_tokens: 200, temperature: 0, ignore_eos: true };
    const streams = Array.from({ length: 4 }, () => openStream(gw, "/v1/completions", { ...body, stream: true }));
    await Promise.all(streams.map((s) => s.first));
    // The replica killed is one that serves a stream. Routing by outstanding
    // tokens splits the four 2 / 2, but a probe slow under load can take one
    // replica out for a moment, and then all four go to the other: killing a
    // replica without streams tested no in-band error (CI saw that once).
    const inFlight = async (r) =>
      (await metricSum(r, "kvserve:num_requests_running")) + (await metricSum(r, "kvserve:num_requests_waiting"));
    const [a, b] = (await inFlight(replicas[0])) >= 1 ? replicas : [replicas[1], replicas[0]];
    assert.ok((await inFlight(a)) >= 1);
    const plain = Array.from({ length: 6 }, () => request(gw, "POST", "/v1/completions", { ...body, max_tokens: 240 }));
    // Every request routed: the gateway reserves prompt + max_tokens for each
    // when it picks its replica. (The replicas' own running + waiting gauges,
    // read one after the other, miss a request that moves between them.)
    const load = async (r) => metricSum(gw, "kvserve_gateway:replica_outstanding_tokens", { replica: r.baseURL });
    await waitFor(async () => (await load(a)) + (await load(b)) >= 4 * 200 + 6 * 240);
    // Picked one at a time (each pick sees the tokens of those before it), so
    // the two loads differ by at most the largest request: a 240-token one.
    // Whatever the split of the streams, that puts at least one plain request
    // on a.
    const [loadA, loadB] = [await load(a), await load(b)];
    assert.ok(Math.abs(loadA - loadB) <= 240 + 16, `balanced: ${loadA} vs ${loadB}`);
    a.child.kill("SIGKILL");

    for (const r of await Promise.all(plain)) {
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.usage.completion_tokens, 240);
    }
    const results = await Promise.all(streams.map((s) => s.done));
    // Which replica served each stream, from the audit log (the gateway
    // answers with the id it logs). Routing balances outstanding tokens, but a
    // probe that is slow under load can take b out for a moment, so the count
    // on a is not fixed: what is fixed is that exactly the streams on a fail.
    await waitFor(async () => results.every((r) => gw.audit().some((l) => l.id === r.id)));
    const replicaOf = (r) => gw.audit().find((l) => l.id === r.id).replica;
    let failed = 0;
    for (const r of results) {
      assert.equal(r.status, 200);
      const err = r.events.find((e) => e.event === "error");
      assert.equal(r.events.at(-1).data, "[DONE]");
      const finished = r.events.some((e) => !e.event && e.data.startsWith("{") && JSON.parse(e.data).choices?.[0]?.finish_reason);
      const cut = replicaOf(r) === a.baseURL && !finished;
      assert.equal(Boolean(err), cut, `stream ${r.id} on ${replicaOf(r)} ${err ? "failed" : "did not fail"}`);
      if (err) {
        ++failed;
        assert.equal(JSON.parse(err.data).error.code, "upstream_failed");
        assert.ok(r.events.filter((e) => !e.event && e.data.startsWith("{")).length >= 1, "it had started");
      } else {
        const text = r.events.filter((e) => !e.event && e.data.startsWith("{")).map((e) => JSON.parse(e.data).choices[0]?.text ?? "").join("");
        assert.ok(text.length > 0);
      }
    }
    assert.ok(failed >= 1, `streams on the killed replica fail in-band (${failed}): ${JSON.stringify(gw.audit().map((l) => [l.ts, l.replica, l.stream, l.reserved_tokens, l.retries, l.status]))}`);
    const retried = gw.audit().filter((l) => l.status === 200 && !l.stream && l.retries > 0);
    assert.ok(retried.length >= 1, "non-streaming requests on the killed replica were retried");
    assert.ok(retried.every((l) => l.replica === b.baseURL));
    assert.ok((await metricSum(gw, "kvserve_gateway:retries_total", { pool: "main" })) >= 1);
    assert.equal((await metricSum(gw, "kvserve_gateway:stream_errors_total")), failed);
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: a.baseURL })) === 0);
    assert.ok((await metricSum(gw, "kvserve_gateway:replica_ejections_total", { replica: a.baseURL })) >= 1);
    // Traffic meanwhile goes to b only.
    const during = await request(gw, "POST", "/v1/completions", { ...body, max_tokens: 2 });
    assert.equal(during.status, 200);

    // Restart on the same port: re-admitted after consecutive good probes.
    const a2 = await startReplica({ port: a.port, args: ["--fake-step-ms", "25"] });
    cleanup.push(() => a2.stop("SIGKILL"));
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_readmissions_total", { replica: a.baseURL })) >= 1, 10000);
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: a.baseURL }), 1);
    const rs = await Promise.all(Array.from({ length: 4 }, () => request(gw, "POST", "/v1/completions", { ...body, max_tokens: 10 })));
    assert.ok(rs.every((r) => r.status === 200));
    assert.ok((await metricSum(a2, "kvserve:http_requests_total", { path: "/v1/completions" })) >= 1, "a gets work again");
  });

  test("a hung replica (SIGSTOP) hits the first-token timeout; the stream is retried elsewhere", async () => {
    // Probes are slow here so that the hung replica is still in rotation.
    const { gw, replicas } = await start(["--fake-step-ms", "5"], 2, { health_interval_seconds: 60 },
      { first_token_timeout_seconds: 1, max_retries: 1 });
    const [c, d] = replicas;
    c.child.kill("SIGSTOP");
    cleanup.push(async () => c.child.kill("SIGCONT"));
    const body = { model: MODEL, prompt: "x", max_tokens: 5, temperature: 0, stream: true };
    const t0 = Date.now();
    const rs = await Promise.all([openStream(gw, "/v1/completions", body).done, openStream(gw, "/v1/completions", body).done]);
    for (const r of rs) {
      assert.equal(r.status, 200);
      assert.ok(!r.events.some((e) => e.event === "error"));
      assert.equal(r.events.at(-1).data, "[DONE]");
    }
    assert.ok(Date.now() - t0 >= 1000, "one of them waited for the timeout");
    assert.equal(await metricSum(gw, "kvserve_gateway:upstream_errors_total", { replica: c.baseURL, kind: "first_token_timeout" }), 1);
    const line = await auditLine(gw, (l) => l.retries === 1);
    assert.equal(line.replica, d.baseURL);
    assert.ok(line.ttft_ms >= 1000);
  });

  test("a client that disconnects cancels the upstream request and the replica frees its KV", async () => {
    const { gw, replicas } = await start(["--fake-step-ms", "20", "--fake-kv-blocks", "256"], 1, {});
    const [e] = replicas;
    const s = openStream(gw, "/v1/completions", { model: MODEL, prompt: "Once upon a time", max_tokens: 1000, ignore_eos: true, stream: true });
    await s.first;
    const held = await metrics(e);
    assert.ok(metric(held, "kvserve:kv_cache_blocks_used") > 0, "the running request holds KV");
    s.abort();
    await waitFor(async () => {
      const m = await metrics(e);
      return metric(m, 'kvserve:request_finished_total{finish_reason="cancelled"}') === 1 &&
        metric(m, "kvserve:kv_cache_blocks_used") === 0 && metric(m, "kvserve:num_requests_running") === 0;
    }, 5000);
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:client_disconnects_total")) === 1);
    const line = await auditLine(gw, (l) => l.status === 499);
    assert.equal(line.error, "client disconnected");
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_outstanding_tokens"), 0);
  });
});
