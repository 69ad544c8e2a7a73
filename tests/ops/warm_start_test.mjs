// Prefix-cache warm start (kv_cache.warm_prompts_file): `kvserve serve` on
// the bundled model is started twice, cold and with a warm-prompts file
// holding a long shared prefix (a ~2,000-token "system prompt" as a
// completions prompt and as a chat system message). The first requests
// after start that share the prefix find it cached only when warmed
// (usage.prompt_tokens_details.cached_tokens), and the warm server reports
// the cached blocks before any request. TTFT of the first requests is
// printed for both (docs/operations.md quotes a run; not asserted: tests
// never assert on time). A bad warm file stops the start-up with the line.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, test } from "node:test";

import { metrics, request, requireBinary, startServer } from "../server/common.mjs";

requireBinary();
const dir = mkdtempSync(path.join(tmpdir(), "kvserve-warm-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const SENTENCES = ["Once upon a time, there was a little girl named Lily.", "She loved to play in the park with her dog.",
  "One day, the sun was shining and the birds were singing.", "Her mom said they could go to the lake after lunch.",
  "Tom had a red ball and a big blue boat.", "They were happy and played all day long."];
const PREFIX = Array.from({ length: 170 }, (_, i) => SENTENCES[(i * 5) % SENTENCES.length]).join(" ");
const FIRST = 3;  // requests measured after each start

async function firstRequests(server, label) {
  const out = [];
  for (let i = 0; i < FIRST; i++) {
    const t0 = performance.now();
    const r = await request(server, "POST", "/v1/completions",
      { model: "kvserve-tiny", prompt: `${PREFIX} Question ${i}: what did they do?`, max_tokens: 1, temperature: 0 });
    const ms = performance.now() - t0;
    assert.equal(r.status, 200, r.text);
    out.push({ ms, prompt: r.json.usage.prompt_tokens, cached: r.json.usage.prompt_tokens_details?.cached_tokens ?? 0 });
  }
  console.log(`${label}: first ${FIRST} requests (prompt ${out[0].prompt} tokens, 1 output token): ` +
    out.map((o) => `${o.ms.toFixed(1)} ms (cached ${o.cached})`).join(", "));
  return out;
}

const ARGS = ["--threads", "1", "--max-context-length", "4096", "--max-concurrent-requests", "4"];

test("warm prompts are cached before the first request; cold starts are not", async () => {
  const warmFile = path.join(dir, "warm.txt");
  writeFileSync(warmFile, `# shared prefixes\n${PREFIX}\n\n${JSON.stringify({ messages: [{ role: "system", content: PREFIX }] })}\n`);

  const cold = await startServer({ fake: false, args: ARGS });
  const coldOut = await firstRequests(cold, "cold start");
  assert.equal((await cold.stop()).code, 0);

  const warm = await startServer({ fake: false, args: [...ARGS, "--warm-prompts", warmFile] });
  const before = await metrics(warm);
  assert.match(warm.stderr(), /prefix cache warmed: 2 prompts, \d+ tokens/);
  assert.ok(before.get("kvserve:kv_cache_blocks_cached") > 100, "the warm prompts' blocks are in the cache at ready");
  assert.equal(before.get("kvserve:http_requests_total{path=\"/v1/completions\",status=\"200\"}") ?? 0, 0);
  const warmOut = await firstRequests(warm, "warm start");
  assert.equal((await warm.stop()).code, 0);

  assert.equal(coldOut[0].cached, 0, "a cold server computes the first prefix");
  const fullBlocks = Math.floor((warmOut[0].prompt - 20) / 16) * 16;
  assert.ok(warmOut[0].cached >= fullBlocks - 16, `warm: ${warmOut[0].cached} of ${warmOut[0].prompt} tokens cached`);
  const median = (xs) => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(`first request: cold ${coldOut[0].ms.toFixed(1)} ms, warm ${warmOut[0].ms.toFixed(1)} ms; ` +
    `median of ${FIRST}: cold ${median(coldOut.map((o) => o.ms)).toFixed(1)} ms, warm ${median(warmOut.map((o) => o.ms)).toFixed(1)} ms`);
});

test("a bad warm-prompts file stops the start with the line", async () => {
  const bad = path.join(dir, "bad.txt");
  writeFileSync(bad, "fine prompt\n{\"nope\": 1}\n");
  const s = await startServer({ fake: false, args: [...ARGS, "--warm-prompts", bad], waitReady: false });
  const { code } = await s.exited;
  assert.equal(code, 1);
  assert.match(s.stderr(), /bad\.txt:2: expected \{"prompt": string\} or \{"messages": \[\.\.\.\]\}/);
});
