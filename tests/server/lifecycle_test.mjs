// Concurrency and lifecycle of kvserve serve: 64 concurrent streams, client
// disconnects freeing KV at once, SIGTERM under load losing no accepted
// request. Runs on the fake backend, and on the real model
// (../shared/models/stories260K.gguf) when this build serves it.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { after, before, describe, test } from "node:test";

import {
  binary, loadOpenAI, metric, metrics, realModelPath, request, requireBinary, spawnListening, startServer, startStream, waitFor,
} from "./common.mjs";

requireBinary();
const OpenAI = await loadOpenAI();

function suites(name, { fake, model, extraArgs = [] }) {
  describe(name, () => {
    let server;
    let client;
    let modelId;
    before(async () => {
      const args = [...extraArgs, "--max-concurrent-requests", "64", "--max-batch-size", "16"];
      if (model) args.push("--model", model);
      server = await startServer({ fake, args });
      modelId = (await request(server, "GET", "/v1/models")).json.data[0].id;
      client = new OpenAI({ apiKey: "none", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
    });
    after(async () => {
      if (server) assert.equal((await server.stop()).code, 0);
    });

    test("64 concurrent streaming requests all complete with correct usage", async () => {
      const runs = Array.from({ length: 64 }, async (_, i) => {
        const stream = await client.completions.create({
          model: modelId, prompt: `Once upon a time ${i}`, max_tokens: 12, temperature: 0, ignore_eos: true,
          stream: true, stream_options: { include_usage: true },
        });
        let text = "";
        let usage = null;
        let finish = null;
        for await (const chunk of stream) {
          if (chunk.usage) usage = chunk.usage;
          for (const c of chunk.choices) {
            text += c.text;
            if (c.finish_reason) finish = c.finish_reason;
          }
        }
        return { text, usage, finish };
      });
      const results = await Promise.all(runs);
      for (const r of results) {
        assert.equal(r.finish, "length");
        assert.equal(r.usage.completion_tokens, 12);
        assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 12);
        assert.ok(r.text.length > 0);
      }
      const m = await metrics(server);
      assert.ok(metric(m, 'kvserve:request_finished_total{finish_reason="length"}') >= 64);
      await waitFor(async () => metric(await metrics(server), "kvserve:kv_cache_blocks_used") === 0);
    });

    test("a client disconnect mid-stream cancels the request and frees its KV", async () => {
      const before = await metrics(server);
      const cancelledBefore = metric(before, 'kvserve:request_finished_total{finish_reason="cancelled"}');
      const handles = [];
      for (let i = 0; i < 4; i++) {
        handles.push(await startStream(server, { model: modelId, prompt: "Once upon a time", max_tokens: 1000, ignore_eos: true, temperature: 0 }));
      }
      const during = await metrics(server);
      assert.ok(metric(during, "kvserve:kv_cache_blocks_used") > 0, "streams hold KV blocks");
      for (const h of handles) h.abort();
      await waitFor(async () => {
        const m = await metrics(server);
        return metric(m, "kvserve:kv_cache_blocks_used") === 0 && metric(m, "kvserve:num_requests_running") === 0 &&
          metric(m, "kvserve:sequences_in_flight") === 0 &&
          metric(m, "kvserve:http_requests_in_flight") === 1;  // this scrape
      }, 5000);
      const m = await metrics(server);
      assert.equal(metric(m, 'kvserve:request_finished_total{finish_reason="cancelled"}'), cancelledBefore + 4);
    });
  });

  test(`${name}: SIGTERM under load loses no accepted request`, async () => {
    const args = [...extraArgs, "--max-concurrent-requests", "64", "--drain-timeout", "60"];
    if (model) args.push("--model", model);
    const s = await startServer({ fake, args });
    try {
      const id = (await request(s, "GET", "/v1/models")).json.data[0].id;
      // Long enough that the real model is still generating when SIGTERM
      // lands, even on a fast machine (stories260K runs thousands of tok/s).
      const maxTokens = fake ? 24 : 256;
      const body = { model: id, prompt: "Once upon a time", max_tokens: maxTokens, temperature: 0, ignore_eos: true };
      const accepted = [];
      let settled = 0;
      for (let i = 0; i < 24; i++) {
        const p = request(s, "POST", "/v1/completions", body);
        p.then(() => settled++, () => settled++);
        accepted.push(p);
      }
      // SIGTERM once generation is under way. If the batch already finished
      // between two scrapes the drain is still exercised on the rest.
      await waitFor(async () => settled > 0 || metric(await metrics(s), "kvserve:sequences_in_flight") > 0, 30000, 5);
      s.child.kill("SIGTERM");
      const results = await Promise.all(accepted);
      // Each request was either answered fully (200) or, if it reached the
      // server only after the drain began, refused with 503 — never dropped.
      let ok = 0;
      for (const r of results) {
        if (r.status === 200) {
          ok++;
          assert.equal(r.json.usage.completion_tokens, maxTokens);
          assert.equal(r.json.choices[0].finish_reason, "length");
        } else {
          assert.equal(r.status, 503, r.text);
          assert.equal(r.json.error.code, "server_draining");
        }
      }
      assert.ok(ok > 0, "requests in flight at SIGTERM finished");
      assert.equal((await s.exited).code, 0);
      await assert.rejects(request(s, "GET", "/health"), (e) => e.code === "ECONNREFUSED");
    } finally {
      // A failed assertion must not leave the server running (the test
      // process would wait on it until ctest's timeout).
      await s.stop("SIGKILL");
    }
  });
}

suites("fake backend", { fake: true, extraArgs: ["--fake-step-ms", "5"] });

// The device seam (backend/runner_factory.h): a device this build has no
// runner for stops the start-up as bad configuration, before any port or
// model is touched, naming the devices it accepts.
test("an unknown runtime.device exits 2 naming the accepted devices", () => {
  for (const args of [["--runtime.device=cuda"], ["--device", "cuda"]]) {
    const r = spawnSync(binary, ["serve", "--port", "0", ...args], { encoding: "utf8", timeout: 30000 });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /runtime\.device: 'cuda' is not available in this build; accepted: cpu/);
  }
});

// SIGHUP re-reads the configuration (the same file and command line): the
// log level changes at once, every other changed key is named as needing a
// restart, a broken file keeps what is in force; the server keeps serving.
test("SIGHUP: logging.level applied, other changes named, a broken file refused", async () => {
  const model = realModelPath() ?? path.join(process.env.KVSERVE_SOURCE_DIR ?? ".", "models/kvserve-tiny.gguf");
  const dir = mkdtempSync(path.join(tmpdir(), "kvserve-hup-"));
  const file = path.join(dir, "serve.yaml");
  const config = (level, batch) => `logging:\n  level: ${level}\nruntime:\n  max_batch_size: ${batch}\n  threads: 1\n`;
  writeFileSync(file, config("info", 8));
  // Spawned by hand: startServer's --log-level would override the file's.
  const server = await spawnListening(binary, ["serve", "--port", "0", "--host", "127.0.0.1", "--config", file, "--model", model]);
  await waitFor(async () => (await request(server, "GET", "/ready")).status === 200, 30000);
  const id = (await request(server, "GET", "/v1/models")).json.data[0].id;
  try {
    const hup = async (expect) => {
      const before = server.stderr().length;
      server.child.kill("SIGHUP");
      await waitFor(() => expect.every((re) => re.test(server.stderr().slice(before))), 10000).catch((e) => {
        throw new Error(`${e.message}: ${expect.join(", ")} in:\n${server.stderr().slice(before)}`);
      });
      return server.stderr().slice(before);
    };
    writeFileSync(file, config("debug", 16));
    await hup([/SIGHUP: logging\.level info -> debug/, /SIGHUP: runtime\.max_batch_size changed; it takes effect at the next restart/,
      /SIGHUP: API keys reloaded/]);
    const r = await request(server, "POST", "/v1/completions", { model: id, prompt: "Once", max_tokens: 2 });
    assert.equal(r.status, 200, r.text);
    writeFileSync(file, "runtime:\n  max_batch_size: -3\n");
    const out = await hup([/SIGHUP: configuration not re-read \(what was in force stays\): .*max_batch_size/]);
    assert.doesNotMatch(out, /logging\.level/);
    writeFileSync(file, config("debug", 16));
    await hup([/SIGHUP: runtime\.max_batch_size changed/]);
    assert.equal((await request(server, "GET", "/ready")).status, 200);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

// SIGHUP applies keys and limits to a running server: a key swapped in the
// file, a smaller body limit, fewer concurrent sequences and a request
// timeout are in force for the next request, each change is logged, and a
// limit the server cannot raise live is named as needing a restart.
test("SIGHUP: API keys and limits applied without a restart", async () => {
  const model = realModelPath() ?? path.join(process.env.KVSERVE_SOURCE_DIR ?? ".", "models/kvserve-tiny.gguf");
  const dir = mkdtempSync(path.join(tmpdir(), "kvserve-hup-"));
  const file = path.join(dir, "serve.yaml");
  const config = ({ key, body, seqs, timeout }) => `server:\n  api_keys: [${key}]\n  max_body_bytes: ${body}\n` +
    `runtime:\n  threads: 1\n  max_concurrent_requests: ${seqs}\n  request_timeout_seconds: ${timeout}\n`;
  writeFileSync(file, config({ key: "sk-one", body: 65536, seqs: 4, timeout: 120 }));
  const server = await spawnListening(binary, ["serve", "--port", "0", "--host", "127.0.0.1", "--config", file, "--model", model]);
  await waitFor(async () => (await request(server, "GET", "/ready")).status === 200, 30000);
  const id = (await request(server, "GET", "/v1/models", undefined, { authorization: "Bearer sk-one" })).json.data[0].id;
  // pad: that many spaces after the JSON (a large body, a short prompt).
  const complete = (key, extra = {}, pad = 0) => request(server, "POST", "/v1/completions",
    JSON.stringify({ model: id, prompt: "Once upon a time", max_tokens: 2, ...extra }) + " ".repeat(pad),
    { authorization: `Bearer ${key}` });
  try {
    assert.equal((await complete("sk-one")).status, 200);
    assert.equal((await complete("sk-two")).status, 401);
    assert.equal((await complete("sk-one", { n: 2, temperature: 1 })).status, 200);
    assert.equal((await complete("sk-one", {}, 8000)).status, 200);
    const before = server.stderr().length;
    writeFileSync(file, config({ key: "sk-two", body: 4096, seqs: 1, timeout: 0.05 }));
    server.child.kill("SIGHUP");
    const expect = [/SIGHUP: server\.api_keys changed; the keys are read again/, /SIGHUP: server\.max_body_bytes 65536 -> 4096/,
      /SIGHUP: runtime\.max_concurrent_requests 4 -> 1/, /SIGHUP: runtime\.request_timeout_seconds 120(\.0)? -> 0\.05/,
      /SIGHUP: API keys reloaded: 1 keys/];
    await waitFor(() => expect.every((re) => re.test(server.stderr().slice(before))), 10000).catch((e) => {
      throw new Error(`${e.message} in:\n${server.stderr().slice(before)}`);
    });
    assert.doesNotMatch(server.stderr().slice(before), /takes effect at the next restart/);
    // The keys: the old one is refused, the new one accepted.
    assert.equal((await complete("sk-one")).status, 401);
    // The body limit.
    const big = await complete("sk-two", {}, 8000);
    assert.equal(big.status, 413, big.text);
    assert.match(big.text, /server\.max_body_bytes/);
    // The concurrency bound.
    const two = await complete("sk-two", { n: 2, temperature: 1 });
    assert.equal(two.status, 400, two.text);
    assert.match(two.json.error.message, /at most 1 at once \(runtime\.max_concurrent_requests\)/);
    // The request timeout: a long generation is cut at 50 ms.
    const slow = await complete("sk-two", { max_tokens: 2000, ignore_eos: true });
    assert.match(slow.text, /runtime\.request_timeout_seconds/, slow.text);
    // Raising the concurrency above the start value takes a restart.
    const mark = server.stderr().length;
    writeFileSync(file, config({ key: "sk-two", body: 4096, seqs: 8, timeout: 120 }));
    server.child.kill("SIGHUP");
    await waitFor(() => /runtime\.max_concurrent_requests 8 is above the 4 this server started with/.test(server.stderr().slice(mark)), 10000);
    assert.equal((await complete("sk-two", { n: 2, temperature: 1 })).status, 400, "still 1");
    assert.equal((await complete("sk-two")).status, 200);
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

const real = realModelPath();
if (!real) {
  test("real model", { skip: "../shared/models/stories260K.gguf is absent" }, () => {});
} else {
  // A build restricted with -DKVSERVE_MODULES may leave the engine out of
  // the server; that is a failure here, not a skip, so it cannot hide.
  const wired = spawnSync(binary, ["serve", "--engine-available"], { encoding: "utf8" }).status === 0;
  if (!wired) {
    test("real model", () => assert.fail("this kvserve has no engine wired to the server (built with KVSERVE_MODULES?)"));
  } else {
    suites("real model (stories260K)", { fake: false, model: real, extraArgs: ["--threads", "2"] });
  }
}
