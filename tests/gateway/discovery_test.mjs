// Replicas from DNS and readiness per pool, end to end: `kvserve gateway`
// with a pool given as replicas_dns (a name, as a Kubernetes headless Service
// is) and fake-backend replicas on several loopback addresses sharing one
// port. The name is answered by nss_wrapper (libnss-wrapper: getaddrinfo
// reads NSS_WRAPPER_HOSTS instead of /etc/hosts), so the test can change
// what it resolves to while the gateway runs:
//   * every address is a replica: routed to one by one, counted in
//     kvserve_gateway:pool_replicas;
//   * an address that leaves the name leaves the pool (its series go from
//     /metrics), a new one joins and gets traffic, all without a reload;
//   * a killed replica still in DNS is ejected and the others serve;
//   * a pool without an available replica does not take the gateway out of
//     /ready: its own requests get 503 no_replica_available, the other
//     pool's requests are served.
// Skips (77) without libnss_wrapper.so (scripts/setup.sh installs it).
// Not labelled engine: nss_wrapper's own locking trips TSan; the discovery
// thread runs under TSan in process (gateway_unit_test, DiscoveryTest).
import assert from "node:assert/strict";
import { existsSync, renameSync, utimesSync, writeFileSync } from "node:fs";
import path from "node:path";
import { after, test } from "node:test";

import {
  bundled, freePort, metricSum, metrics, request, requireBinary, skipFile, startGateway, startReplica, stories,
  tempDir, waitFor,
} from "./common.mjs";

requireBinary();
const tokenizer = stories() || bundled();
if (!tokenizer) skipFile("no GGUF for the gateway's tokenizer (../shared/models/stories260K.gguf or models/kvserve-tiny.gguf)");
const nssWrapper = ["/usr/lib/x86_64-linux-gnu/libnss_wrapper.so", "/usr/lib/aarch64-linux-gnu/libnss_wrapper.so",
  "/usr/lib/libnss_wrapper.so"].find(existsSync);
if (!nssWrapper) skipFile("libnss_wrapper.so is missing (apt-get install libnss-wrapper; scripts/setup.sh does)");

const cleanup = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

const dir = tempDir();
const hosts = path.join(dir, "hosts");
const NAME = "replicas.kvserve.test";
// Replaced whole (renamed over, as a ConfigMap update is); nss_wrapper
// reloads the file when its mtime (in seconds) changes, so each version gets
// an mtime of its own.
let generation = 0;
const setHosts = (addresses) => {
  const tmp = `${hosts}.new`;
  writeFileSync(tmp, addresses.map((a) => `${a} ${NAME}\n`).join(""));
  const t = Math.floor(Date.now() / 1000) + 10 * ++generation;
  utimesSync(tmp, t, t);
  renameSync(tmp, hosts);
};
const body = { model: "fake-model", prompt: "Once upon a time", max_tokens: 4, temperature: 0 };

test("replicas_dns: each address is a replica; addresses join and leave; a dead pool leaves /ready alone", async () => {
  const port = await freePort();
  const replicas = {};
  for (const a of ["127.0.0.2", "127.0.0.3", "127.0.0.4"]) {
    replicas[a] = await startReplica({ port, args: ["--host", a] });
    cleanup.push(() => replicas[a].stop());
  }
  const url = (a) => `http://${a}:${port}`;
  setHosts(["127.0.0.2", "127.0.0.3"]);
  const dead = await freePort();  // nothing listens there
  const gw = await startGateway({
    model: tokenizer,
    dir,
    gateway: { allow_anonymous: true, dns_refresh_seconds: 0.2, eject_after_failures: 1 },
    pools: [
      { name: "short", max_context: 1024, replicas_dns: [`${NAME}:${port}`] },
      { name: "long", max_context: 4096, replicas: [`http://127.0.0.1:${dead}`] },
    ],
    // DISABLE_DEEPBIND: nss_wrapper's dlopen flag that the ASan runtime refuses.
    env: { LD_PRELOAD: nssWrapper, NSS_WRAPPER_HOSTS: hosts, NSS_WRAPPER_DISABLE_DEEPBIND: "1" },
    waitReady: false,
  });
  cleanup.push(() => gw.stop());
  cleanup.push(() => { if (process.env.KVSERVE_TEST_VERBOSE) console.log(gw.stderr()); });

  // Ready with the long pool empty: the short pool can serve.
  await waitFor(async () => (await request(gw, "GET", "/ready")).status === 200, 30000);
  const ready = await request(gw, "GET", "/ready");
  assert.equal(ready.json.pools.short.ready, true, ready.text);
  assert.equal(ready.json.pools.long.ready, false, ready.text);
  assert.equal(ready.json.pools.short.replicas, 2, ready.text);
  await waitFor(async () => (await request(gw, "GET", "/ready")).json.pools.short.available_replicas === 2, 10000);
  assert.equal(await metricSum(gw, "kvserve_gateway:pool_replicas", { pool: "short" }), 2);
  assert.ok((await metricSum(gw, "kvserve_gateway:dns_lookups_total", { pool: "short", outcome: "ok" })) >= 1);

  // Requests go to both addresses.
  const served = async (a) => metricSum(gw, "kvserve_gateway:requests_total", { replica: url(a), status: "200" });
  for (let i = 0; i < 12; i++) {
    const r = await request(gw, "POST", "/v1/completions", body);
    assert.equal(r.status, 200, r.text);
  }
  assert.ok((await served("127.0.0.2")) >= 1, "127.0.0.2 got none");
  assert.ok((await served("127.0.0.3")) >= 1, "127.0.0.3 got none");

  // Longer than the short pool: only the long pool can take it, and it has no replica.
  const long = await request(gw, "POST", "/v1/completions", { ...body, max_tokens: 2000 });
  assert.equal(long.status, 503, long.text);
  assert.equal(long.json.error.code, "no_replica_available", long.text);

  // .2 leaves the name, .4 joins: no reload, no restart.
  setHosts(["127.0.0.3", "127.0.0.4"]);
  await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: url("127.0.0.4") })) === 1, 10000);
  await waitFor(async () => !(await metrics(gw)).has(`kvserve_gateway:replica_healthy{pool="short",replica="${url("127.0.0.2")}"}`), 10000);
  assert.equal(await metricSum(gw, "kvserve_gateway:pool_replicas", { pool: "short" }), 2);
  const before2 = await served("127.0.0.2");
  for (let i = 0; i < 12; i++) {
    const r = await request(gw, "POST", "/v1/completions", body);
    assert.equal(r.status, 200, r.text);
  }
  assert.ok((await served("127.0.0.4")) >= 1, "the joined replica got no traffic");
  assert.equal(await served("127.0.0.2"), before2, "the replica that left still got traffic");

  // A replica still in DNS dies: ejected, the other serves every request.
  await replicas["127.0.0.3"].stop();
  for (let i = 0; i < 8; i++) {
    const r = await request(gw, "POST", "/v1/completions", body);
    assert.equal(r.status, 200, r.text);
  }
  await waitFor(async () => (await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: url("127.0.0.3") })) === 0, 10000);
  const status = await request(gw.admin, "GET", "/status");
  assert.equal(status.status, 200);
  assert.ok(!status.text.includes(url("127.0.0.2")), "the replica that left is still on /status");
});
