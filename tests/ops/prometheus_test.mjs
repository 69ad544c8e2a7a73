// A real Prometheus (Debian's) scrapes a real `kvserve serve` (the bundled
// model) whose KV pool is deliberately small: kv_cache.memory_limit_bytes
// is set from `kvserve plan --json` so that, after weights, activations and
// overhead, the pool holds 160 blocks (2,560 tokens) while 8 admitted
// sequences each grow to 1,000 tokens. The deployed alert rules run with
// shortened durations (prom_util.mjs testRules). The load keeps the pool
// full (running sequences outgrow it and are preempted);
// through Prometheus' HTTP API the test asserts that
//   * the series of every documented indicator arrive, labelled by job/pool;
//   * KvserveKvWatermarkHigh and KvserveKvWatermarkCritical go pending,
//     then firing (and the server's peak gauge saw > 90 %);
//   * a `kvserve gateway` in front of the server (scraped as job
//     kvserve-gateway) exports its series, process collector included;
//   * every query of the Grafana dashboard (deploy/grafana/kvserve.json),
//     its template variables and its annotation evaluate without error and
//     return series, the gateway panels included;
//   * the recording rules produce series, and prometheus-adapter's queries
//     (the HPA's metrics) return the replica's queue and watermark.
// Skips (77) under sanitizers and without prometheus or the binary.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";

import { startGateway } from "../gateway/common.mjs";
import { binary, metrics, request, requireBinary, skipFile, sourceDir, startServer } from "../server/common.mjs";
import { havePrometheus, prometheusBin, query, api, startPrometheus, testRules } from "./prom_util.mjs";

if (process.env.KVSERVE_SANITIZED) skipFile("a real Prometheus against a sanitized server measures nothing more (ops label)");
requireBinary();
if (!havePrometheus()) skipFile(`${prometheusBin} is missing (scripts/setup.sh installs Debian's prometheus)`);

const CONTEXT = 1024;
const SEQS = 8;
const POOL_BLOCKS = 160;
const dir = mkdtempSync(path.join(tmpdir(), "kvserve-prom-"));
let server;
let gateway;
let prom;

// The memory limit whose pool is POOL_BLOCKS blocks, from the planner.
function memoryLimitFor(blocks) {
  const r = spawnSync(binary, ["plan", "--model", path.join(sourceDir, "models/kvserve-tiny.gguf"), "--context",
    String(CONTEXT), "--concurrency", String(SEQS), "--max-batch-size", String(SEQS), "--threads", "1", "--device",
    "cpu:4GiB", "--json"], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  const p = JSON.parse(r.stdout);
  return p.weights_bytes + p.activation_bytes + p.overhead_bytes + blocks * p.kv_bytes_per_block + 1024;
}

before(async () => {
  server = await startServer({
    fake: false,
    args: ["--max-context-length", String(CONTEXT), "--max-concurrent-requests", String(SEQS), "--max-batch-size",
      String(SEQS), "--threads", "1", "--prefix-caching", "false", "--kv_cache.memory_fraction", "1",
      "--kv_cache.memory_limit_bytes", String(memoryLimitFor(POOL_BLOCKS))],
  });
  assert.equal((await metrics(server)).get("kvserve:kv_cache_blocks"), POOL_BLOCKS, "the pool the test sized");
  gateway = await startGateway({
    pools: [{ name: "test", max_context: CONTEXT, replicas: [server.baseURL] }],
    gateway: { allow_anonymous: true }, model: path.join(sourceDir, "models/kvserve-tiny.gguf"), dir,
  });
  prom = await startPrometheus(dir, [{ job: "kvserve", target: `127.0.0.1:${server.port}`, labels: { pool: "test" } },
    { job: "kvserve-gateway", target: `127.0.0.1:${gateway.adminPort}` }], testRules(sourceDir, 2));
});

after(async () => {
  if (prom) await prom.stop();
  if (gateway) assert.equal((await gateway.stop()).code, 0);
  if (server) assert.equal((await server.stop()).code, 0);
  rmSync(dir, { recursive: true, force: true });
});

// Distinct prompts of 96 tokens (ids of the model's vocabulary) that
// generate 900 tokens each: 8 of them want 504 blocks of the pool's 160.
function prompt(i) {
  return Array.from({ length: 96 }, (_, j) => 3 + ((i * 7919 + j * 104729 + (i * j) % 13) % 1270));
}

async function alertStates() {
  const data = await api(prom, "alerts");
  const out = {};
  for (const a of data.alerts) out[a.labels.alertname] = a.state;
  return out;
}

test("series arrive, the KV watermark alerts go pending then firing, dashboard queries evaluate", async () => {
  const t0 = Date.now();
  // Load: SEQS closed-loop clients until both watermark alerts fire (at
  // most 75 s), plus a few failing requests so the error series move.
  const seen = { KvserveKvWatermarkHigh: new Set(), KvserveKvWatermarkCritical: new Set() };
  let stop = false;
  let sent = 0;
  const client = async (c) => {
    for (let k = 0; !stop; k++) {
      const r = await request(server, "POST", "/v1/completions",
        { model: "kvserve-tiny", prompt: prompt(c * 1000 + k), max_tokens: 900, temperature: 0, ignore_eos: true });
      assert.ok(r.status === 200 || r.status === 429, r.text);
      sent++;
    }
  };
  // A few requests through the gateway first (the load would fill the
  // server: the gateway's would then get 429).
  for (let i = 0; i < 3; i++) {
    const r = await request(gateway, "POST", "/v1/completions",
      { model: "kvserve-tiny", prompt: `Once upon a time ${i}`, max_tokens: 8, temperature: 0 });
    assert.equal(r.status, 200, r.text);
  }
  assert.equal((await request(gateway, "POST", "/v1/completions", { model: "nope", prompt: "x" })).status, 404);
  const clients = Array.from({ length: SEQS }, (_, c) => client(c));
  for (let i = 0; i < 3; i++) await request(server, "POST", "/v1/completions", { model: "nope", prompt: "x" });
  const deadline = Date.now() + 75000;
  while (Date.now() < deadline) {
    const states = await alertStates();
    for (const name of Object.keys(seen)) if (states[name]) seen[name].add(states[name]);
    if (seen.KvserveKvWatermarkHigh.has("firing") && seen.KvserveKvWatermarkCritical.has("firing")) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  stop = true;
  await Promise.all(clients);
  const m = await metrics(server);
  console.log(`load: ${sent} requests in ${((Date.now() - t0) / 1000).toFixed(1)} s; peak KV ${m.get("kvserve:kv_cache_usage_peak_ratio")}; ` +
    `alert states seen: ${JSON.stringify(Object.fromEntries(Object.entries(seen).map(([k, v]) => [k, [...v]])))}`);
  assert.ok(m.get("kvserve:kv_cache_usage_peak_ratio") > 0.9, "the load filled the pool past 90 %");
  assert.ok(m.get("kvserve:num_preemptions_total") > 0, "sequences outgrew the pool and were preempted");
  for (const [name, states] of Object.entries(seen)) {
    assert.ok(states.has("pending"), `${name} was never pending`);
    assert.ok(states.has("firing"), `${name} never fired`);
  }
  // Wait for one more scrape so the last requests are in Prometheus.
  await new Promise((r) => setTimeout(r, 1500));

  // Every indicator's series, from the scrape job, with the pool label.
  const names = [
    "kvserve:kv_cache_usage_ratio", "kvserve:kv_cache_usage_peak_ratio", "kvserve:num_requests_waiting",
    "kvserve:num_requests_running", "kvserve:engine_forward_seconds_total", "process_cpu_seconds_total",
    "kvserve:time_to_first_token_seconds_bucket", "kvserve:time_to_first_token_by_prompt_length_seconds_bucket",
    "kvserve:time_per_output_token_seconds_bucket", "kvserve:request_prompt_tokens_bucket",
    "kvserve:prefix_cache_hit_ratio", "kvserve:request_errors_total", "kvserve:generation_tokens_total",
    "kvserve:memory_bytes", "kvserve:ready", "kvserve:build_info", "kvserve:model_info",
  ];
  for (const n of names) {
    const r = await query(prom, `${n}{job="kvserve",pool="test"}`);
    assert.ok(r.result.length > 0, `no series for ${n}`);
  }
  const tokens = await query(prom, 'kvserve:generation_tokens_total{job="kvserve"}');
  assert.equal(Number(tokens.result[0].value[1]), m.get("kvserve:generation_tokens_total"), "Prometheus holds the server's count");
  for (const n of ["kvserve_gateway:requests_total", "kvserve_gateway:replica_healthy", "kvserve_gateway:ready",
    "kvserve_gateway:build_info", "kvserve_gateway:replica_ejections_total", "process_cpu_seconds_total"]) {
    const r = await query(prom, `${n}{job="kvserve-gateway"}`);
    assert.ok(r.result.length > 0, `no series for ${n} from the gateway`);
  }
  const through = await query(prom, 'sum by (status) (kvserve_gateway:requests_total{job="kvserve-gateway"})');
  const byStatus = Object.fromEntries(through.result.map((x) => [x.metric.status, Number(x.value[1])]));
  assert.equal(byStatus["200"], 3, JSON.stringify(byStatus));
  assert.equal(byStatus["404"], 1, JSON.stringify(byStatus));
  const invalid = await query(prom, 'kvserve:request_errors_total{class="invalid_request"}');
  assert.ok(Number(invalid.result[0].value[1]) >= 3, "the failing requests are counted by class");

  // Recording rules.
  for (const rec of ["kvserve:compute_utilization:rate2m", "kvserve:request_error_ratio:rate5m",
    "kvserve:time_to_first_token_seconds:p95_5m", "kvserve:preemptions_per_minute:rate5m"]) {
    const r = await query(prom, rec);
    assert.ok(r.result.length > 0, `recording rule ${rec} produced no series`);
  }
  const util = Number((await query(prom, "kvserve:compute_utilization:rate2m")).result[0].value[1]);
  assert.ok(util > 0 && util <= 1.05, `compute utilisation ${util} in (0, 1]`);

  // The dashboard.
  const dash = JSON.parse(readFileSync(path.join(sourceDir, "deploy/grafana/kvserve.json"), "utf8"));
  const subst = (q) => q.replaceAll("$__rate_interval", "15s").replaceAll("$pool", ".*").replaceAll("$instance", ".*");
  let checked = 0;
  for (const p of dash.panels) {
    if (p.type === "row") continue;
    assert.ok(p.targets?.length, `panel "${p.title}" has no query`);
    for (const t of p.targets) {
      const r = await query(prom, subst(t.expr));  // throws on a query error
      checked++;
      assert.ok(r.result.length > 0, `panel "${p.title}": ${t.expr} returned no series`);
    }
  }
  for (const v of dash.templating.list.filter((v) => v.type === "query")) {
    const m2 = /^label_values\((.+), (\w+)\)$/.exec(v.definition);
    assert.ok(m2, `variable ${v.name}: ${v.definition}`);
    const values = await api(prom, `label/${m2[2]}/values`, { "match[]": subst(m2[1]) });
    assert.ok(values.length > 0, `variable ${v.name} has no values`);
  }
  const pools = await api(prom, "label/pool/values", { "match[]": "kvserve:ready" });
  assert.deepEqual(pools, ["test"]);
  for (const a of dash.annotations.list) {
    const r = await query(prom, a.expr);
    assert.ok(r.result.length > 0, `annotation ${a.name}: the firing alerts`);
  }
  // prometheus-adapter's queries (deploy/kubernetes/prometheus-adapter.yaml),
  // templates filled as the adapter does for one pod.
  const yamlPath = path.join(sourceDir, "tests/oracles/node_modules/js-yaml/index.js");
  if (existsSync(yamlPath)) {
    const yaml = (await import(yamlPath)).default;
    const cm = yaml.loadAll(readFileSync(path.join(sourceDir, "deploy/kubernetes/prometheus-adapter.yaml"), "utf8"))
      .find((d) => d?.kind === "ConfigMap" && d.metadata.name === "prometheus-adapter");
    for (const rule of yaml.load(cm.data["config.yaml"]).rules) {
      const series = /^(\S+?)\{/.exec(rule.seriesQuery)[1];
      const q = rule.metricsQuery.replaceAll("<<.Series>>", series).replaceAll("<<.LabelMatchers>>", 'job="kvserve"')
        .replaceAll("<<.GroupBy>>", "instance");
      const r = await query(prom, q);
      assert.equal(r.result.length, 1, `adapter metric ${rule.name.as}: ${q}`);
      if (rule.name.as === "kvserve_kv_usage_ratio") assert.ok(Number(r.result[0].value[1]) > 0.85, "the HPA would see the full pool");
    }
  } else {
    console.log("js-yaml absent: the prometheus-adapter queries were not evaluated");
  }
  console.log(`dashboard: ${checked} queries evaluated, each with series (gateway panels included); ` +
    `total ${((Date.now() - t0) / 1000).toFixed(1)} s`);
});
