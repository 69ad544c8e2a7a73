// Routing policies side by side (issue 13): three `kvserve serve` replicas
// of one model behind `kvserve gateway`, one run per policy (round_robin,
// least_load, cache_aware) on fresh replicas (cold caches), the same seeded
// workload each time:
//   * multi-tenant: T tenants, each with its own system prompt of ~P tokens,
//     multi-turn conversations whose history grows (each turn appends the
//     model's answer and a new question), Poisson arrivals;
//   * hot prefix: 90 % of requests share one system prompt.
//   * canary: a 5 % canary (one of the three replicas labelled v2, every
//     attempt on it failing with probability --canary-faults, default 0.3,
//     injected by the gateway) under the hot-prefix workload; reports when
//     the gateway rolled it back by itself, how many canary attempts it
//     took, and what the clients saw (failed attempts are retried on v1).
// Per policy: prefix-cache hit rate (sum of the replicas' cached_tokens /
// prompt tokens), TTFT p50/p90/p99 (client side, streaming), completion
// tokens/s, requests and prompt tokens per replica, and the highest KV use
// and queue any replica reported (scraped every 100 ms).
//
// Usage: node tools/route_bench.mjs [--quick] [--model GGUF] [--rate R] [--kv-tokens N] [--requests N]
//                                   [--hot-requests N] [--json OUT]
//   --quick: 8 tenants x ~1K-token prompts, 48 + 36 requests (minutes on 2 cores);
//   default: 20 tenants x ~2K tokens, 200 + 120 requests.
//   --requests: multi-tenant requests. Each tenant's first request is cold
//     under every policy (its prompt is cached nowhere yet): with 20 tenants
//     they are 10 % of 200 requests and set the p90 alone; a longer run
//     (400: 5 %) shows the steady state of a service that has been up.
//   --canary-requests N (default 800; 0 skips the canary run), --canary-faults F.
// The rate defaults to ~80 % of what three replicas serve, measured first
// (cold-cache service time of one request x 3 replicas).
// scripts/route_bench.sh wraps it (builds nothing; needs build/release).
import { writeFileSync } from "node:fs";
import path from "node:path";

import { metrics, request, sourceDir } from "../tests/server/common.mjs";
import { metricSum, startGateway, startReplica, tempDir } from "../tests/gateway/common.mjs";

const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const quick = args.includes("--quick");
const modelPath = opt("--model", path.join(sourceDir, "models/kvserve-tiny.gguf"));
const TENANTS = quick ? 8 : 20;
const PROMPT_WORDS = quick ? 700 : 1400;  // ~1.4 tokens a word with the bundled tokenizer
const MT_REQUESTS = Number(opt("--requests", quick ? 48 : 200));
const HOT_REQUESTS = Number(opt("--hot-requests", quick ? 36 : 120));
const CANARY_REQUESTS = Number(opt("--canary-requests", quick ? 400 : 800));
const CANARY_FAULTS = Number(opt("--canary-faults", 0.3));
const MAX_TOKENS = 16;
const MODEL = path.basename(modelPath).replace(/\.gguf$/, "");
const POLICIES = ["round_robin", "least_load", "cache_aware"];
// KV pool of each replica, in tokens: smaller than all tenants' prompts
// together (as in long-context serving, where KV, not weights, fills
// memory), larger than what a third of them need.
const KV_TOKENS = Number(opt("--kv-tokens", quick ? 6144 : 16384));
let memoryLimit = 0;  // --memory-limit giving KV_TOKENS (measured: sizeKv)

// Seeded RNG (mulberry32): the same workload for every policy.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const WORDS = ("the a little girl boy dog cat park ball tree house sun rain friend mom dad happy sad big small red blue " +
  "green played ran jumped saw found lost helped asked said went came day night garden river bird flower toy box " +
  "car school book cake apple milk bed door window").split(" ");
function systemPrompt(tenant) {
  const r = rng(1000 + tenant);
  const w = [`You are the assistant of company number ${tenant}. Follow its handbook:`];
  for (let i = 0; i < PROMPT_WORDS; ++i) w.push(WORDS[Math.floor(r() * WORDS.length)]);
  return w.join(" ") + ".";
}

// The request sequence: [{at (s), tenant, conversation}], Poisson at `rate`.
function schedule(n, rate, pickTenant, seed) {
  const r = rng(seed);
  let t = 0;
  const out = [];
  for (let i = 0; i < n; ++i) {
    t += -Math.log(1 - r()) / rate;
    const tenant = pickTenant(r);
    out.push({ at: t, tenant, conversation: `${tenant}-${Math.floor(r() * 2)}` });
  }
  return out;
}

function percentile(xs, p) {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

// One streamed chat request; resolves {ttft, cached, prompt, completion, text, id}.
async function streamChat(gw, messages, session = "") {
  const t0 = performance.now();
  const res = await fetch(`${gw.baseURL}/v1/chat/completions`, {
    method: "POST",
    // The session is the canary's sticky key (the pool's sticky_header).
    headers: { "content-type": "application/json", ...(session ? { "x-session-id": session } : {}) },
    body: JSON.stringify({ model: MODEL, messages, max_tokens: MAX_TOKENS, temperature: 0, stream: true,
      stream_options: { include_usage: true } }),
  });
  if (res.status !== 200) return { error: res.status, body: await res.text() };
  const id = res.headers.get("x-request-id");
  let ttft = null, text = "", usage = null, buf = "";
  const dec = new TextDecoder();
  for await (const chunk of res.body) {
    buf += dec.decode(chunk, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = ev.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("");
      if (!data || data === "[DONE]") continue;
      const j = JSON.parse(data);
      const c = j.choices?.[0]?.delta?.content;
      if (c && ttft === null) ttft = (performance.now() - t0) / 1000;
      if (c) text += c;
      if (j.usage) usage = j.usage;
    }
  }
  if (ttft === null) ttft = (performance.now() - t0) / 1000;
  return { id, ttft, text, prompt: usage?.prompt_tokens ?? 0, completion: usage?.completion_tokens ?? 0,
    cached: usage?.prompt_tokens_details?.cached_tokens ?? 0 };
}

async function runWorkload(gw, replicas, plan, hot) {
  const convs = new Map();  // conversation -> messages so far
  const results = [];
  let maxKv = 0, maxQueue = 0, sampling = true;
  const sampler = (async () => {
    while (sampling) {
      for (const r of replicas) {
        try {
          const m = await metrics(r);
          maxKv = Math.max(maxKv, m.get("kvserve:kv_cache_usage_ratio") ?? 0);
          maxQueue = Math.max(maxQueue, m.get("kvserve:num_requests_waiting") ?? 0);
        } catch { /* replica busy: next sample */ }
      }
      await new Promise((res) => setTimeout(res, 100));
    }
  })();
  const t0 = performance.now();
  await Promise.all(plan.map(async (p) => {
    const wait = p.at * 1000 - (performance.now() - t0);
    if (wait > 0) await new Promise((res) => setTimeout(res, wait));
    const tenant = hot ? (p.tenant === 0 ? 0 : p.tenant) : p.tenant;
    const key = hot ? `hot-${results.length}-${Math.random()}` : p.conversation;
    const history = convs.get(key) ?? [{ role: "system", content: systemPrompt(tenant) }];
    const messages = [...history, { role: "user", content: `Question ${results.length + 1}: tell me about the ${WORDS[(results.length * 7) % WORDS.length]}.` }];
    results.push(null);
    const r = await streamChat(gw, messages, key);
    if (!r.error && !hot) convs.set(key, [...messages, { role: "assistant", content: r.text }]);
    results[results.indexOf(null)] = r;
  }));
  const wall = (performance.now() - t0) / 1000;
  sampling = false;
  await sampler;
  const audit = new Map(gw.audit().map((l) => [l.id, l]));
  const ok = results.filter((r) => r && !r.error);
  const perReplica = {};
  for (const r of ok) {
    const rep = audit.get(r.id)?.replica ?? "?";
    perReplica[rep] ??= { requests: 0, prompt_tokens: 0 };
    perReplica[rep].requests += 1;
    perReplica[rep].prompt_tokens += r.prompt;
  }
  const ttfts = ok.map((r) => r.ttft);
  const prompt = ok.reduce((s, r) => s + r.prompt, 0);
  const cached = ok.reduce((s, r) => s + r.cached, 0);
  const completion = ok.reduce((s, r) => s + r.completion, 0);
  return {
    requests: results.length, errors: results.length - ok.length,
    hit_rate: prompt ? cached / prompt : 0,
    ttft_p50: percentile(ttfts, 50), ttft_p90: percentile(ttfts, 90), ttft_p99: percentile(ttfts, 99),
    completion_tokens_per_s: completion / wall, wall_s: wall,
    replicas: Object.values(perReplica).map((x) => x.requests).sort((a, b) => b - a),
    replica_prompt_tokens: Object.values(perReplica).map((x) => x.prompt_tokens).sort((a, b) => b - a),
    max_kv_usage: maxKv, max_queue: maxQueue,
  };
}

// The replicas' --memory-limit for a KV pool of KV_TOKENS: two probes give
// the bytes of a block and the fixed part (weights, activations, overhead).
async function sizeKv() {
  const blocksAt = async (limit) => {
    const r = await startReplica({ model: modelPath, args: ["--max-context-length", "4096", "--memory-fraction", "1",
      "--memory-limit", String(limit)] });
    const m = await metrics(r);
    await r.stop();
    return { blocks: m.get("kvserve:kv_cache_blocks"), block: 16 };
  };
  const a = 600e6, b = 640e6;
  const [pa, pb] = [await blocksAt(a), await blocksAt(b)];
  const perBlock = (b - a) / (pb.blocks - pa.blocks);
  memoryLimit = Math.ceil(a + (KV_TOKENS / pa.block - pa.blocks) * perBlock + perBlock);
  console.error(`KV: ${perBlock.toFixed(0)} bytes a block; --memory-limit ${memoryLimit} for ${KV_TOKENS} tokens`);
}

// Three fresh replicas behind a fresh gateway with one pool. `pool` adds
// pool keys; `replica(i)` adds keys to replica i's entry (version, fault_rate).
async function withStack(policy, fn, { pool = {}, replica = () => ({}) } = {}) {
  const replicas = await Promise.all([0, 1, 2].map(() =>
    startReplica({ model: modelPath, args: ["--max-context-length", "4096", "--memory-fraction", "1",
      "--memory-limit", String(memoryLimit)] })));
  const gw = await startGateway({
    model: modelPath, gateway: { allow_anonymous: true, health_interval_seconds: 0.5 }, dir: tempDir(),
    pools: [{ name: "main", max_context: 4096, routing: policy, ...pool,
      replicas: replicas.map((r, i) => ({ url: r.baseURL, ...replica(i) })) }],
  });
  try {
    return await fn(gw, replicas);
  } finally {
    await gw.stop();
    await Promise.all(replicas.map((r) => r.stop()));
  }
}

// The canary experiment: replica 2 is version v2 with injected faults, 5 %
// of sessions (each hot-prefix request is its own session) go to v2
// until the gateway judges it (canary_min_requests attempts in the window,
// error rate above stable's + the margin) and sets its weight to 0.
async function canaryRun(plan) {
  const pool = { sticky_header: "X-Session-Id", canary_version: "v2", canary_weight: 5, canary_max_error_rate_margin: 0.05,
    canary_window_seconds: 60, canary_min_requests: 20 };
  return withStack("cache_aware", async (gw, replicas) => {
    const v2 = (outcome) => metricSum(gw, "kvserve_gateway:version_attempts_total", { version: "v2", outcome });
    let rolledBackAt = null, atRollback = null, watching = true;
    const t0 = performance.now();
    const watcher = (async () => {
      while (watching && rolledBackAt === null) {
        if ((await metricSum(gw, "kvserve_gateway:canary_rollbacks_total", { pool: "main" })) > 0) {
          rolledBackAt = (performance.now() - t0) / 1000;
          atRollback = { ok: await v2("ok"), error: await v2("error") };
        }
        await new Promise((res) => setTimeout(res, 20));
      }
    })();
    const r = await runWorkload(gw, replicas, plan, true);
    watching = false;
    await watcher;
    const end = { ok: await v2("ok"), error: await v2("error") };
    return { ...pool, fault_rate: CANARY_FAULTS, requests: r.requests, client_errors: r.errors, wall_s: r.wall_s,
      rollback_after_s: rolledBackAt, canary_attempts_before_rollback: atRollback,
      canary_attempts_total: end, ttft_p50: r.ttft_p50, ttft_p90: r.ttft_p90 };
  }, { pool, replica: (i) => (i === 2 ? { version: "v2", fault_rate: CANARY_FAULTS } : { version: "v1" }) });
}

async function main() {
  await sizeKv();
  // Calibration: cold-cache service time of one request on an idle replica.
  let rate = Number(opt("--rate", 0));
  if (!rate) {
    rate = await withStack("least_load", async (gw) => {
      const times = [];
      for (let i = 0; i < 3; ++i) {
        const t0 = performance.now();
        await streamChat(gw, [{ role: "system", content: systemPrompt(900 + i) }, { role: "user", content: "Hello." }]);
        times.push((performance.now() - t0) / 1000);
      }
      const s = times.reduce((a, b) => a + b, 0) / times.length;
      console.error(`calibration: ${s.toFixed(3)} s a cold request; rate = 0.8 x 3 / s`);
      return (0.8 * 3) / s;
    });
  }
  const mt = schedule(MT_REQUESTS, rate, (r) => Math.floor(r() * TENANTS), 7);
  const hot = schedule(HOT_REQUESTS, rate, (r) => (r() < 0.9 ? 0 : 1 + Math.floor(r() * (TENANTS - 1))), 11);
  const out = { rate_per_s: rate, tenants: TENANTS, prompt_words: PROMPT_WORDS, kv_tokens: KV_TOKENS, quick,
    multi_tenant: {}, hot_prefix: {} };
  for (const policy of POLICIES) {
    out.multi_tenant[policy] = await withStack(policy, (gw, reps) => runWorkload(gw, reps, mt, false));
    console.error(policy, "multi-tenant", JSON.stringify(out.multi_tenant[policy]));
    out.hot_prefix[policy] = await withStack(policy, (gw, reps) => runWorkload(gw, reps, hot, true));
    console.error(policy, "hot-prefix", JSON.stringify(out.hot_prefix[policy]));
  }
  if (CANARY_REQUESTS > 0) {
    const plan = schedule(CANARY_REQUESTS, rate, (r) => (r() < 0.9 ? 0 : 1 + Math.floor(r() * (TENANTS - 1))), 13);
    out.canary = await canaryRun(plan);
    console.error("canary", JSON.stringify(out.canary));
  }
  const f = (x, d = 3) => (Number.isFinite(x) ? x.toFixed(d) : "-");
  const table = (name, rows) => {
    console.log(`\n${name}\n| policy | hit rate | TTFT p50 s | p90 s | p99 s | completion tok/s | requests per replica | max KV use | max queue | errors |`);
    console.log("|---|---:|---:|---:|---:|---:|---|---:|---:|---:|");
    for (const [p, r] of Object.entries(rows)) {
      console.log(`| ${p} | ${f(100 * r.hit_rate, 1)} % | ${f(r.ttft_p50)} | ${f(r.ttft_p90)} | ${f(r.ttft_p99)} | ` +
        `${f(r.completion_tokens_per_s, 1)} | ${r.replicas.join(" / ")} | ${f(r.max_kv_usage, 2)} | ${r.max_queue} | ${r.errors} |`);
    }
  };
  console.log(`${MT_REQUESTS} multi-tenant + ${HOT_REQUESTS} hot-prefix requests, rate ${rate.toFixed(2)} requests/s (Poisson), ${TENANTS} tenants, ~${PROMPT_WORDS}-word system prompts, ` +
    `KV pool ${KV_TOKENS} tokens a replica`);
  table("multi-tenant, growing multi-turn", out.multi_tenant);
  table("hot prefix (90 % share one system prompt)", out.hot_prefix);
  if (out.canary) {
    const c = out.canary;
    const before = c.canary_attempts_before_rollback;
    console.log(`\ncanary: weight ${c.canary_weight} %, injected fault rate ${c.fault_rate} on v2, margin ` +
      `${c.canary_max_error_rate_margin}, min ${c.canary_min_requests} attempts; ${c.requests} requests in ${f(c.wall_s, 1)} s`);
    console.log(c.rollback_after_s === null
      ? "| not rolled back during the run |"
      : `| rolled back after ${f(c.rollback_after_s, 2)} s | canary attempts before: ${before.ok} ok, ${before.error} failed | ` +
        `after: ${c.canary_attempts_total.ok + c.canary_attempts_total.error - before.ok - before.error} | ` +
        `client errors: ${c.client_errors} | TTFT p50 / p90 ${f(c.ttft_p50)} / ${f(c.ttft_p90)} s |`);
  }
  const json = opt("--json", "");
  if (json) writeFileSync(json, JSON.stringify(out, null, 2));
}

await main();
