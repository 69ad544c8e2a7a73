// Helpers for the operations tests: a real Prometheus (Debian's
// `prometheus`) started on a loopback port in a temporary directory, its
// HTTP API, free ports, and the test copy of the alert rules.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";

export const prometheusBin = process.env.KVSERVE_PROMETHEUS || "/usr/bin/prometheus";

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// The real rules with every `for:` shortened to `forSeconds` and rule
// groups evaluated every second, so a test sees pending -> firing in
// seconds. Only durations change: the expressions are the deployed ones.
export function testRules(sourceDir, forSeconds) {
  const real = readFileSync(path.join(sourceDir, "deploy/prometheus/alerts.yaml"), "utf8");
  const copy = real.replace(/\bfor: \d+[smh]\b/g, `for: ${forSeconds}s`).replace(/\binterval: \d+s\b/g, "interval: 1s");
  if (copy === real || !/for: \d+s/.test(copy)) throw new Error("alerts.yaml: no `for:` durations to shorten");
  return copy;
}

// Starts Prometheus scraping `targets` ([{job, target, labels}]) every
// second with `rules` (YAML text). Resolves {port, url, stop(), log()}.
export async function startPrometheus(dir, targets, rules) {
  mkdirSync(path.join(dir, "data"), { recursive: true });
  writeFileSync(path.join(dir, "rules.yaml"), rules);
  const jobs = new Map();
  for (const t of targets) {
    if (!jobs.has(t.job)) jobs.set(t.job, []);
    jobs.get(t.job).push(t);
  }
  let cfg = "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files:\n  - rules.yaml\nscrape_configs:\n";
  for (const [job, ts] of jobs) {
    cfg += `  - job_name: ${job}\n    static_configs:\n`;
    for (const t of ts) {
      cfg += `      - targets: ["${t.target}"]\n`;
      if (t.labels) cfg += `        labels: ${JSON.stringify(t.labels)}\n`;
    }
  }
  writeFileSync(path.join(dir, "prometheus.yml"), cfg);
  const port = await freePort();
  const child = spawn(prometheusBin, [
    `--config.file=${path.join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${path.join(dir, "data")}`,
    `--web.listen-address=127.0.0.1:${port}`, "--log.level=warn", "--storage.tsdb.retention.time=1h",
  ], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  child.stdout.on("data", (d) => (log += d));
  child.stderr.on("data", (d) => (log += d));
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const prom = {
    port,
    url: `http://127.0.0.1:${port}`,
    log: () => log,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      return exited;
    },
  };
  const end = Date.now() + 30000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`prometheus exited:\n${log}`);
    try {
      if ((await fetch(`${prom.url}/-/ready`)).status === 200) break;
    } catch {}
    if (Date.now() > end) throw new Error(`prometheus not ready:\n${log}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return prom;
}

// GET /api/v1/<what>: resolves `data`, throws on an API error (with the
// query in the message).
export async function api(prom, what, params = {}) {
  const qs = new URLSearchParams(params).toString();
  const res = await fetch(`${prom.url}/api/v1/${what}${qs ? "?" + qs : ""}`);
  const body = await res.json();
  if (body.status !== "success") throw new Error(`${what} ${JSON.stringify(params)}: ${body.errorType}: ${body.error}`);
  return body.data;
}

export const query = (prom, q) => api(prom, "query", { query: q });

export function havePrometheus() {
  return existsSync(prometheusBin);
}
