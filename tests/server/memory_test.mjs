// The start-up plan holds in practice: `kvserve serve` on the bundled model
// runs the largest workload its plan admits (every sequence slot at full
// context, all KV blocks in use at once) and the process's peak resident
// memory (VmHWM) stays within the plan's total (the memory accounts on
// /metrics) + 5 %. The workload must also not grow memory beyond what was
// resident before it by more than 5 % of the plan: the KV pool and the
// activation buffers are allocated at start, not per request.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";

import { metric, metrics, request, requireBinary, skipFile, startServer } from "./common.mjs";

requireBinary();
// Sanitizer runtimes add shadow memory and a free-list quarantine: resident
// memory then measures the tool, not kvserve. The Release run measures it.
if (process.env.KVSERVE_SANITIZED) skipFile("resident memory is not meaningful under ASan/TSan");

const CONTEXT = 1024;
const SEQS = 16;
// Output tokens per request: long enough that all SEQS sequences are alive
// at once even when their requests reach the server tens of ms apart.
const GEN = 128;

function peakRss(pid) {
  const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return Number(m[1]) * 1024;
}

let server;
before(async () => {
  server = await startServer({
    fake: false,
    args: ["--max-context-length", String(CONTEXT), "--max-concurrent-requests", String(SEQS), "--max-batch-size",
      String(SEQS), "--threads", "2", "--prefix-caching", "false"],
  });
});
after(async () => {
  if (server) assert.equal((await server.stop()).code, 0);
});

test("peak resident memory stays within the plan's total + 5 % under the largest admitted workload", async () => {
  const m0 = await metrics(server);
  const account = (a) => metric(m0, `kvserve:memory_bytes{account="${a}"}`);
  const weights = account("weights");
  const kvPool = account("kv_pool");
  const activations = account("activations");
  const overhead = account("overhead");
  const total = weights + kvPool + activations + overhead;
  const blocks = metric(m0, "kvserve:kv_cache_blocks");
  const blockSize = metric(m0, "kvserve:kv_cache_block_size_tokens");
  assert.ok(weights > 0 && kvPool > 0 && activations > 0 && overhead > 0);
  assert.equal(blocks, (SEQS * CONTEXT) / blockSize, "the pool holds exactly SEQS full-context sequences");
  const idle = peakRss(server.child.pid);

  // SEQS requests of CONTEXT tokens each (distinct random prompts, EOS
  // ignored), all at once: every block of the pool is needed.
  const prompts = Array.from({ length: SEQS }, (_, i) =>
    Array.from({ length: CONTEXT - GEN }, (_, j) => 3 + ((i * 7919 + j * 104729) % 1270)));
  const results = await Promise.all(prompts.map((p) =>
    request(server, "POST", "/v1/completions", { model: "kvserve-tiny", prompt: p, max_tokens: GEN, temperature: 0, ignore_eos: true })));
  // The engine samples its block count inside every step; a poll of
  // kv_cache_blocks_used from here can fall between two steps and miss the
  // peak (it read 898 of 1024 on a busy CI machine).
  const maxUsed = metric(await metrics(server), "kvserve:kv_cache_blocks_used_peak");
  for (const r of results) {
    assert.equal(r.status, 200, r.text);
    assert.equal(r.json.usage.total_tokens, CONTEXT);
  }
  const peak = peakRss(server.child.pid);
  console.log(`plan: weights ${weights}, kv_pool ${kvPool}, activations ${activations}, overhead ${overhead}, ` +
    `total ${total} bytes; peak RSS idle ${idle}, after the workload ${peak} (${(100 * peak / total).toFixed(1)} % ` +
    `of the plan); KV blocks used at most ${maxUsed} of ${blocks}`);
  assert.ok(maxUsed >= 0.9 * blocks, `the workload filled the KV pool (${maxUsed} of ${blocks} blocks)`);
  assert.ok(peak <= 1.05 * total, `peak RSS ${peak} within the plan's total ${total} + 5 %`);
  assert.ok(peak - idle <= 0.05 * total, `the workload grew RSS by ${peak - idle} bytes, over 5 % of the plan`);
});
