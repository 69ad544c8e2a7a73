// Latency of /health and /metrics while huge prompts are being prepared
// (parsed, tokenized, length-checked): issue 10 item 2's measurement. For
// each LABEL=BINARY, starts `kvserve serve` on the model, sends N concurrent
// completions with a prompt of SIZE MB (refused as too long once
// tokenized), and meanwhile polls /health and /metrics one after another;
// prints their latency percentiles while the prompts are in flight.
//
//   node tools/prep_latency.mjs [--model FILE] [--prompts 4] [--mb 27] LABEL=BINARY...
import { spawn } from "node:child_process";
import http from "node:http";

const args = process.argv.slice(2);
const opt = { model: "models/kvserve-tiny.gguf", prompts: 4, mb: 27 };
const bins = [];
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--model") opt.model = args[++i];
  else if (a === "--prompts") opt.prompts = Number(args[++i]);
  else if (a === "--mb") opt.mb = Number(args[++i]);
  else if (a.includes("=")) bins.push({ label: a.slice(0, a.indexOf("=")), bin: a.slice(a.indexOf("=") + 1) });
  else throw new Error(`unknown argument ${a}`);
}

function start(bin) {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, ["serve", "--model", opt.model, "--port", "0", "--threads", "1", "--access-log", "off",
      "--max-body-bytes", String((opt.mb + 2) << 20)], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => {
      err += d;
      const m = /listening on http:\/\/[^:]+:(\d+)/.exec(err);
      if (m && /ready in/.test(err)) resolve({ child, port: Number(m[1]) });
    });
    child.on("exit", (code) => reject(new Error(`${bin} exited ${code}:\n${err}`)));
  });
}

function req(port, method, path, body) {
  return new Promise((resolve, reject) => {
    const t0 = process.hrtime.bigint();
    const r = http.request({ host: "127.0.0.1", port, method, path, agent: false,
      headers: body ? { "content-type": "application/json", "content-length": Buffer.byteLength(body) } : {} }, (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode, ms: Number(process.hrtime.bigint() - t0) / 1e6 }));
    });
    r.on("error", reject);
    r.end(body);
  });
}

const q = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p * (s.length - 1) + 0.5))];
};

console.log(`${opt.prompts} concurrent completions with ${opt.mb} MB prompts, model ${opt.model}`);
console.log("| build | probes | /health p50 ms | /health p99 ms | /health max ms | /metrics p50 ms | /metrics p99 ms | /metrics max ms | prompts done in s |");
console.log("|---|---|---|---|---|---|---|---|---|");
for (const b of bins) {
  const { child, port } = await start(b.bin);
  const id = await new Promise((resolve) => http.get({ host: "127.0.0.1", port, path: "/v1/models" }, (res) => {
    let t = "";
    res.on("data", (d) => (t += d));
    res.on("end", () => resolve(JSON.parse(t).data[0].id));
  }));
  const words = "Once upon a time there was a little girl. ";
  const prompt = words.repeat(Math.ceil((opt.mb << 20) / words.length)).slice(0, opt.mb << 20);
  const body = JSON.stringify({ model: id, prompt, max_tokens: 1 });
  let inflight = opt.prompts;
  const t0 = Date.now();
  const big = Array.from({ length: opt.prompts }, () => req(port, "POST", "/v1/completions", body).finally(() => inflight--));
  const health = [], metrics = [];
  await new Promise((r) => setTimeout(r, 200));  // the bodies are on their way
  while (inflight > 0) {
    health.push((await req(port, "GET", "/health")).ms);
    metrics.push((await req(port, "GET", "/metrics")).ms);
  }
  await Promise.all(big);
  const secs = (Date.now() - t0) / 1000;
  const f = (x) => (x === undefined ? "-" : x.toFixed(1));
  console.log(`| ${b.label} | ${health.length} | ${f(q(health, 0.5))} | ${f(q(health, 0.99))} | ${f(Math.max(...health))} | ` +
    `${f(q(metrics, 0.5))} | ${f(q(metrics, 0.99))} | ${f(Math.max(...metrics))} | ${secs.toFixed(1)} |`);
  child.kill("SIGTERM");
  await new Promise((r) => child.on("exit", r));
}
