// Helpers for the kvserve server integration tests: start the real
// `kvserve serve` binary on a free loopback port, talk raw HTTP to it, read
// its metrics, stop it. The tests run with `node --test FILE` (node:test);
// a file exits 77 (ctest: skipped) when an optional thing it needs (a
// model in the shared directory, node_modules, a tool) is absent, and fails
// when a binary of the build tree is (requireBinary).
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import http from "node:http";
import https from "node:https";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

// Temporary directories this test process made; removed when it exits, so a
// test run leaves nothing behind in $TMPDIR.
const madeDirs = [];
process.on("exit", () => {
  for (const d of madeDirs) rmSync(d, { recursive: true, force: true });
});
export function madeTempDir(prefix) {
  const d = mkdtempSync(path.join(tmpdir(), prefix));
  madeDirs.push(d);
  return d;
}

export const SKIP = 77;
const here = path.dirname(fileURLToPath(import.meta.url));
export const sourceDir = process.env.KVSERVE_SOURCE_DIR || path.resolve(here, "../..");
export const sharedDir = process.env.KVSERVE_SHARED_DIR || path.resolve(sourceDir, "../shared");
// The binaries under test: always those of the build tree that ctest runs
// (tests/CMakeLists.txt and src/*/CMakeLists.txt pass them), never a guess
// at some other tree's path, so a test cannot pass against a stale build.
export const binary = process.env.KVSERVE_BIN || "";
// `kvserve serve` over the fake backend: a test-only binary (kvserve never links the fake).
export const fakeBinary = process.env.KVSERVE_FAKE_BIN || "";

export function skipFile(why) {
  console.log(`SKIP: ${why}`);
  process.exit(SKIP);
}

export function failFile(why) {
  console.log(`FAIL: ${why}`);
  process.exit(1);
}

// A missing binary is a failure, not a skip: the build tree is broken or the
// test is not run through ctest (which sets both variables).
export function requireBinary() {
  for (const [name, file, target] of [["KVSERVE_BIN", binary, "kvserve"], ["KVSERVE_FAKE_BIN", fakeBinary, "kvserve_fake"]]) {
    if (!file) failFile(`${name} is not set (run the test through ctest, or set it to the ${target} binary of your build tree)`);
    if (!existsSync(file)) failFile(`${name}=${file} does not exist (build the ${target} target)`);
  }
}

// The official openai npm client from tests/oracles, or a skip.
export async function loadOpenAI() {
  const p = path.join(sourceDir, "tests/oracles/node_modules/openai/index.mjs");
  if (!existsSync(p)) skipFile(`${p} is missing (run scripts/setup.sh to install the npm test oracles)`);
  return (await import(p)).default;
}

export function realModelPath() {
  const p = path.join(sharedDir, "models/stories260K.gguf");
  return existsSync(p) ? p : null;
}

// Spawns a kvserve process (`what` names it in errors) that prints
// "listening on http://HOST:PORT" (or https://) on stderr; resolves with the
// child, its port, scheme and baseURL, a promise of its exit and
// stop(signal), once that line appears. For https, set `ca` (PEM text) on the
// result for request() to trust.
export async function spawnListening(file, argv, { env = {}, what = "server" } = {}) {
  const child = spawn(file, argv, { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  let stderr = "";
  let stdout = "";
  child.stdout.on("data", (d) => (stdout += d));
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const [scheme, host, port] = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what} did not start:\n${stderr}`)), 30000);
    child.stderr.on("data", (d) => {
      stderr += d;
      const m = /listening on (https?):\/\/([^:\s]+):(\d+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        // An IPv4 loopback address other than 127.0.0.1 is where it is;
        // anything else (0.0.0.0, a name) is reached on 127.0.0.1.
        const ip = /^127\.\d+\.\d+\.\d+$/.test(m[2]) ? m[2] : "127.0.0.1";
        resolve([m[1], ip, Number(m[3])]);
      }
    });
    exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited with ${code} before listening:\n${stderr}`));
    });
  });
  return {
    child,
    host,
    port,
    scheme,
    exited,
    baseURL: `${scheme}://${host}:${port}`,
    stderr: () => stderr,
    stdout: () => stdout,
    async stop(signal = "SIGTERM") {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}

// Stops a job started by mpirun (spawnListening's result) with SIGTERM, as a
// supervisor would. Open MPI 4.1.4's mpirun can hang after its ranks have
// ended (every rank a zombie; docs/parallel.md says when): once every rank
// has been a zombie for `graceMs`, their ends are read from /proc and mpirun
// is killed, as a supervisor's stop timeout would. Resolves like stop():
// { code, signal }; when mpirun had to be killed, code 0 when every rank
// exited 0, and `ranks` says how each ended.
export async function stopMpirun(job, { graceMs = 5000 } = {}) {
  const { child } = job;
  const done = () => child.exitCode !== null || child.signalCode !== null;
  if (!done()) child.kill("SIGTERM");
  let zombieSince = 0;
  while (!done()) {
    await new Promise((r) => setTimeout(r, 200));
    const ranks = childProcesses(child.pid);
    if (ranks.length === 0 || ranks.some((r) => r.state !== "Z")) {
      zombieSince = 0;
    } else if (!zombieSince) {
      zombieSince = Date.now();
    } else if (Date.now() - zombieSince >= graceMs) {
      // waitpid's status: the exit code in bits 8-15, or a signal in bits 0-6.
      const ends = ranks.map((r) => ((r.status & 0x7f) === 0 ? `exit ${(r.status >> 8) & 0xff}` : `signal ${r.status & 0x7f}`));
      process.stderr.write(`# mpirun had not reaped its ${ranks.length} ranks (${ends.join(", ")}) ` +
        `${graceMs} ms after they ended: killed (Open MPI 4.1.4, docs/parallel.md)\n`);
      child.kill("SIGKILL");
      await job.exited;
      return { code: ends.every((e) => e === "exit 0") ? 0 : 1, signal: null, ranks: ends };
    }
  }
  return job.exited;
}

// The children of `ppid`: pid, state and waitpid status (/proc/PID/stat
// fields 3 and 52: a zombie's exit status).
export function childProcesses(ppid) {
  const out = [];
  for (const pid of readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");  // fields[0] is field 3
      if (Number(fields[1]) === ppid) out.push({ pid: Number(pid), state: fields[0], status: Number(fields[49]) });
    } catch {
      // gone
    }
  }
  return out;
}

// Starts `kvserve serve` with the given extra arguments (over the fake
// backend, kvserve_fake, by default) on an ephemeral port. Resolves once the listening line appears;
// with waitReady, once /ready says 200. ca: the PEM CA of a TLS server.
export async function startServer({ args = [], fake = true, waitReady = true, env = {}, ca } = {}) {
  const dir = madeTempDir("kvserve-test-");
  const accessLog = path.join(dir, "access.log");
  const argv = ["serve", "--port", "0", "--host", "127.0.0.1", "--access-log", accessLog, "--log-level", "info"];
  argv.push(...args);
  const server = { ...(await spawnListening(fake ? fakeBinary : binary, argv, { env })), accessLog, ca };
  if (waitReady) await waitFor(async () => (await request(server, "GET", "/ready")).status === 200, 30000);
  return server;
}

export async function waitFor(pred, timeoutMs = 10000, stepMs = 20) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if (await pred()) return;
    if (Date.now() > end) throw new Error("timed out waiting for a condition");
    await new Promise((r) => setTimeout(r, stepMs));
  }
}

// One raw HTTP request. body: object (sent as JSON), string or Buffer.
// Resolves {status, headers, text, json}.
export function request(server, method, urlPath, body, headers = {}) {
  return new Promise((resolve, reject) => {
    let payload;
    if (body !== undefined) payload = typeof body === "string" || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    const h = { ...headers };
    if (payload !== undefined) {
      h["content-type"] ??= "application/json";
      h["content-length"] = Buffer.byteLength(payload);
    }
    const tls = server.scheme === "https";
    const opts = { host: server.host ?? "127.0.0.1", port: server.port, method, path: urlPath, headers: h, agent: false };
    if (tls) opts.ca = server.ca;
    const req = (tls ? https : http).request(opts, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => {
        const text = Buffer.concat(chunks).toString("utf8");
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, headers: res.headers, text, json });
      });
      res.on("error", reject);
    });
    req.on("error", reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

// Starts a streaming completion and resolves once its first chunk arrived,
// with a handle that says whether the stream has ended and can abort it.
export function startStream(server, body) {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify({ ...body, stream: true });
    let ended = false;
    const req = http.request({ host: "127.0.0.1", port: server.port, method: "POST", path: "/v1/completions", agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(data) } }, (res) => {
      res.once("data", () => resolve({ ended: () => ended, abort: () => req.destroy() }));
      res.on("end", () => (ended = true));
      res.on("error", () => {});
    });
    req.on("error", (e) => (e.code === "ECONNRESET" ? undefined : reject(e)));
    req.end(data);
  });
}

// Parses an SSE body into its events ({event, data}).
export function parseSse(text) {
  const events = [];
  for (const block of text.split(/\r?\n\r?\n/)) {
    if (!block.trim()) continue;
    let event = null;
    const data = [];
    for (const line of block.split(/\r?\n/)) {
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? "" : line.slice(i + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      if (field === "data") data.push(value);
    }
    if (data.length) events.push({ event, data: data.join("\n") });
  }
  return events;
}

// Prometheus text -> Map of "name{labels}" -> number. A gateway's come from
// its admin listener (server.admin), a replica's from its one port.
export async function metrics(server) {
  const r = await request(server.admin ?? server, "GET", "/metrics");
  if (r.status !== 200) throw new Error(`GET /metrics: ${r.status} ${r.text}`);
  const out = new Map();
  for (const line of r.text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const i = line.lastIndexOf(" ");
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

export function metric(map, name) {
  if (!map.has(name)) throw new Error(`metric ${name} missing`);
  return map.get(name);
}

// The fake backend's story (what temperature 0 generates, then EOS).
export const STORY =
  "Once upon a time, there was a little girl named Lily. She loved to play in the park. " +
  "One day, she went to a café with her mom. They ate cake and drank milk.\nThe end.";
