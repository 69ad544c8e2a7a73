// Soak test driver (issue 10): runs `kvserve serve` at saturation for a set
// time with a mix of normal, streaming, cancelled, disconnecting, over-length
// and malformed requests, then reports
//   - crashes (the server process died: must be 0),
//   - KV blocks in use once idle (kvserve:kv_cache_blocks_used: must be 0),
//   - RSS growth from the baseline (minute 5, or 20 % of the run when that is
//     earlier) to the end (must be < 5 %),
//   - answers by request kind and class (2xx, 4xx by status, 5xx, transport
//     errors); an answer a kind must never get (a 5xx other than an overload
//     503, a 200 to a malformed request, a lost connection) is a failure.
// Exits 0 when every check passed, 1 otherwise. Usage (scripts/soak.sh wraps it):
//   node scripts/soak.mjs --bin build/release/src/cli/kvserve --seconds 60
//        [--model models/kvserve-tiny.gguf] [--concurrency 12] [--report FILE.json]
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import http from "node:http";
import net from "node:net";
import { parseArgs } from "node:util";

const { values: opt } = parseArgs({
  options: {
    bin: { type: "string", default: "build/release/src/cli/kvserve" },
    model: { type: "string", default: "models/kvserve-tiny.gguf" },
    config: { type: "string", default: "configs/default.yaml" },
    seconds: { type: "string", default: "60" },
    concurrency: { type: "string", default: "12" },
    threads: { type: "string", default: "1" },
    report: { type: "string", default: "" },
  },
});
const seconds = Number(opt.seconds);
const concurrency = Number(opt.concurrency);
const kContext = 1024;  // --max-context-length: small, so over-length prompts are cheap to send

const log = (...a) => console.log(`[soak ${new Date().toISOString().slice(11, 19)}]`, ...a);

// ---- the server ------------------------------------------------------------
const argv = ["serve", "--config", opt.config, "--model", opt.model, "--host", "127.0.0.1", "--port", "0",
  "--threads", opt.threads, "--io-threads", "1", "--prep-threads", "1", "--max-context-length", String(kContext),
  "--max-concurrent-requests", "32", "--max-batch-size", "8", "--access-log", "off", "--log-level", "info",
  "--request-timeout", "60"];
const child = spawn(opt.bin, argv, { stdio: ["ignore", "ignore", "pipe"] });
let stderrTail = "";
child.stderr.on("data", (d) => { stderrTail = (stderrTail + d).slice(-20000); });
let exitInfo = null;
let stopping = false;
const exited = new Promise((resolve) => child.on("exit", (code, signal) => {
  exitInfo = { code, signal };
  if (!stopping) log(`server died: code ${code} signal ${signal}\n${stderrTail.slice(-4000)}`);
  resolve(exitInfo);
}));

async function findPort() {
  const end = Date.now() + 60000;
  while (Date.now() < end) {
    const m = /listening on http:\/\/[^:]+:(\d+)/.exec(stderrTail);
    if (m) return Number(m[1]);
    if (exitInfo) break;
    await sleep(50);
  }
  throw new Error(`server did not start:\n${stderrTail}`);
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- one request -----------------------------------------------------------
// Resolves { status, body, error } where error is a transport error code.
// abortAfterMs / abortOnFirstByte: the client goes away on purpose.
let modelId = "";
function send(port, method, path, body, { abortAfterMs = 0, abortOnFirstByte = false, timeoutMs = 120000 } = {}) {
  return new Promise((resolve) => {
    const data = body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify({ model: modelId, ...body });
    const headers = data === undefined ? {} : { "content-type": "application/json", "content-length": Buffer.byteLength(data) };
    let settled = false;
    const done = (r) => { if (!settled) { settled = true; resolve(r); } };
    const req = http.request({ host: "127.0.0.1", port, method, path, headers, agent: false }, (res) => {
      const chunks = [];
      res.on("data", (c) => {
        chunks.push(c);
        if (abortOnFirstByte) { req.destroy(); done({ status: res.statusCode, aborted: true }); }
      });
      res.on("end", () => done({ status: res.statusCode, body: Buffer.concat(chunks).toString() }));
      res.on("error", (e) => done({ status: res.statusCode, error: e.code || e.message }));
    });
    req.setTimeout(timeoutMs, () => { req.destroy(); done({ error: "client_timeout" }); });
    req.on("error", (e) => done({ error: e.code || e.message }));
    if (abortAfterMs > 0) setTimeout(() => { req.destroy(); done({ aborted: true }); }, abortAfterMs);
    req.end(data);
  });
}

// A raw socket that sends a request and hangs up right away.
function sendAndHangUp(port, raw) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1", () => { s.end(raw); s.destroy(); resolve({ aborted: true }); });
    s.on("error", () => resolve({ aborted: true }));
  });
}

const words = ["Once", "upon", "a", "time", "there", "was", "a", "little", "girl", "named", "Lily", "who", "liked",
  "to", "play", "in", "the", "park", "with", "her", "dog"];
function prompt(n) {
  let s = "";
  for (let i = 0; i < n; ++i) s += words[Math.floor(Math.random() * words.length)] + " ";
  return s.trim();
}
const pick = (a) => a[Math.floor(Math.random() * a.length)];

// Each kind: weight, how to send it, which answers are acceptable.
// 429/503 (queue full, prep queue full) are overload answers at saturation:
// counted, never a failure.
const overload = (r) => r.status === 429 || r.status === 503;
const kinds = {
  normal: { weight: 30, run: (p) => send(p, "POST", "/v1/completions",
    { prompt: prompt(8 + Math.floor(Math.random() * 40)), max_tokens: 8 + Math.floor(Math.random() * 40), temperature: 0.8 }),
    ok: (r) => r.status === 200 && JSON.parse(r.body).choices?.length === 1 },
  chat: { weight: 10, run: (p) => send(p, "POST", "/v1/chat/completions",
    { messages: [{ role: "system", content: "Tell a story." }, { role: "user", content: prompt(12) }], max_tokens: 24 }),
    ok: (r) => r.status === 200 },
  streaming: { weight: 20, run: (p) => send(p, "POST", "/v1/completions",
    { prompt: prompt(16), max_tokens: 32, stream: true, stream_options: { include_usage: true } }),
    ok: (r) => r.status === 200 && r.body.includes("data: [DONE]") },
  cancelled: { weight: 10, run: (p) => send(p, "POST", "/v1/completions",
    { prompt: prompt(16), max_tokens: 200, stream: true, ignore_eos: true }, { abortOnFirstByte: true }),
    ok: (r) => r.aborted || r.status === 200 },
  disconnecting: { weight: 8, run: (p) => Math.random() < 0.5
    ? send(p, "POST", "/v1/completions", { prompt: prompt(16), max_tokens: 100, ignore_eos: true },
      { abortAfterMs: 5 + Math.floor(Math.random() * 100) })
    : sendAndHangUp(p, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"prompt\":"),
    ok: (r) => r.aborted || r.status === 200 },
  overlength: { weight: 8, run: (p) => Math.random() < 0.5
    ? send(p, "POST", "/v1/completions", { prompt: prompt(kContext * 2), max_tokens: 4 })
    : send(p, "POST", "/v1/completions", { prompt: prompt(8), max_tokens: kContext * 4 }),
    ok: (r) => r.status === 400 },
  // Broken JSON goes to every endpoint; wrong fields only to the generation
  // endpoints (/tokenize ignores sampling fields).
  malformed: { weight: 14, run: (p) => Math.random() < 0.5
    ? send(p, "POST", pick(["/v1/completions", "/v1/chat/completions", "/tokenize"]), pick([
      "{\"prompt\": \"unterminated",
      "[1,2,3",
      "{\"prompt\":" + "[".repeat(20000) + "]".repeat(20000) + "}",
      Buffer.from([0xff, 0xfe, 0x00, 0x7b]).toString("latin1"),
    ]))
    : send(p, "POST", "/v1/completions", pick([
      { prompt: "x", max_tokens: "many" },
      { prompt: "x", temperature: -3 },
      { prompt: 7 },
      { prompt: "x", n: 1e9 },
      { prompt: "x", stop: Array(100).fill("s") },
      { prompt: "x", logit_bias: { a: 1 } },
    ])), ok: (r) => r.status >= 400 && r.status < 500 && r.status !== 404 },
};
const table = Object.entries(kinds).flatMap(([name, k]) => Array(k.weight).fill(name));

// counts[kind][class] = n
const counts = {};
const failures = {};  // "kind class body" -> n
function record(kind, r) {
  const cls = r.aborted ? "client_abort" : r.error ? `transport:${r.error}` : `${r.status}`;
  counts[kind] ??= {};
  counts[kind][cls] = (counts[kind][cls] || 0) + 1;
  let good = false;
  try { good = overload(r) || kinds[kind].ok(r); } catch { good = false; }
  if (!good) {
    const key = `${kind} ${cls} ${(r.body || "").slice(0, 200)}`;
    failures[key] = (failures[key] || 0) + 1;
  }
  return good;
}

function rssKiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : null;
  } catch { return null; }
}

async function metric(port, name) {
  const r = await send(port, "GET", "/metrics");
  if (r.status !== 200) return null;
  const line = r.body.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
  return line ? Number(line.split(" ").pop()) : null;
}

// ---- main ------------------------------------------------------------------
const port = await findPort();
for (let i = 0; i < 600 && (await send(port, "GET", "/ready")).status !== 200; ++i) await sleep(100);
modelId = JSON.parse((await send(port, "GET", "/v1/models")).body).data[0].id;
log(`server pid ${child.pid} on port ${port}; ${seconds} s at concurrency ${concurrency}`);
const t0 = Date.now();
const end = t0 + seconds * 1000;
const baselineAt = Math.min(300, 0.2 * seconds);
const samples = [];  // [t seconds, RSS KiB]
const sampler = setInterval(() => {
  const v = rssKiB(child.pid);
  if (v !== null) samples.push([(Date.now() - t0) / 1000, v]);
}, 1000);
let lastReport = t0;
let total = 0;
let bad = 0;
async function worker() {
  while (Date.now() < end && !exitInfo) {
    const kind = pick(table);
    const r = await kinds[kind].run(port);
    ++total;
    if (!record(kind, r)) ++bad;
    if (Date.now() - lastReport > 30000) {
      lastReport = Date.now();
      const rss = samples.length ? samples[samples.length - 1][1] : 0;
      log(`${Math.round((Date.now() - t0) / 1000)} s: ${total} requests, ${bad} unexpected answers, RSS ${(rss / 1024).toFixed(1)} MiB`);
    }
  }
}
await Promise.all(Array.from({ length: concurrency }, worker));
const loadSeconds = (Date.now() - t0) / 1000;

// Idle: everything cancelled or finished must have given its KV back.
let kvUsed = null;
let healthy = false;
if (!exitInfo) {
  for (let i = 0; i < 200; ++i) {
    kvUsed = await metric(port, "kvserve:kv_cache_blocks_used");
    if (kvUsed === 0) break;
    await sleep(100);
  }
  healthy = (await send(port, "GET", "/health")).status === 200 &&
    (await send(port, "POST", "/v1/completions", { prompt: "Once upon", max_tokens: 4 })).status === 200;
}
await sleep(1500);
clearInterval(sampler);
const at = (t) => samples.reduce((best, s) => (Math.abs(s[0] - t) < Math.abs(best[0] - t) ? s : best), samples[0]);
const base = samples.length ? at(baselineAt) : [0, 0];
const last = samples.length ? samples[samples.length - 1] : [0, 0];
const peakAfter = samples.filter((s) => s[0] >= base[0]).reduce((m, s) => Math.max(m, s[1]), 0);
const growth = base[1] > 0 ? (last[1] - base[1]) / base[1] : 0;

stopping = true;
const crashed = exitInfo !== null;
child.kill("SIGTERM");
const stop = await Promise.race([exited, sleep(60000).then(() => null)]);
if (!stop) child.kill("SIGKILL");

const summary = {
  seconds: Number(loadSeconds.toFixed(1)),
  concurrency,
  requests: total,
  unexpected_answers: bad,
  crashes: crashed ? 1 : 0,
  server_exit_on_sigterm: stop,
  kv_blocks_used_when_idle: kvUsed,
  healthy_after: healthy,
  rss_mib: {
    baseline_at_s: Number(base[0].toFixed(0)),
    baseline: Number((base[1] / 1024).toFixed(1)),
    end: Number((last[1] / 1024).toFixed(1)),
    peak_after_baseline: Number((peakAfter / 1024).toFixed(1)),
    growth_percent: Number((growth * 100).toFixed(2)),
  },
  counts,
  failures: Object.fromEntries(Object.entries(failures).slice(0, 20)),
};
const checks = {
  "no crash": !crashed,
  "clean exit on SIGTERM": stop !== null && stop.code === 0,
  "KV blocks in use once idle == 0": kvUsed === 0,
  "serving after the soak": healthy,
  "RSS growth < 5 %": growth < 0.05,
  "no unexpected answers": bad === 0,
  "requests were served": (counts.normal?.["200"] || 0) > 0 && (counts.streaming?.["200"] || 0) > 0,
};
summary.checks = checks;
const text = JSON.stringify(summary, null, 2);
console.log(text);
if (opt.report) writeFileSync(opt.report, text + "\n");
const failed = Object.entries(checks).filter(([, v]) => !v).map(([k]) => k);
if (failed.length) {
  log(`FAILED: ${failed.join("; ")}`);
  if (crashed || bad) log(`server stderr (tail):\n${stderrTail.slice(-4000)}`);
  process.exit(1);
}
log("passed");
process.exit(0);
