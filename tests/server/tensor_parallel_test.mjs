// Tensor parallel on the served path (issue 38): `mpirun -np 2 kvserve serve
// --tensor-parallel 2` on the bundled model (2 KV heads: one per rank),
// driven by the openai client beside a single-process server of the same
// model. Checks:
//   * greedy answers (completions of 128 tokens, 48 under sanitizers; chat, streamed, and four at
//     once so the ranks compute batches) equal the single process's;
//   * rank 0's /metrics counts both ranks' steps and all-reduces;
//   * pipeline parallel (2 stages, and 2 stages of 2 tensor ranks) answers
//     as the single process does, with concurrent requests in micro-batches;
//   * layouts that cannot run are refused with a message naming the limit:
//     ranks that neither divide the KV heads nor are a multiple of them, a
//     process count that is not the setting;
//   * 4 ranks on the 2 KV heads (each replicated on 2 ranks) answer as the
//     single process does;
//   * a memory limit per process that the whole model does not fit (its
//     start-up is refused) serves the model at TP=2, with the same answers;
//   * a worker killed with SIGKILL ends the whole replica (mpirun exits,
//     the port closes), so a gateway ejects it instead of waiting on it;
//   * SIGTERM to mpirun drains rank 0, which then ends the worker.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  binary, childProcesses, failFile, loadOpenAI, metrics, metric, request, requireBinary, sourceDir, spawnListening,
  startServer, stopMpirun, waitFor,
} from "./common.mjs";

requireBinary();
const model = path.join(sourceDir, "models/kvserve-tiny.gguf");
const mpirun = spawnSync("sh", ["-c", "command -v mpirun"], { encoding: "utf8" }).stdout.trim();
if (!mpirun) failFile("mpirun is not on PATH (scripts/setup.sh installs openmpi-bin)");
// Root in CI containers; oversubscribed: 2 ranks on however many cores.
// Containers often forbid the cross-process memory reads (CMA) Open MPI's
// shared-memory transport copies large messages with: plain copies instead.
const mpiEnv = { OMPI_ALLOW_RUN_AS_ROOT: "1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM: "1", OMPI_MCA_rmaps_base_oversubscribe: "1",
  OMPI_MCA_btl_vader_single_copy_mechanism: "none",
  // Open MPI's own allocations at exit are not kvserve's (the thread-group
  // tests check the tensor-parallel code for leaks).
  ASAN_OPTIONS: "detect_leaks=0" };
// --drain-timeout: the openai client's idle keep-alive connections would hold a drain for its default 30 s.
// Under the sanitizers every rank runs several times slower: shorter
// answers, and the scenarios that start more servers (pipeline layouts, the
// memory limit, 4-rank refusals) run in the Release tree only, marked
// skipped here with the reason (the thread-group tests take the same code
// through ASan and TSan).
const SANITIZED = Boolean(process.env.KVSERVE_SANITIZED);
const TOKENS = SANITIZED ? 48 : 128;
const RELEASE_ONLY = SANITIZED && "more servers: run in the Release tree";
const serveArgs = ["--model", model, "--threads", "1", "--max-context-length", "2048", "--log-level", "info",
  "--drain-timeout", "2"];

// stop(): SIGTERM to mpirun, and mpirun killed if it does not reap ranks that
// have exited (stopMpirun: an Open MPI 4.1.4 race, docs/parallel.md).
async function mpiServe(np, extra = []) {
  const argv = ["-np", String(np), "--bind-to", "none", binary, "serve", "--host", "127.0.0.1", "--port", "0",
    "--access-log", "off", ...serveArgs, ...extra];
  const job = await spawnListening(mpirun, argv, { env: mpiEnv, what: `mpirun -np ${np} kvserve serve` });
  const stop = async () => {
    const end = await stopMpirun(job);
    // Every rank ends cleanly on SIGTERM, even when mpirun then hangs: a rank
    // ended by a signal is what made mpirun abort the job (docs/parallel.md).
    if (end.ranks) assert.deepEqual(end.ranks, end.ranks.map(() => "exit 0"), `mpirun -np ${np}: the ranks' ends`);
    return end;
  };
  return { ...job, stop };
}

// A rank's process id among the children of mpirun (its environment names it).
function rankPid(mpirunPid, rank) {
  for (const { pid } of childProcesses(mpirunPid)) {
    try {
      const env = readFileSync(`/proc/${pid}/environ`, "utf8").split("\0");
      if (env.includes(`OMPI_COMM_WORLD_RANK=${rank}`)) return pid;
    } catch {
      // gone, or not ours to read
    }
  }
  return 0;
}

let tp, single, OpenAI;

before(async () => {
  OpenAI = await loadOpenAI();
  tp = await mpiServe(2, ["--tensor-parallel", "2"]);
  await waitFor(async () => (await request(tp, "GET", "/ready")).status === 200, 60000);
  single = await startServer({ fake: false, args: serveArgs });
});

after(async () => {
  if (single) await single.stop();
  if (tp) {
    // mpirun forwards SIGTERM: rank 0 drains, then ends the worker.
    await tp.stop();
    assert.match(tp.stderr(), /drained; shutting down/);
  }
});

describe("tensor parallel through mpirun and kvserve serve", () => {
  test("both ranks start; rank 0 serves", () => {
    assert.match(tp.stderr(), /rank 0 of 2 on \S+ serves/);
    assert.match(tp.stderr(), /tensor parallel rank 1 of 2: shard loaded/);
  });

  test("greedy answers equal the single process's (completions, chat, stream, concurrent)", async () => {
    const clients = [tp, single].map((s) => new OpenAI({ baseURL: `${s.baseURL}/v1`, apiKey: "none", maxRetries: 0 }));
    const prompts = ["Once upon a time", "The little dog ran to the park and", "Tom and Mia found a big red box"];
    const complete = (c, prompt) => c.completions.create({ model: "kvserve-tiny", prompt, max_tokens: TOKENS,
      temperature: 0, ignore_eos: true });
    for (const prompt of prompts) {
      const [a, b] = await Promise.all(clients.map((c) => complete(c, prompt)));
      assert.equal(a.usage.completion_tokens, TOKENS);
      assert.equal(a.choices[0].text, b.choices[0].text, `prompt ${JSON.stringify(prompt)}`);
    }
    // Four at once on the parallel server: the ranks compute them as batches.
    const together = await Promise.all([...prompts, "A bird sang"].map((p) => complete(clients[0], p)));
    const alone = await Promise.all([...prompts, "A bird sang"].map((p) => complete(clients[1], p)));
    assert.deepEqual(together.map((r) => r.choices[0].text), alone.map((r) => r.choices[0].text));
    const chat = (c) => c.chat.completions.create({ model: "kvserve-tiny", max_tokens: 48, temperature: 0,
      messages: [{ role: "user", content: "Tell me a story about a cat." }] });
    const [x, y] = await Promise.all(clients.map(chat));
    assert.equal(x.choices[0].message.content, y.choices[0].message.content);
    const stream = await clients[0].chat.completions.create({ model: "kvserve-tiny", max_tokens: 48, temperature: 0,
      stream: true, messages: [{ role: "user", content: "Tell me a story about a cat." }] });
    let streamed = "";
    for await (const chunk of stream) streamed += chunk.choices[0]?.delta?.content ?? "";
    assert.equal(streamed, y.choices[0].message.content);
  });

  test("pipeline stages (2, and 2 x 2 tensor ranks) answer as the single process does", { skip: RELEASE_ONLY },
    async () => {
    const body = (prompt) => ({ model: "kvserve-tiny", prompt, max_tokens: TOKENS / 2, temperature: 0, ignore_eos: true });
    // Prompts of ~100 tokens: sent at once, their prefills share a step that
    // is split into micro-batches (each at least 64 tokens).
    const story = "The little dog ran to the park and played with a red ball under the big tree. ";
    const prompts = [story.repeat(5) + "Once upon a time", story.repeat(6) + "Then", story.repeat(5) + "Tom and Mia"];
    const alone = await Promise.all(prompts.map((p) => request(single, "POST", "/v1/completions", body(p))));
    for (const [tpn, ppn] of [[1, 2], [2, 2]]) {
      const server = await mpiServe(tpn * ppn, ["--tensor-parallel", String(tpn), "--pipeline-parallel", String(ppn)]);
      try {
        await waitFor(async () => (await request(server, "GET", "/ready")).status === 200, 60000);
        // Three at once through the openai client: micro-batches through the stages.
        const client = new OpenAI({ baseURL: `${server.baseURL}/v1`, apiKey: "none", maxRetries: 0 });
        const got = await Promise.all(prompts.map((p) => client.completions.create(body(p))));
        for (let i = 0; i < prompts.length; ++i) {
          assert.equal(got[i].choices[0].text, alone[i].json.choices[0].text, `${tpn} x ${ppn}: ${prompts[i]}`);
        }
        const m = await metrics(server);
        assert.ok(metric(m, "kvserve:pipeline_micro_batches_total") >= 2, `${tpn} x ${ppn}: no step was split`);
        // The later stage waits for its input, rank 0 for the logits: the bubbles.
        assert.ok(metric(m, `kvserve:pipeline_wait_seconds_total{rank="${tpn}"}`) > 0, `${tpn} x ${ppn}: stage 1 waits`);
        assert.ok(metric(m, 'kvserve:pipeline_wait_seconds_total{rank="0"}') > 0, `${tpn} x ${ppn}: rank 0 waits`);
        for (let r = 0; r < tpn * ppn; ++r) {
          assert.ok(metric(m, `kvserve:tensor_parallel_steps_total{rank="${r}"}`) >= 16, `${tpn} x ${ppn}: rank ${r}`);
        }
      } finally {
        await server.stop();
      }
    }
  });

  test("the disk KV tier under 2 tensor ranks: after a restart the prompt comes from disk, same answer",
    { skip: RELEASE_ONLY }, async () => {
    const disk = mkdtempSync(path.join(os.tmpdir(), "kvs-tp-disk-"));
    const story = "The little dog ran to the park and played with a red ball under the big tree. ";
    const body = { model: "kvserve-tiny", prompt: story.repeat(6) + "Then", max_tokens: TOKENS / 2, temperature: 0,
      ignore_eos: true };
    const want = (await request(single, "POST", "/v1/completions", body)).json.choices[0].text;
    const extra = ["--tensor-parallel", "2", "--kv-disk-path", disk];
    for (const round of [0, 1]) {
      const server = await mpiServe(2, extra);
      try {
        await waitFor(async () => (await request(server, "GET", "/ready")).status === 200, 60000);
        const r = await request(server, "POST", "/v1/completions", body);
        assert.equal(r.status, 200, r.text);
        assert.equal(r.json.choices[0].text, want, `round ${round}`);
        const m = await metrics(server);
        const fromDisk = metric(m, 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}');
        if (round === 0) assert.equal(fromDisk, 0);
        else assert.ok(fromDisk >= 96, `round 1: ${fromDisk} prompt tokens from disk`);
      } finally {
        await server.stop();  // SIGTERM: rank 0's writer reaches the disk first
      }
    }
  });

  test("rank 0's /metrics counts every rank's steps and all-reduces", async () => {
    const m = await metrics(tp);
    for (const rank of ["0", "1"]) {
      assert.ok(metric(m, `kvserve:tensor_parallel_steps_total{rank="${rank}"}`) >= 16, `rank ${rank} steps`);
      assert.ok(metric(m, `kvserve:tensor_parallel_allreduce_bytes_total{rank="${rank}"}`) > 0, `rank ${rank} bytes`);
      assert.ok(metric(m, `kvserve:tensor_parallel_forward_seconds_total{rank="${rank}"}`) > 0, `rank ${rank} time`);
    }
    // Both ranks contribute the same payload: [tokens, hidden] floats twice a layer.
    assert.equal(metric(m, 'kvserve:tensor_parallel_allreduce_bytes_total{rank="0"}'),
      metric(m, 'kvserve:tensor_parallel_allreduce_bytes_total{rank="1"}'));
  });

  test("a per-process memory limit the whole model exceeds: refused at TP=1, served at TP=2", { skip: RELEASE_ONLY },
    async () => {
    // The least memory each layout starts with (one 2048-token request's KV
    // blocks), from its own memory plan line; the limit goes between them.
    const units = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 };
    const bytes = (v) => Number(v.split(" ")[0]) * units[v.split(" ")[1]];
    const least = (log) => {
      const m = /weights ([\d.]+ \w+), KV pool [\d.]+ \w+ \(\d+ blocks of ([\d.]+ \w+)[^)]*\), activations ([\d.]+ \w+), overhead ([\d.]+ \w+)/
        .exec(log);
      assert.ok(m, "no memory plan line");
      return bytes(m[1]) + 128 * bytes(m[2]) + bytes(m[3]) + bytes(m[4]);
    };
    const whole = least(single.stderr()), perRank = least(tp.stderr());
    assert.ok(perRank < whole - 2 ** 20, `rank 0 needs ${perRank} bytes, one process ${whole}`);
    const limit = String(Math.round((whole + perRank) / 2));
    const limited = ["--memory-limit", limit, "--memory-fraction", "1"];
    const refused = spawnSync(binary, ["serve", "--port", "0", ...serveArgs, ...limited], { encoding: "utf8", timeout: 60000 });
    assert.notEqual(refused.status, 0);
    assert.match(refused.stderr, /the KV pool would hold \d+ blocks .* fewer than the 128 blocks/);
    const fits = await mpiServe(2, ["--tensor-parallel", "2", ...limited]);
    try {
      await waitFor(async () => (await request(fits, "GET", "/ready")).status === 200, 60000);
      const body = { model: "kvserve-tiny", prompt: "Once upon a time", max_tokens: 32, temperature: 0, ignore_eos: true };
      const [a, b] = await Promise.all([request(fits, "POST", "/v1/completions", body),
        request(single, "POST", "/v1/completions", body)]);
      assert.equal(a.status, 200, a.text);
      assert.equal(a.json.choices[0].text, b.json.choices[0].text);
    } finally {
      await fits.stop();
    }
  });

  test("4 tensor ranks on 2 KV heads replicate each KV head and answer as the single process does",
    { skip: RELEASE_ONLY }, async () => {
    const server = await mpiServe(4, ["--tensor-parallel", "4"]);
    try {
      await waitFor(async () => (await request(server, "GET", "/ready")).status === 200, 60000);
      const prompts = ["Once upon a time", "The cat sat", "Lily and Ben went to the park. They"];
      const body = (prompt) => ({ model: "kvserve-tiny", prompt, max_tokens: TOKENS, temperature: 0, ignore_eos: true });
      const [got, want] = await Promise.all([
        Promise.all(prompts.map((p) => request(server, "POST", "/v1/completions", body(p)))),
        Promise.all(prompts.map((p) => request(single, "POST", "/v1/completions", body(p))))]);
      for (let i = 0; i < prompts.length; ++i) {
        assert.equal(got[i].status, 200, got[i].text);
        assert.equal(got[i].json.choices[0].text, want[i].json.choices[0].text, prompts[i]);
      }
      const m = await metrics(server);
      for (let r = 0; r < 4; ++r) {
        assert.ok(metric(m, `kvserve:tensor_parallel_steps_total{rank="${r}"}`) >= 16, `rank ${r}`);
      }
    } finally {
      await server.stop();
    }
  });

  test("layouts that cannot run are refused naming the limit", { skip: RELEASE_ONLY }, () => {
    const run = (argv) => spawnSync(mpirun, argv, { encoding: "utf8", timeout: 60000, env: { ...process.env, ...mpiEnv } });
    // 3 ranks for a model with 2 KV heads: neither a divisor nor a multiple.
    const three = run(["-np", "3", "--bind-to", "none", binary, "serve", "--port", "0", ...serveArgs, "--tensor-parallel", "3"]);
    assert.notEqual(three.status, 0);
    assert.match(three.stderr + three.stdout, /the model has 2 KV heads/);
    // The setting and the process count disagree.
    const two = run(["-np", "2", "--bind-to", "none", binary, "serve", "--port", "0", ...serveArgs, "--tensor-parallel", "3"]);
    assert.notEqual(two.status, 0);
    assert.match(two.stderr + two.stdout,
      /runtime.tensor_parallel is 3 and pipeline_parallel 1 \(3 processes\) but 2 process\(es\) were started/);
    // Without mpirun at all.
    const alone = spawnSync(binary, ["serve", "--port", "0", ...serveArgs, "--tensor-parallel", "2"],
      { encoding: "utf8", timeout: 60000, env: { ...process.env, ...mpiEnv } });
    assert.notEqual(alone.status, 0);
    assert.match(alone.stderr, /but 1 process\(es\) were started; start them with mpirun -np 2 /);
  });

  test("a worker killed ends the replica", async () => {
    const victim = await mpiServe(2, ["--tensor-parallel", "2"]);
    await waitFor(async () => (await request(victim, "GET", "/ready")).status === 200, 60000);
    const pid = rankPid(victim.child.pid, 1);
    assert.ok(pid > 0, "rank 1's process not found under mpirun");
    process.kill(pid, "SIGKILL");
    let timer;
    const exit = await Promise.race([victim.exited, new Promise((r) => (timer = setTimeout(() => r("timeout"), 30000)))]);
    clearTimeout(timer);
    assert.notEqual(exit, "timeout", "mpirun still running 30 s after a rank died");
    assert.notEqual(exit.code, 0);
    await assert.rejects(request(victim, "GET", "/ready"), /ECONNREFUSED/);
  });
});
