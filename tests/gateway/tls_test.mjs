// TLS end to end (issue 33 items 7 and 8), through real processes: a CA made
// here by the openssl CLI signs the certificates of a `kvserve serve` replica
// of the bundled model (HTTPS) and of `kvserve gateway` (HTTPS listener,
// https replica URLs verified against the pool's tls_ca_file):
//   * the gateway and the replica speak TLS 1.2 and 1.3 and refuse 1.1
//     (openssl s_client), and refuse plain HTTP on their TLS ports;
//   * the official openai npm client, trusting the CA through
//     NODE_EXTRA_CA_CERTS, gets chat completions through the gateway (and
//     fails to without it);
//   * certificates rotate without a restart: the replica on SIGHUP, the
//     gateway when its files change and on SIGHUP (s_client sees the new
//     fingerprint; a bad pair is counted and the old one stays);
//   * a replica whose certificate another CA signed is never used (the only
//     such replica of a pool: the client gets a JSON error, the gateway lives);
//   * Redis with AUTH (the password from the environment, redacted in the
//     printed configuration) and over TLS (rediss://), and a wrong password
//     or CA fails as an unreachable Redis does.
import assert from "node:assert/strict";
import { execFile, execFileSync, spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { after, before, describe, test } from "node:test";

import {
  addKey, auditLine, auth, binary, bundled, freePort, metricSum, request, requireBinary, skipFile, sourceDir,
  startGateway, startRedis, startReplica, tempDir, waitFor,
} from "./common.mjs";

requireBinary();
const modelPath = bundled();
if (!modelPath) skipFile("models/kvserve-tiny.gguf is not present");
if (spawnSync("openssl", ["version"]).status !== 0) skipFile("the openssl CLI is not installed");
const REDIS = "/usr/bin/redis-server";
const MODEL = "kvserve-tiny";
const run = promisify(execFile);

// ---- certificates (openssl CLI)

function openssl(args, input) {
  return execFileSync("openssl", args, { input, stdio: ["pipe", "pipe", "pipe"], encoding: "utf8" });
}

function makeCa(dir, name) {
  const key = path.join(dir, `${name}-ca.key`);
  const cert = path.join(dir, `${name}-ca.pem`);
  openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", `/CN=${name} test CA`, "-keyout", key,
    "-out", cert]);
  return { key, cert, pem: readFileSync(cert, "utf8") };
}

function issue(dir, ca, name, san = "IP:127.0.0.1") {
  const key = path.join(dir, `${name}.key`);
  const cert = path.join(dir, `${name}.pem`);
  const csr = path.join(dir, `${name}.csr`);
  const ext = path.join(dir, `${name}.ext`);
  writeFileSync(ext, `subjectAltName=${san}\nbasicConstraints=CA:FALSE\n`);
  openssl(["req", "-new", "-newkey", "rsa:2048", "-nodes", "-subj", `/CN=${name}`, "-keyout", key, "-out", csr]);
  openssl(["x509", "-req", "-in", csr, "-CA", ca.cert, "-CAkey", ca.key, "-CAcreateserial", "-days", "2", "-extfile", ext,
    "-out", cert]);
  return { key, cert };
}

// The served files live at fixed paths; rotation copies another pair over them.
function install(pair, live) {
  copyFileSync(pair.cert, live.cert);
  copyFileSync(pair.key, live.key);
}

const fingerprintOfPem = (pem) => openssl(["x509", "-noout", "-fingerprint", "-sha256"], pem).trim();
const fileFingerprint = (file) => fingerprintOfPem(readFileSync(file, "utf8"));

// openssl s_client against 127.0.0.1:port; resolves {ok, out}.
async function sClient(port, args = []) {
  return new Promise((resolve) => {
    const child = spawn("openssl", ["s_client", "-connect", `127.0.0.1:${port}`, "-showcerts", ...args],
      { stdio: ["pipe", "pipe", "pipe"] });
    let out = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (out += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 10000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ ok: code === 0 && /BEGIN CERTIFICATE/.test(out), out });
    });
    child.stdin.end();
  });
}

async function servedFingerprint(port) {
  const { ok, out } = await sClient(port, ["-tls1_2"]);
  assert.ok(ok, out);
  const pem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/.exec(out)[0];
  return fingerprintOfPem(pem + "\n");
}

// Plain HTTP bytes to a TLS port: whatever comes back is not an HTTP answer.
function plainHttp(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => s.write("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
    let got = "";
    const done = () => resolve(got);
    const timer = setTimeout(() => { s.destroy(); done(); }, 10000);
    s.on("data", (d) => (got += d.toString("latin1")));
    s.on("error", () => { clearTimeout(timer); done(); });
    s.on("close", () => { clearTimeout(timer); done(); });
  });
}

// The openai npm client in a child process: only NODE_EXTRA_CA_CERTS makes
// Node trust the test CA for its fetch.
async function openaiChat(baseURL, { ca, apiKey = "none", stream = false }) {
  const openai = path.join(sourceDir, "tests/oracles/node_modules/openai/index.mjs");
  if (!existsSync(openai)) return { skipped: true };
  const script = `
    import OpenAI from ${JSON.stringify(openai)};
    const client = new OpenAI({ baseURL: process.argv[1], apiKey: process.argv[2], maxRetries: 0, timeout: 60000 });
    const body = { model: ${JSON.stringify(MODEL)}, messages: [{ role: "user", content: "Hello there" }], max_tokens: 4 };
    try {
      if (${stream}) {
        let text = "";
        for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
          text += chunk.choices[0]?.delta?.content ?? "";
        }
        console.log(JSON.stringify({ ok: true, text }));
      } else {
        const r = await client.chat.completions.create(body);
        console.log(JSON.stringify({ ok: true, r }));
      }
    } catch (e) {
      console.log(JSON.stringify({ ok: false, error: String(e), cause: String(e.cause?.cause ?? e.cause ?? "") }));
    }`;
  const env = { ...process.env };
  delete env.NODE_EXTRA_CA_CERTS;
  if (ca) env.NODE_EXTRA_CA_CERTS = ca;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script, `${baseURL}/v1`, apiKey],
    { env, timeout: 90000 });
  return JSON.parse(stdout.trim().split("\n").pop());
}

describe("TLS from the client through the gateway to the replicas", () => {
  let dir, ca, rogueCa, live, gwLive, replica, rogue, gw, lonely, keyFile, key;
  const cleanup = [];
  before(async () => {
    dir = tempDir();
    ca = makeCa(dir, "pool");
    rogueCa = makeCa(dir, "rogue");
    live = { cert: path.join(dir, "replica-live.pem"), key: path.join(dir, "replica-live.key") };
    gwLive = { cert: path.join(dir, "gateway-live.pem"), key: path.join(dir, "gateway-live.key") };
    install(issue(dir, ca, "replica"), live);
    install(issue(dir, ca, "gateway"), gwLive);
    const roguePair = issue(dir, rogueCa, "rogue");
    keyFile = path.join(dir, "keys.yaml");
    key = addKey(keyFile, "tenant-a");
    replica = await startReplica({
      model: modelPath, ca: ca.pem,
      args: ["--max-context-length", "1024", "--tls-cert-file", live.cert, "--tls-key-file", live.key],
    });
    cleanup.push(() => replica.stop());
    rogue = await startReplica({ ca: rogueCa.pem, args: ["--tls-cert-file", roguePair.cert, "--tls-key-file", roguePair.key] });
    cleanup.push(() => rogue.stop());
    const tlsGateway = { tls_cert_file: gwLive.cert, tls_key_file: gwLive.key, key_file: keyFile, key_file_poll_seconds: 0.2 };
    gw = await startGateway({
      model: modelPath, dir, ca: ca.pem, gateway: tlsGateway,
      pools: [{ name: "main", max_context: 1024, tls_ca_file: ca.cert, replicas: [replica.baseURL, rogue.baseURL] }],
    });
    cleanup.push(() => gw.stop());
    // A pool whose only replica is signed by another CA.
    lonely = await startGateway({
      model: modelPath, dir, ca: ca.pem, waitReady: false,
      gateway: { ...tlsGateway, tls_cert_file: gwLive.cert, key_file_poll_seconds: 1 },
      pools: [{ name: "main", max_context: 1024, tls_ca_file: ca.cert, replicas: [rogue.baseURL] }],
    });
    cleanup.push(() => lonely.stop());
  });
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });

  test("the listeners log https, speak TLS 1.2 and 1.3, and refuse TLS 1.1 and plain HTTP", async () => {
    assert.equal(gw.scheme, "https");
    assert.equal(replica.scheme, "https");
    assert.match(gw.stderr(), /admin listening on http:\/\//, "the admin listener stays plain HTTP");
    for (const port of [gw.port, replica.port]) {
      const v12 = await sClient(port, ["-tls1_2", "-CAfile", ca.cert, "-verify_return_error"]);
      assert.ok(v12.ok, v12.out);
      assert.match(v12.out, /Verify return code: 0 \(ok\)/);
      assert.ok((await sClient(port, ["-tls1_3"])).ok);
      // Security level 0 on the client, so that only the server can refuse 1.1.
      const v11 = await sClient(port, ["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"]);
      assert.equal(v11.ok, false, `TLS 1.1 was accepted:\n${v11.out}`);
      assert.doesNotMatch(await plainHttp(port), /^HTTP\//, "plain HTTP got an HTTP answer");
    }
    const health = await request(gw, "GET", "/health");
    assert.equal(health.status, 200);
  });

  test("a certificate or key that does not load stops start-up (exit 2, naming the key and the file)", async () => {
    const missing = path.join(dir, "missing.pem");
    const gwRun = spawnSync(binary, ["gateway", "--config", gw.config, "--port", "0", "--admin-port", "0",
      "--tls-cert-file", missing], { encoding: "utf8", timeout: 30000 });
    assert.equal(gwRun.status, 2, gwRun.stderr);
    assert.match(gwRun.stderr, /gateway\.tls_cert_file: cannot read ".*missing\.pem"/);
    // A key that belongs to another certificate.
    const serveRun = spawnSync(binary, ["serve", "--model", modelPath, "--port", "0", "--tls-cert-file", live.cert,
      "--tls-key-file", gwLive.key], { encoding: "utf8", timeout: 30000 });
    assert.equal(serveRun.status, 2, serveRun.stderr);
    assert.match(serveRun.stderr, /server\.tls_key_file: the key in ".*gateway-live\.key" does not match/);
  });

  test("the openai client gets chat completions through the gateway over TLS, with the CA trusted", async (t) => {
    const r = await openaiChat(gw.baseURL, { ca: ca.cert, apiKey: key });
    if (r.skipped) return t.skip("tests/oracles/node_modules/openai is missing");
    assert.ok(r.ok, JSON.stringify(r));
    assert.equal(r.r.object, "chat.completion");
    assert.ok(r.r.usage.completion_tokens >= 1);
    const s = await openaiChat(gw.baseURL, { ca: ca.cert, apiKey: key, stream: true });
    assert.ok(s.ok, JSON.stringify(s));
    const untrusted = await openaiChat(gw.baseURL, { apiKey: key });
    assert.equal(untrusted.ok, false, "a client that does not trust the CA must not connect");
    assert.match(untrusted.cause + untrusted.error, /certificate|self.signed|issuer/i);
    const line = await auditLine(gw, (l) => l.id === r.r.id || l.status === 200);
    assert.equal(line.replica, replica.baseURL);
  });

  test("a replica whose certificate the pool's CA did not sign is never used", async () => {
    for (let i = 0; i < 6; ++i) {
      const r = await request(gw, "POST", "/v1/completions", { model: MODEL, prompt: `Once ${i}`, max_tokens: 1 }, auth(key));
      assert.equal(r.status, 200, r.text);
    }
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: rogue.baseURL }), 0);
    assert.equal(await metricSum(gw, "kvserve_gateway:replica_healthy", { replica: replica.baseURL }), 1);
    const served = existsSync(rogue.accessLog) ? readFileSync(rogue.accessLog, "utf8") : "";
    assert.doesNotMatch(served, /completions/, "the rogue replica was sent a request");
    // Its only replica unverifiable: a JSON error, and the gateway lives on.
    const r = await request(lonely, "POST", "/v1/chat/completions",
      { model: MODEL, messages: [{ role: "user", content: "hi" }], max_tokens: 1 }, auth(key));
    assert.ok(r.status === 502 || r.status === 503, `${r.status} ${r.text}`);
    assert.ok(r.json?.error?.message, r.text);
    assert.equal((await request(lonely, "GET", "/health")).status, 200);
    assert.equal(lonely.child.exitCode, null);
    assert.match(lonely.stderr(), /certificate verify failed/);
  });

  test("certificates rotate without a restart: SIGHUP, a rewritten file, and a bad pair", async () => {
    // The replica: kvserve serve reloads on SIGHUP.
    const replicaNext = issue(dir, ca, "replica-next");
    const before = await servedFingerprint(replica.port);
    assert.equal(before, fileFingerprint(live.cert));
    install(replicaNext, live);
    assert.equal(await servedFingerprint(replica.port), before, "serve reloads on SIGHUP only");
    replica.child.kill("SIGHUP");
    await waitFor(async () => (await servedFingerprint(replica.port)) === fileFingerprint(replicaNext.cert), 10000, 100);
    assert.match(replica.stderr(), /TLS certificate reloaded/);
    // The gateway verifies the new certificate (same CA) on its next connections.
    const ok = await request(gw, "POST", "/v1/completions", { model: MODEL, prompt: "After", max_tokens: 1 }, auth(key));
    assert.equal(ok.status, 200, ok.text);

    // The gateway: a rewritten pair is picked up by the poll, no signal.
    const reloads = () => metricSum(gw, "kvserve_gateway:tls_cert_reloads_total", { outcome: "ok" });
    const failures = () => metricSum(gw, "kvserve_gateway:tls_cert_reloads_total", { outcome: "failed" });
    const okBefore = await reloads();
    const gwNext = issue(dir, ca, "gateway-next");
    install(gwNext, gwLive);
    await waitFor(async () => (await servedFingerprint(gw.port)) === fileFingerprint(gwNext.cert), 10000, 100);
    await waitFor(async () => (await reloads()) > okBefore, 5000);
    // ... and on SIGHUP.
    const gwThird = issue(dir, ca, "gateway-third");
    install(gwThird, gwLive);
    gw.child.kill("SIGHUP");
    await waitFor(async () => (await servedFingerprint(gw.port)) === fileFingerprint(gwThird.cert), 10000, 100);
    // A certificate that does not parse is refused; the served one stays.
    const failedBefore = await failures();
    writeFileSync(gwLive.cert, "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n");
    gw.child.kill("SIGHUP");
    await waitFor(async () => (await failures()) > failedBefore, 10000);
    assert.equal(await servedFingerprint(gw.port), fileFingerprint(gwThird.cert));
    assert.match(gw.stderr(), /TLS certificate not reloaded/);
    const still = await openaiChat(gw.baseURL, { ca: ca.cert, apiKey: key });
    assert.ok(still.skipped || still.ok, JSON.stringify(still));
    install(gwThird, gwLive);
  });
});

describe("Redis shared state with AUTH and TLS", () => {
  const cleanup = [];
  after(async () => {
    for (const f of cleanup.reverse()) await f();
  });
  const PASSWORD = "s3cret-Redis:pass@word";

  async function setup(t) {
    if (!existsSync(REDIS)) {
      t.skip("redis-server is not installed (scripts/setup.sh installs it)");
      return null;
    }
    const dir = tempDir();
    const keyFile = path.join(dir, "keys.yaml");
    const key = addKey(keyFile, "tenant-r", { "tokens-per-minute": 100000 });
    const replica = await startReplica({ model: modelPath, args: ["--max-context-length", "1024"] });
    cleanup.push(() => replica.stop());
    return { dir, keyFile, key, pools: [{ name: "main", max_context: 1024, replicas: [replica.baseURL] }] };
  }

  const BODY = { model: MODEL, prompt: "Once", max_tokens: 1 };
  const redisKeys = (port, extra = []) =>
    execFileSync("redis-cli", ["-p", String(port), "--no-auth-warning", "-a", PASSWORD, ...extra, "--scan", "--pattern", "kvsgw:*"],
      { encoding: "utf8" });

  test("AUTH: the password from the environment works, a wrong one fails like an unreachable Redis", async (t) => {
    const s = await setup(t);
    if (!s) return;
    const port = await freePort();
    const redis = startRedis(port, { args: ["--requirepass", PASSWORD] });
    cleanup.push(() => redis.stop());
    await redis.ready();
    const gateway = {
      key_file: s.keyFile, shared_state: `redis://127.0.0.1:${port}`, shared_state_password_env: "KVS_TEST_REDIS_PASSWORD",
      shared_state_failure: "closed",
    };
    const gw = await startGateway({ model: modelPath, dir: s.dir, pools: s.pools, gateway, env: { KVS_TEST_REDIS_PASSWORD: PASSWORD } });
    cleanup.push(() => gw.stop());
    const r = await request(gw, "POST", "/v1/completions", BODY, auth(s.key));
    assert.equal(r.status, 200, r.text);
    assert.equal(await metricSum(gw, "kvserve_gateway:shared_state_errors_total"), 0);
    assert.match(redisKeys(port), /kvsgw:/, "the counters are in Redis");
    // Credentials in the URL work too; the printed configuration redacts them.
    const url = `redis://default:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`;
    const printed = execFileSync(binary, ["gateway", "--config", gw.config, "--shared-state", url, "--shared-state-password-env", "",
      "--print-config"], { encoding: "utf8" });
    assert.doesNotMatch(printed, /s3cret/);
    assert.match(printed, /redis:\/\/default:<redacted>@127\.0\.0\.1/);
    const inUrl = await startGateway({ model: modelPath, dir: s.dir, pools: s.pools, gateway: { ...gateway, shared_state: url, shared_state_password_env: "" } });
    cleanup.push(() => inUrl.stop());
    assert.equal((await request(inUrl, "POST", "/v1/completions", BODY, auth(s.key))).status, 200);
    assert.equal(await metricSum(inUrl, "kvserve_gateway:shared_state_errors_total"), 0);
    assert.doesNotMatch(inUrl.stderr(), /s3cret/);

    // Without the password (or a wrong one) Redis refuses; "closed" answers 503.
    const wrong = await startGateway({
      model: modelPath, dir: s.dir, pools: s.pools, gateway: { ...gateway, shared_state_password_env: "" },
    });
    cleanup.push(() => wrong.stop());
    const refused = await request(wrong, "POST", "/v1/completions", BODY, auth(s.key));
    assert.equal(refused.status, 503, refused.text);
    assert.equal(refused.json.error.code, "rate_limit_store_unavailable");
    assert.ok((await metricSum(wrong, "kvserve_gateway:shared_state_errors_total")) >= 1);
    // A variable that is not set stops start-up, naming the key.
    const { status, stderr } = spawnSync(binary, ["gateway", "--config", gw.config, "--shared-state-password-env", "KVS_NOT_SET_ANYWHERE"],
      { encoding: "utf8", timeout: 30000 });
    assert.equal(status, 2, stderr);
    assert.match(stderr, /gateway\.shared_state_password_env/);
  });

  test("rediss://: TLS to Redis verified against shared_state_tls_ca_file", async (t) => {
    const s = await setup(t);
    if (!s) return;
    const help = spawnSync(REDIS, ["--tls-port", "0", "--test-memory", "0"], { encoding: "utf8" });
    if (/not supported|TLS support/i.test(help.stderr + help.stdout)) return t.skip("redis-server was built without TLS");
    const ca = makeCa(s.dir, "redis");
    const other = makeCa(s.dir, "other");
    const pair = issue(s.dir, ca, "redis-server");
    const port = await freePort();
    const redis = startRedis(port, { tls: { cert: pair.cert, key: pair.key, ca: ca.cert }, args: ["--requirepass", PASSWORD] });
    cleanup.push(() => redis.stop());
    await redis.ready();
    const url = `rediss://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`;
    const gateway = { key_file: s.keyFile, shared_state: url, shared_state_tls_ca_file: ca.cert, shared_state_failure: "closed" };
    const gw = await startGateway({ model: modelPath, dir: s.dir, pools: s.pools, gateway });
    cleanup.push(() => gw.stop());
    const r = await request(gw, "POST", "/v1/completions", BODY, auth(s.key));
    assert.equal(r.status, 200, r.text);
    assert.equal(await metricSum(gw, "kvserve_gateway:shared_state_errors_total"), 0);
    assert.match(redisKeys(port, ["--tls", "--cacert", ca.cert]), /kvsgw:/, "the counters are in Redis");
    // Redis's certificate under another CA: no connection, 503 in "closed" mode.
    const wrongCa = await startGateway({
      model: modelPath, dir: s.dir, pools: s.pools, gateway: { ...gateway, shared_state_tls_ca_file: other.cert },
    });
    cleanup.push(() => wrongCa.stop());
    const refused = await request(wrongCa, "POST", "/v1/completions", BODY, auth(s.key));
    assert.equal(refused.status, 503, refused.text);
    assert.ok((await metricSum(wrongCa, "kvserve_gateway:shared_state_errors_total")) >= 1);
    // Plain redis:// to the TLS port gets no answer: a failure too.
    const plain = await startGateway({
      model: modelPath, dir: s.dir, pools: s.pools,
      gateway: { key_file: s.keyFile, shared_state: `redis://:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`, shared_state_failure: "closed" },
    });
    cleanup.push(() => plain.stop());
    assert.equal((await request(plain, "POST", "/v1/completions", BODY, auth(s.key))).status, 503);
  });
});
