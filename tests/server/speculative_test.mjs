// Speculative decoding on the served path: three real `kvserve serve`
// processes on the bundled model, one plain, one with `--speculative ngram`
// and one with `--speculative draft` (the bundled 16K model, which shares
// its vocabulary, as the draft model), answer the same copy-heavy requests
// (the model's own story, then its opening again) over HTTP. At
// temperature 0 the replies are identical (completions, chat, streaming,
// stop strings, logprobs), the speculative ones' metrics show accepted
// drafts and fewer engine steps than tokens; sampled replies keep their
// seed and max_tokens; a draft model beside the disk KV tier answers the
// same after a restart from restored blocks; bad settings (a missing,
// unreadable or foreign draft model among them) stop the start-up with a
// message naming the problem.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import { createHash } from "node:crypto";
import fs from "node:fs";
import os from "node:os";

import { binary, metrics, metric, parseSse, request, requireBinary, sharedDir, sourceDir, startServer } from "./common.mjs";

requireBinary();
const model = path.join(sourceDir, "models/kvserve-tiny.gguf");
const draftModel = path.join(sourceDir, "models/kvserve-tiny-16k.gguf");
const draftSha256 = createHash("sha256").update(fs.readFileSync(draftModel)).digest("hex");

let plain, ngram, draft, prompt;

const completion = (server, extra = {}) =>
  request(server, "POST", "/v1/completions", { model: "kvserve-tiny", prompt, max_tokens: 120, temperature: 0, ignore_eos: true, ...extra });

before(async () => {
  const args = ["--model", model, "--threads", "1", "--max-batch-size", "8"];
  [plain, ngram, draft] = await Promise.all([
    startServer({ fake: false, args }),
    startServer({ fake: false, args: [...args, "--speculative", "ngram", "--speculative-tokens", "6"] }),
    startServer({ fake: false, args: [...args, "--speculative", "draft", "--model-draft", draftModel,
      "--model-draft-sha256", draftSha256.toUpperCase(), "--speculative-tokens", "4"] }),
  ]);
  // A document the reply will copy: the model's own continuation of an
  // opening, followed by the opening again.
  const opening = "Once upon a time, there was a little girl named Lily. She loved to play outside in the park.";
  const r = await request(plain, "POST", "/v1/completions", { model: "kvserve-tiny", prompt: opening, max_tokens: 160, temperature: 0, ignore_eos: true });
  assert.equal(r.status, 200, r.text);
  prompt = `${opening}${r.json.choices[0].text}\n\n${opening}`;
});

after(async () => {
  for (const s of [plain, ngram, draft]) if (s) assert.equal((await s.stop()).code, 0);
});

for (const method of ["ngram", "draft"]) describe(`speculative decoding (${method}) through kvserve serve`, () => {
  const server = () => (method === "ngram" ? ngram : draft);

  test("greedy completions are identical, with drafts accepted and fewer steps than tokens", async () => {
    const m0 = await metrics(server());
    const [a, b] = await Promise.all([completion(plain), completion(server())]);
    assert.equal(a.status, 200, a.text);
    assert.equal(b.status, 200, b.text);
    assert.equal(b.json.choices[0].text, a.json.choices[0].text);
    assert.equal(b.json.usage.completion_tokens, 120);
    const m1 = await metrics(server());
    const drafted = metric(m1, "kvserve:spec_decode_num_draft_tokens_total") - metric(m0, "kvserve:spec_decode_num_draft_tokens_total");
    const accepted = metric(m1, "kvserve:spec_decode_num_accepted_tokens_total") - metric(m0, "kvserve:spec_decode_num_accepted_tokens_total");
    const steps = metric(m1, "kvserve:engine_steps_total") - metric(m0, "kvserve:engine_steps_total");
    assert.ok(accepted > 20, `accepted ${accepted} of ${drafted} drafts`);
    assert.ok(accepted <= drafted);
    // 120 tokens, one prefill step: each accepted draft saved a step.
    assert.ok(steps <= 1 + 120 - accepted + 1, `${steps} steps for 120 tokens with ${accepted} accepted`);
    const p = await metrics(plain);
    assert.equal(metric(p, "kvserve:spec_decode_num_draft_tokens_total"), 0);
    // Only the draft model's passes count here.
    const draftSeconds = metric(m1, "kvserve:spec_decode_draft_model_seconds_total");
    if (method === "draft") assert.ok(draftSeconds > 0, `draft model seconds ${draftSeconds}`);
    else assert.equal(draftSeconds, 0);
  });

  test("streaming, chat, stop strings and logprobs give the same replies", async () => {
    const stream = async (server) => {
      const r = await completion(server, { stream: true });
      assert.equal(r.status, 200, r.text);
      return parseSse(r.text).filter((e) => e.data !== "[DONE]").map((e) => JSON.parse(e.data).choices[0]?.text ?? "").join("");
    };
    const [sa, sb] = await Promise.all([stream(plain), stream(server())]);
    assert.equal(sb, sa);

    const full = (await completion(plain)).json.choices[0].text;
    const stop = full.slice(60, 72);
    const [ta, tb] = await Promise.all([completion(plain, { stop: [stop] }), completion(server(), { stop: [stop] })]);
    assert.equal(tb.json.choices[0].text, ta.json.choices[0].text);
    assert.equal(tb.json.choices[0].finish_reason, "stop");
    assert.ok(!tb.json.choices[0].text.includes(stop));

    const chat = (server) => request(server, "POST", "/v1/chat/completions", {
      model: "kvserve-tiny", temperature: 0, max_tokens: 80,
      messages: [{ role: "user", content: `Repeat this story: ${prompt}` }],
    });
    const [ca, cb] = await Promise.all([chat(plain), chat(server())]);
    assert.equal(cb.status, 200, cb.text);
    assert.equal(cb.json.choices[0].message.content, ca.json.choices[0].message.content);

    // logprobs: decoded without drafts on the speculative server, same numbers.
    const [la, lb] = await Promise.all([completion(plain, { logprobs: 2, max_tokens: 20 }), completion(server(), { logprobs: 2, max_tokens: 20 })]);
    assert.equal(lb.status, 200, lb.text);
    assert.deepEqual(lb.json.choices[0].logprobs.tokens, la.json.choices[0].logprobs.tokens);
    const lpa = la.json.choices[0].logprobs.token_logprobs, lpb = lb.json.choices[0].logprobs.token_logprobs;
    for (let i = 0; i < lpa.length; i++) assert.ok(Math.abs(lpa[i] - lpb[i]) < 1e-4, `logprob ${i}: ${lpa[i]} vs ${lpb[i]}`);
  });

  test("a request can turn speculation off; a wrong type is a 400 naming the field", async () => {
    const m0 = await metrics(server());
    const [a, b] = await Promise.all([completion(plain), completion(server(), { speculative: false })]);
    assert.equal(b.status, 200, b.text);
    assert.equal(b.json.choices[0].text, a.json.choices[0].text);
    const m1 = await metrics(server());
    assert.equal(metric(m1, "kvserve:spec_decode_num_draft_tokens_total"), metric(m0, "kvserve:spec_decode_num_draft_tokens_total"));
    const bad = await completion(server(), { speculative: "yes" });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.json.error.param, "speculative");
  });

  test("sampled replies keep their seed and max_tokens under concurrency", async () => {
    const body = { temperature: 0.8, seed: 42, max_tokens: 90 };
    const rs = await Promise.all([1, 2, 3, 4].map(() => completion(server(), body)));
    for (const r of rs) {
      assert.equal(r.status, 200, r.text);
      assert.equal(r.json.usage.completion_tokens, 90);
      assert.equal(r.json.choices[0].text, rs[0].json.choices[0].text);
    }
  });
});

test("a draft model with the disk KV tier: after a restart the restored prompt answers the same, with drafts accepted", async () => {
  const disk = fs.mkdtempSync(path.join(os.tmpdir(), "kvs-draft-disk-"));
  const args = ["--model", model, "--threads", "1", "--speculative", "draft", "--model-draft", draftModel,
                "--kv-disk-path", disk];
  const want = (await completion(plain)).json.choices[0].text;
  const first = await startServer({ fake: false, args });
  const a = await completion(first);
  assert.equal(a.status, 200, a.text);
  assert.equal(a.json.choices[0].text, want);
  assert.equal((await first.stop()).code, 0);  // SIGTERM: the writer's queue reaches the disk first
  const second = await startServer({ fake: false, args });
  try {
    const b = await completion(second);
    assert.equal(b.status, 200, b.text);
    assert.equal(b.json.choices[0].text, want);
    const m = await metrics(second);
    const fromDisk = metric(m, 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}');
    assert.ok(fromDisk >= 160, `${fromDisk} prompt tokens from disk`);  // of ~240
    // The draft catches up over the restored blocks (its KV is not on disk).
    assert.ok(metric(m, "kvserve:spec_decode_num_accepted_tokens_total") > 20);
  } finally {
    assert.equal((await second.stop()).code, 0);
  }
});

test("bad speculative settings stop the start-up with the key named", () => {
  const notGguf = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "kvs-draft-")), "draft.gguf");
  fs.writeFileSync(notGguf, "not a model file\n");
  const cases = [
    [["--speculative", "eagle"], /speculative/],
    [["--speculative", "ngram", "--speculative-tokens", "0"], /speculative\.num_tokens/],
    [["--speculative", "ngram", "--speculative-ngram-min", "5", "--speculative-ngram-max", "3"], /ngram_min/],
    [["--speculative", "draft"], /speculative\.method draft needs speculative\.draft_model/],
    [["--model-draft", draftModel], /speculative\.draft_model is set but speculative\.method is off/],
    [["--speculative", "draft", "--model-draft", "/nonexistent/draft.gguf"], /speculative\.draft_model: \/nonexistent\/draft\.gguf is not a file/],
    [["--speculative", "draft", "--model-draft", notGguf], /speculative\.draft_model .*draft\.gguf/],
    [["--speculative", "draft", "--model-draft", draftModel, "--model-draft-sha256", "0".repeat(64)],
      new RegExp(`speculative\\.draft_model .*hashes to ${draftSha256}, the expected SHA-256 is 0{64}`)],
    [["--model-draft-sha256", draftSha256], /speculative\.draft_model_sha256 is set but speculative\.draft_model is not/],
  ];
  // A model with another vocabulary (stories260K's 512 tokens).
  const stories = path.join(sharedDir, "models/stories260K.gguf");
  if (fs.existsSync(stories)) cases.push([["--speculative", "draft", "--model-draft", stories], /vocabulary has 512 tokens/]);
  for (const [args, want] of cases) {
    const r = spawnSync(binary, ["serve", "--model", model, "--port", "0", ...args], { encoding: "utf8", timeout: 30000 });
    assert.notEqual(r.status, 0, `${args.join(" ")} was accepted`);
    assert.match(r.stderr, want, r.stderr);
  }
});
