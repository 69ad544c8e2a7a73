// Canary releases through `kvserve gateway` with two real replicas of the
// bundled model, one "v1" (stable) and one "v2" (canary):
//   * sticky versions: every request of a session (X-Session-Id) runs on
//     the same version; both versions take a share;
//   * a reload (SIGHUP) to canary_weight 0 moves new requests within a
//     second while a stream open on the canary completes;
//   * automatic rollback: with the canary failing every attempt (injected
//     faults), the canary's error rate exceeds stable's by the margin and
//     the gateway sets its weight to 0 by itself; clients never see the
//     failures (retried on stable); metrics and audit carry the version;
//   * the rollback holds: a reload with the file's 50 % keeps 0, and so
//     does a restart with gateway.state_file; a reload to 0 acknowledges it
//     and a later 50 % starts a new canary; a new canary_version starts
//     afresh.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  auditLine, bundled, metricSum, parseSse, request, requireBinary, skipFile, startGateway, startReplica, tempDir,
  waitFor,
} from "./common.mjs";

requireBinary();
const modelPath = bundled();
if (!modelPath) skipFile("models/kvserve-tiny.gguf is not present");
const MODEL = "kvserve-tiny";
const BODY = { model: MODEL, prompt: "Once upon a time", max_tokens: 2, temperature: 0 };
const session = (s) => ({ "x-session-id": s });

describe("canary and rollback", () => {
  let stable, canary, gw;
  const pools = (canaryWeight, faultRate = 0) => [{
    name: "main", max_context: 1024, canary_version: "v2", canary_weight: canaryWeight, sticky_header: "X-Session-Id",
    canary_max_error_rate_margin: 0.3, canary_window_seconds: 30, canary_min_requests: 5,
    replicas: [{ url: stable.baseURL, version: "v1" }, { url: canary.baseURL, version: "v2", fault_rate: faultRate }],
  }];
  const versionOf = async (r) => (await auditLine(gw, (l) => l.id === r.headers["x-request-id"])).version;

  before(async () => {
    [stable, canary] = await Promise.all([0, 1].map(() => startReplica({ model: modelPath, args: ["--max-context-length", "1024"] })));
    const dir = tempDir();
    gw = await startGateway({ model: modelPath, gateway: { allow_anonymous: true, state_file: path.join(dir, "state.json") }, dir, pools: pools(50) });
    gw.stateFile = path.join(dir, "state.json");
  });
  after(async () => {
    await gw.stop();
    await Promise.all([stable.stop(), canary.stop()]);
  });

  const sessions = Array.from({ length: 16 }, (_, i) => `session-${i}`);
  const onCanary = [];

  test("sticky: a session's requests run on one version; both versions take a share", async () => {
    for (const s of sessions) {
      const a = await request(gw, "POST", "/v1/completions", BODY, session(s));
      const b = await request(gw, "POST", "/v1/completions", BODY, session(s));
      assert.equal(a.status, 200, a.text);
      const [va, vb] = [await versionOf(a), await versionOf(b)];
      assert.equal(va, vb, `${s} stays on one version`);
      if (va === "v2") onCanary.push(s);
    }
    assert.ok(onCanary.length > 0 && onCanary.length < sessions.length, `canary sessions: ${onCanary.length}`);
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_weight_percent", { pool: "main" }), 50);
    assert.equal(await metricSum(gw, "kvserve_gateway:version_attempts_total", { version: "v2", outcome: "ok" }), 2 * onCanary.length);
  });

  test("reload to weight 0 moves new requests within a second; an open canary stream completes", async () => {
    const s = onCanary[0];
    const stream = request(gw, "POST", "/v1/completions",
      { ...BODY, max_tokens: 600, ignore_eos: true, stream: true }, session(s));
    await waitFor(async () => (await metricSum(canary, "kvserve:num_requests_running")) === 1, 5000, 5);
    const t0 = Date.now();
    gw.reconfigure(pools(0));
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:canary_weight_percent", { pool: "main" })) === 0, 1000, 10);
    const moved = await request(gw, "POST", "/v1/completions", BODY, session(s));
    assert.equal(await versionOf(moved), "v1");
    assert.ok(Date.now() - t0 < 1000, `moved after ${Date.now() - t0} ms`);
    const r = await stream;
    const events = parseSse(r.text);
    assert.ok(!events.some((e) => e.event === "error"), "the open stream was not dropped");
    assert.equal(events.at(-1).data, "[DONE]");
    const line = await auditLine(gw, (l) => l.stream && l.id === r.headers["x-request-id"]);
    assert.equal(line.version, "v2");
    assert.equal(line.completion_tokens, 600);
  });

  test("automatic rollback when the canary's error rate exceeds stable's by the margin", async () => {
    gw.reconfigure(pools(50, 1));
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:canary_weight_percent", { pool: "main" })) === 50, 2000, 10);
    const t0 = Date.now();
    let sent = 0;
    while ((await metricSum(gw, "kvserve_gateway:canary_rollbacks_total", { pool: "main" })) === 0) {
      assert.ok(sent < 200, "rolled back within 200 requests");
      const rs = await Promise.all(onCanary.concat(sessions.slice(0, 4)).map((s) =>
        request(gw, "POST", "/v1/completions", BODY, session(`${s}-${sent}`))));
      sent += rs.length;
      for (const r of rs) assert.equal(r.status, 200, "a failed canary attempt is retried on stable: " + r.text);
    }
    const ms = Date.now() - t0;
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_weight_percent", { pool: "main" }), 0);
    assert.ok((await metricSum(gw, "kvserve_gateway:version_attempts_total", { version: "v2", outcome: "error" })) >= 5);
    assert.ok((await metricSum(gw, "kvserve_gateway:upstream_errors_total", { kind: "injected" })) >= 5);
    // After the rollback canary sessions run on stable.
    const after = await request(gw, "POST", "/v1/completions", BODY, session(onCanary[0]));
    assert.equal(await versionOf(after), "v1");
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_rolled_back", { pool: "main" }), 1);
    console.log(`# canary rolled back after ${sent} requests, ${ms} ms`);
  });

  test("a rollback holds across a reload (the file still says 50 %) and a restart (gateway.state_file)", async () => {
    // The faults are gone, the file still has the failed release at 50 %: a
    // reload must not put it back.
    const before = gw.stderr().length;
    gw.reconfigure(pools(50, 0));
    await waitFor(() => /canary v2 was rolled back; its weight stays 0/.test(gw.stderr().slice(before)), 5000);
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_weight_percent", { pool: "main" }), 0);
    for (const s of onCanary) {
      assert.equal(await versionOf(await request(gw, "POST", "/v1/completions", BODY, session(s))), "v1");
    }
    // Restarted with the state file it wrote: still 0; the state names the
    // pool and version.
    const stateFile = gw.stateFile;
    assert.deepEqual(JSON.parse(readFileSync(stateFile, "utf8")), { canary_rolled_back: { main: "v2" } });
    await gw.stop();
    gw = await startGateway({ model: modelPath, gateway: { allow_anonymous: true, state_file: stateFile }, dir: tempDir(), pools: pools(50) });
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_weight_percent", { pool: "main" }), 0);
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_rolled_back", { pool: "main" }), 1);
    assert.match(gw.stderr(), /canary v2 was rolled back before this start/);
    for (const s of onCanary) {
      assert.equal(await versionOf(await request(gw, "POST", "/v1/completions", BODY, session(s))), "v1");
    }
    // The configuration set to 0 acknowledges the rollback (the state file
    // forgets it); a later weight starts a new canary on the same label, as
    // scripts/bluegreen.sh does with its slots.
    let mark = gw.stderr().length;
    gw.reconfigure(pools(0, 0));
    await waitFor(() => /the rollback of canary v2 is acknowledged/.test(gw.stderr().slice(mark)), 5000);
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_rolled_back", { pool: "main" }), 0);
    assert.deepEqual(JSON.parse(readFileSync(stateFile, "utf8")), { canary_rolled_back: {} });
    mark = gw.stderr().length;
    gw.reconfigure(pools(50, 0));
    await waitFor(async () => (await metricSum(gw, "kvserve_gateway:canary_weight_percent", { pool: "main" })) === 50, 5000);
    assert.doesNotMatch(gw.stderr().slice(mark), /its weight stays 0/);
    // A new release (another canary_version) starts afresh.
    await gw.stop();
    const next = pools(50).map((p) => ({ ...p, canary_version: "v3",
      replicas: [{ url: stable.baseURL, version: "v1" }, { url: canary.baseURL, version: "v3" }] }));
    gw = await startGateway({ model: modelPath, gateway: { allow_anonymous: true, state_file: stateFile }, dir: tempDir(), pools: next });
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_weight_percent", { pool: "main" }), 50);
    assert.equal(await metricSum(gw, "kvserve_gateway:canary_rolled_back", { pool: "main" }), 0);
  });
});
