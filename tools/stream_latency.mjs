// Time to first token and inter-token latency of ONE stream at a time
// through `kvserve serve`, for one or more kvserve binaries side by side in
// one run (their servers alternate request by request, so both see the same
// machine load).
//
//   node tools/stream_latency.mjs [--model FILE] [--requests N] [--max-tokens N] [--threads N] \
//        LABEL=BINARY [LABEL=BINARY...]
//
// Each request: POST /v1/completions, stream, temperature 0, ignore_eos.
// TTFT: from writing the request to the first SSE event with text;
// inter-token latency: between consecutive events with text (one token each
// unless the client fell behind); tokens/s per stream: events with text over
// first to last (limited by how fast the client parses events). Then the
// same number of non-streamed requests of 512 tokens: their end-to-end time.
// Prints Markdown tables.
import { spawn } from "node:child_process";
import http from "node:http";

const args = process.argv.slice(2);
const opt = { model: "models/kvserve-tiny.gguf", requests: 30, maxTokens: 64, threads: 1 };
const bins = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--model") opt.model = args[++i];
  else if (a === "--requests") opt.requests = Number(args[++i]);
  else if (a === "--max-tokens") opt.maxTokens = Number(args[++i]);
  else if (a === "--threads") opt.threads = Number(args[++i]);
  else if (a.includes("=")) bins.push({ label: a.slice(0, a.indexOf("=")), bin: a.slice(a.indexOf("=") + 1) });
  else throw new Error(`unknown argument ${a}`);
}
if (!bins.length) throw new Error("give at least one LABEL=BINARY");

function start(bin) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ["serve", "--model", opt.model, "--port", "0", "--threads", String(opt.threads),
      "--access-log", "off", "--log-level", "info"], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => {
      err += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(err);
      const ready = /ready in/.test(err);
      if (m && ready) resolve({ child, port: Number(m[1]) });
    });
    child.on("exit", (code) => reject(new Error(`${bin} exited ${code}:\n${err}`)));
  });
}

function stream(port, model) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model, prompt: "Once upon a time", max_tokens: opt.maxTokens, temperature: 0,
      ignore_eos: true, stream: true });
    const times = [];
    let buf = "";
    const t0 = process.hrtime.bigint();
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/v1/completions", agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      res.setEncoding("utf8");
      res.on("data", (d) => {
        const now = process.hrtime.bigint();
        buf += d;
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const ev = buf.slice(0, i);
          buf = buf.slice(i + 2);
          if (!ev.startsWith("data: {")) continue;
          const c = JSON.parse(ev.slice(6));
          if (c.choices?.[0]?.text) times.push(Number(now - t0) / 1e6);
        }
      });
      res.on("end", () => resolve(times));
    });
    req.on("error", reject);
    req.end(body);
  });
}

// The served model id is the file name; ask for it once.
async function modelId(port) {
  return new Promise((resolve, reject) => {
    http.get({ host: "127.0.0.1", port, path: "/v1/models" }, (res) => {
      let t = "";
      res.on("data", (d) => (t += d));
      res.on("end", () => resolve(JSON.parse(t).data[0].id));
    }).on("error", reject);
  });
}

const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
};

const servers = [];
for (const b of bins) servers.push({ ...b, ...(await start(b.bin)), ttft: [], itl: [], rate: [] });
for (const s of servers) s.id = await modelId(s.port);
// Warm-up, then alternate.
for (const s of servers) for (let i = 0; i < 3; i++) await stream(s.port, s.id);
for (let r = 0; r < opt.requests; r++) {
  for (const s of servers) {
    const t = await stream(s.port, s.id);
    if (!t.length) continue;
    s.ttft.push(t[0]);
    for (let i = 1; i < t.length; i++) s.itl.push(t[i] - t[i - 1]);
    if (t.length > 1) s.rate.push(((t.length - 1) * 1000) / (t[t.length - 1] - t[0]));
  }
}
console.log(`model ${opt.model}, ${opt.requests} streams of ${opt.maxTokens} tokens each, one at a time, --threads ${opt.threads}`);
console.log("| build | TTFT p50 ms | TTFT p90 ms | ITL p50 ms | ITL p90 ms | ITL p99 ms | ITL mean ms | tokens/s per stream p50 |");
console.log("|---|---|---|---|---|---|---|---|");
for (const s of servers) {
  const mean = s.itl.reduce((a, b) => a + b, 0) / s.itl.length;
  const f = (x) => x.toFixed(3);
  console.log(`| ${s.label} | ${f(q(s.ttft, 0.5))} | ${f(q(s.ttft, 0.9))} | ${f(q(s.itl, 0.5))} | ${f(q(s.itl, 0.9))} | ` +
    `${f(q(s.itl, 0.99))} | ${f(mean)} | ${q(s.rate, 0.5).toFixed(0)} |`);
}
function whole(port, model) {
  return new Promise((resolve, reject) => {
    const body = JSON.stringify({ model, prompt: "Once upon a time", max_tokens: 512, temperature: 0, ignore_eos: true });
    const t0 = process.hrtime.bigint();
    const req = http.request({ host: "127.0.0.1", port, method: "POST", path: "/v1/completions", agent: false,
      headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on("end", () => resolve(Number(process.hrtime.bigint() - t0) / 1e6));
    });
    req.on("error", reject);
    req.end(body);
  });
}
for (const s of servers) s.e2e = [];
for (let r = 0; r < opt.requests; r++) for (const s of servers) s.e2e.push(await whole(s.port, s.id));
console.log("");
console.log("| build | non-streamed 512-token request p50 ms | p90 ms | tokens/s p50 |");
console.log("|---|---|---|---|");
for (const s of servers) {
  console.log(`| ${s.label} | ${q(s.e2e, 0.5).toFixed(1)} | ${q(s.e2e, 0.9).toFixed(1)} | ${(512000 / q(s.e2e, 0.5)).toFixed(0)} |`);
}
for (const s of servers) s.child.kill("SIGTERM");
