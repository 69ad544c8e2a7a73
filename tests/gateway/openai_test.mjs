// `kvserve gateway` in front of two pools of real `kvserve serve` replicas
// (stories260K from ../shared, and the bundled model), driven by the
// official `openai` npm client and raw HTTP: completions, chat, streaming,
// usage, routing by length, errors, the server's bad inputs (same answers
// through the gateway as from a replica), merged /v1/models, metrics, the
// audit log, and nothing reaching a replica without a key.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  addKey, auditLine, auth, bundled, loadOpenAI, metric, metricSum, metrics, parseSse, request, requireBinary, skipFile,
  startGateway, startReplica, stories, tempDir, waitFor,
} from "./common.mjs";

requireBinary();
const OpenAI = await loadOpenAI();
const models = [stories(), bundled()].filter((m) => m);
if (models.length === 0) skipFile("neither ../shared/models/stories260K.gguf nor models/kvserve-tiny.gguf is present");

for (const modelPath of models) {
  const MODEL = modelPath.split("/").pop().replace(/\.gguf$/, "");
  describe(`two pools of ${MODEL} replicas`, () => {
    let short, long, gw, client, key, dir;
    before(async () => {
      dir = tempDir();
      [short, long] = await Promise.all([
        startReplica({ model: modelPath, args: ["--max-context-length", "256"] }),
        startReplica({ model: modelPath, args: ["--max-context-length", "1024"] }),
      ]);
      const keyFile = `${dir}/keys.yaml`;
      key = addKey(keyFile, "acme");
      gw = await startGateway({
        model: modelPath,
        gateway: { key_file: keyFile },
        pools: [
          { name: "short", max_context: 256, default_max_tokens: 64, replicas: [short.baseURL] },
          { name: "long", max_context: 1024, replicas: [long.baseURL] },
        ],
      });
      client = new OpenAI({ apiKey: key, baseURL: `${gw.baseURL}/v1`, maxRetries: 0 });
    });
    after(async () => {
      const { code } = await gw.stop();
      assert.equal(code, 0, "the gateway exits 0 after SIGTERM");
      await Promise.all([short.stop(), long.stop()]);
    });

    test("completions: text and usage; short requests go to the short pool", async () => {
      const r = await client.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 12, temperature: 0 });
      assert.equal(r.object, "text_completion");
      assert.equal(r.model, MODEL);
      assert.ok(r.choices[0].text.length > 0);
      assert.equal(r.usage.completion_tokens, 12);
      // Greedy: the same answer as the replica gives directly.
      const direct = await request(short, "POST", "/v1/completions", { model: MODEL, prompt: "Once upon a time", max_tokens: 12, temperature: 0 });
      assert.equal(r.choices[0].text, direct.json.choices[0].text);
      const line = await auditLine(gw, (a) => a.path === "/v1/completions" && a.status === 200);
      assert.equal(line.pool, "short");
      assert.equal(line.replica, short.baseURL);
      assert.equal(line.tenant, "acme");
      assert.equal(line.prompt_tokens, r.usage.prompt_tokens, "the gateway's count equals the replica's");
      assert.equal(line.completion_tokens, 12);
      assert.ok(!JSON.stringify(line).includes(key), "the key never appears in the audit log");
      assert.equal(line.prompt, undefined, "no prompt text unless audit_prompts");
    });

    test("a request that needs more than the short pool holds goes to the long pool", async () => {
      const r = await client.completions.create({ model: MODEL, prompt: "Hello", max_tokens: 400, temperature: 0 });
      assert.ok(r.usage.completion_tokens > 0);
      const line = await auditLine(gw, (a) => a.status === 200 && a.pool === "long");
      assert.equal(line.reserved_tokens, r.usage.prompt_tokens + 400);
    });

    test("over-length: 400 with the counts, before any replica", async () => {
      const before = await metricSum(long, "kvserve:http_requests_total", { path: "/v1/completions" });
      await assert.rejects(client.completions.create({ model: MODEL, prompt: "Hello", max_tokens: 5000 }), (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.code, "context_length_exceeded");
        assert.equal(e.error.max_context_length, 1024);
        assert.equal(e.error.max_tokens, 5000);
        assert.ok(e.error.prompt_tokens >= 2);
        assert.equal(e.param, "max_tokens");
        return true;
      });
      assert.equal(await metricSum(long, "kvserve:http_requests_total", { path: "/v1/completions" }), before);
    });

    test("chat: streamed deltas join to the non-streamed answer; usage only when asked", async () => {
      const messages = [{ role: "user", content: "Tell me a story." }];
      const whole = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 20, temperature: 0 });
      assert.equal(whole.choices[0].message.role, "assistant");
      const stream = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 20, temperature: 0, stream: true });
      let text = "";
      let sawRole = false;
      for await (const chunk of stream) {
        assert.equal(chunk.usage, undefined, "no usage member when the client did not ask");
        const d = chunk.choices[0]?.delta;
        if (d?.role) sawRole = true;
        text += d?.content ?? "";
      }
      assert.ok(sawRole, "the role delta is passed on");
      assert.equal(text, whole.choices[0].message.content);
      const withUsage = await client.chat.completions.create({
        model: MODEL, messages, max_tokens: 20, temperature: 0, stream: true, stream_options: { include_usage: true },
      });
      let usage = null;
      for await (const chunk of withUsage) if (chunk.usage) usage = chunk.usage;
      assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
      assert.equal(usage.prompt_tokens, whole.usage.prompt_tokens);
      // A chat request without max_tokens gets (and is charged) the pool's default.
      const n = gw.audit().length;
      await client.chat.completions.create({ model: MODEL, messages, temperature: 0 });
      await auditLine(gw, () => gw.audit().length > n);
      const line = gw.audit().filter((a) => a.path === "/v1/chat/completions").pop();
      assert.equal(line.reserved_tokens, whole.usage.prompt_tokens + 64);
      assert.ok(line.completion_tokens <= 64);
    });

    test("errors through the client: model, key, bad request", async () => {
      await assert.rejects(client.completions.create({ model: "nope", prompt: "x" }), (e) => e.status === 404 && e.code === "model_not_found");
      const bad = new OpenAI({ apiKey: "sk-wrong", baseURL: `${gw.baseURL}/v1`, maxRetries: 0 });
      await assert.rejects(bad.completions.create({ model: MODEL, prompt: "x" }), (e) => e.status === 401 && e.code === "invalid_api_key");
      await assert.rejects(client.completions.create({ model: MODEL, prompt: "x", temperature: "hot" }), (e) => e.status === 400 && e.param === "temperature");
    });

    test("/v1/models merges the pools; /ready and /metrics", async () => {
      const list = await client.models.list();
      const ids = list.data.map((m) => m.id);
      assert.deepEqual(ids, [MODEL]);
      assert.deepEqual(list.data[0].pools, ["short", "long"]);
      assert.equal(list.data[0].max_model_len, 1024);
      const ready = await request(gw, "GET", "/ready");
      assert.equal(ready.status, 200);
      assert.equal(ready.json.pools.short.available_replicas, 1);
      const m = await metrics(gw);
      assert.equal(metric(m, `kvserve_gateway:replica_healthy{pool="short",replica="${short.baseURL}"}`), 1);
      assert.ok((await metricSum(gw, "kvserve_gateway:requests_total", { tenant: "acme", pool: "short", status: "200" })) >= 1);
      assert.ok((await metricSum(gw, "kvserve_gateway:upstream_request_duration_seconds_count", { pool: "short" })) >= 1);
      assert.ok((await metricSum(gw, "kvserve_gateway:tokens_used_total", { tenant: "acme", kind: "completion" })) > 0);
    });

    test("nothing reaches a replica without a valid key", async () => {
      const count = async () =>
        (await metricSum(short, "kvserve:http_requests_total", { path: "/v1/completions" })) +
        (await metricSum(long, "kvserve:http_requests_total", { path: "/v1/completions" })) +
        (await metricSum(short, "kvserve:http_requests_total", { path: "/v1/chat/completions" })) +
        (await metricSum(long, "kvserve:http_requests_total", { path: "/v1/chat/completions" }));
      const before = await count();
      const body = { model: MODEL, prompt: "x", max_tokens: 2 };
      for (const headers of [{}, auth("sk-wrong"), { authorization: key }, { authorization: `Basic ${key}` }]) {
        const r = await request(gw, "POST", "/v1/completions", body, headers);
        assert.equal(r.status, 401, JSON.stringify(headers));
        assert.equal(r.headers["www-authenticate"], "Bearer");
        assert.equal(r.json.error.type, "authentication_error");
      }
      assert.equal((await request(gw, "POST", "/v1/chat/completions", { model: MODEL, messages: [] })).status, 401);
      assert.equal((await request(gw, "GET", "/v1/models")).status, 401);
      assert.equal(await count(), before);
    });

    test("a client leaving mid-stream cancels the replica's generation; its KV blocks are freed", async () => {
      const ac = new AbortController();
      const stream = await client.completions.create(
        { model: MODEL, prompt: "Once", max_tokens: 1000, ignore_eos: true, stream: true }, { signal: ac.signal });
      try {
        for await (const chunk of stream) {
          if (chunk.choices[0]?.text) break;  // leaving the loop aborts the request
        }
      } catch {}
      await waitFor(async () => {
        const m = await metrics(long);
        return metric(m, 'kvserve:request_finished_total{finish_reason="cancelled"}') === 1 &&
          metric(m, "kvserve:kv_cache_blocks_used") === 0 && metric(m, "kvserve:num_requests_running") === 0;
      }, 10000);
      await waitFor(async () => (await metricSum(gw, "kvserve_gateway:client_disconnects_total")) === 1);
    });

    test("the server's bad inputs get the same answers through the gateway", async () => {
      const cases = [
        ["/v1/completions", "{not json"],
        ["/v1/completions", "[1, 2]"],
        ["/v1/completions", { prompt: "x" }],
        ["/v1/completions", { model: MODEL }],
        ["/v1/completions", { model: MODEL, prompt: "x", max_tokens: -1 }],
        ["/v1/completions", { model: MODEL, prompt: "x", n: 0 }],
        ["/v1/completions", { model: MODEL, prompt: "x", top_p: 7 }],
        ["/v1/completions", { model: MODEL, prompt: "x", logprobs: 99 }],
        ["/v1/completions", { model: MODEL, prompt: "x", stop: Array(20).fill("a") }],
        ["/v1/completions", { model: MODEL, prompt: "x", suffix: "y" }],
        ["/v1/completions", { model: MODEL, prompt: [] }],
        ["/v1/completions", { model: MODEL, prompt: [1, 2, 99999999] }],
        ["/v1/completions", { model: MODEL, prompt: "x", stream: "yes" }],
        ["/v1/chat/completions", { model: MODEL }],
        ["/v1/chat/completions", { model: MODEL, messages: [] }],
        ["/v1/chat/completions", { model: MODEL, messages: [{ role: "user" }] }],
        ["/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }] }],
        ["/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: "x" }], tool_choice: "required", tools: [] }],
        ["/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content: "x" }], response_format: { type: "yaml" } }],
      ];
      for (const [p, body] of cases) {
        const direct = await request(long, "POST", p, body);
        const via = await request(gw, "POST", p, body, auth(key));
        const what = `${p} ${typeof body === "string" ? body : JSON.stringify(body).slice(0, 80)}`;
        assert.ok(direct.status >= 400, `the replica refuses ${what}`);
        assert.equal(via.status, direct.status, what);
        assert.equal(via.json.error.code, direct.json.error.code, what);
        assert.equal(via.json.error.param, direct.json.error.param, what);
        assert.equal(via.json.error.type, direct.json.error.type, what);
      }
      // Routes and methods.
      assert.equal((await request(gw, "GET", "/v1/completions", undefined, auth(key))).status, 405);
      assert.equal((await request(gw, "POST", "/v2/anything", {}, auth(key))).status, 404);
    });
  });
}
