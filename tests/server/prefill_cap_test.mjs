// runtime.max_prefill_tokens_while_decoding on the served path: two real
// `kvserve serve` processes on the bundled model, one with the cap (128
// prefill tokens a step while others decode), one without. In each, a long
// streaming completion decodes while a ~1,500-token prompt arrives; the
// engine's own step sizes (kvserve:iteration_tokens) show that the capped
// server prefilled it in small steps beside the decode, the other in one
// step; the answers are the same. A bad cap stops the start-up naming the key.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { binary, metrics, metric, request, requireBinary, sourceDir, startServer, startStream } from "./common.mjs";

requireBinary();
const model = path.join(sourceDir, "models/kvserve-tiny.gguf");
const CAP = 128;

// Steps of more than `tokens` tokens so far (le bounds are the engine's buckets).
function stepsAbove(m, tokens) {
  return metric(m, "kvserve:iteration_tokens_count") - metric(m, `kvserve:iteration_tokens_bucket{le="${tokens}"}`);
}

let capped, plain;
const longPrompt = "The little dog ran to the park and played with a red ball under the big tree. ".repeat(65);

before(async () => {
  const args = ["--model", model, "--threads", "1", "--max-num-batched-tokens", "2048", "--max-context-length", "4096"];
  [capped, plain] = await Promise.all([
    startServer({ fake: false, args: [...args, "--max-prefill-tokens-while-decoding", String(CAP)] }),
    startServer({ fake: false, args }),
  ]);
});

after(async () => {
  for (const s of [capped, plain]) if (s) assert.equal((await s.stop()).code, 0);
});

describe("prefill cap while decoding through kvserve serve", () => {
  test("a long prompt beside a decode: small steps with the cap, one large step without; same answer", async () => {
    const answers = [];
    for (const [server, cap] of [[capped, true], [plain, false]]) {
      const stream = await startStream(server, { model: "kvserve-tiny", prompt: "Once upon a time", max_tokens: 3000,
        ignore_eos: true, temperature: 0 });
      const m0 = await metrics(server);
      const r = await request(server, "POST", "/v1/completions", { model: "kvserve-tiny", prompt: longPrompt, max_tokens: 8,
        temperature: 0, ignore_eos: true });
      assert.equal(r.status, 200, r.text);
      assert.ok(!stream.ended(), "the decode must still run while the long prompt is prefilled (it ended first)");
      const m1 = await metrics(server);
      stream.abort();
      const promptTokens = r.json.usage.prompt_tokens;
      assert.ok(promptTokens > 1100 && promptTokens < 2000, `prompt of ${promptTokens} tokens`);
      answers.push(r.json.choices[0].text);
      const big = stepsAbove(m1, 1024) - stepsAbove(m0, 1024);
      const aboveCap = stepsAbove(m1, 256) - stepsAbove(m0, 256);
      const steps = metric(m1, "kvserve:iteration_tokens_count") - metric(m0, "kvserve:iteration_tokens_count");
      if (cap) {
        // 1 decode + at most 128 prefill tokens a step: never above 256.
        assert.equal(aboveCap, 0, `${aboveCap} steps above 256 tokens with the cap`);
        assert.ok(steps >= Math.ceil(promptTokens / CAP), `${steps} steps for a ${promptTokens}-token prompt`);
      } else {
        assert.equal(big, 1, `${big} steps above 1024 tokens without the cap`);
      }
      // The histogram's sum is every computed token.
      assert.ok(metric(m1, "kvserve:iteration_tokens_sum") >= metric(m0, "kvserve:iteration_tokens_sum") + promptTokens);
    }
    assert.equal(answers[0], answers[1], "the cap changes the steps, not the answer");
  });

  test("a negative cap stops the start-up naming the key", () => {
    const r = spawnSync(binary, ["serve", "--model", model, "--port", "0", "--max-prefill-tokens-while-decoding", "-1"],
      { encoding: "utf8", timeout: 30000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr + r.stdout, /max_prefill_tokens_while_decoding|max-prefill-tokens-while-decoding/);
  });
});
