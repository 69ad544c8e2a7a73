// The bundled model served end to end: `kvserve serve --config
// configs/default.yaml` with no model given serves models/kvserve-tiny.gguf,
// and a chat request (the official openai client, the model's own chat
// template applied by the server) with a pass key planted at 10 %, 50 % and
// 90 % depth of a 2,000-token context returns the key.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";

import { loadOpenAI, requireBinary, sourceDir, startServer } from "./common.mjs";

requireBinary();
const OpenAI = await loadOpenAI();

const cases = readFileSync(path.join(sourceDir, "models/kvserve-tiny.recall.jsonl"), "utf8")
  .split("\n")
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l))
  .filter((c) => c.format === "chat" && c.tokens === 2048);
assert.deepEqual(cases.map((c) => c.depth), [0.1, 0.5, 0.9], "the recall file has the 2K chat cases");

let server;
let client;

before(async () => {
  server = await startServer({
    fake: false,
    args: ["--config", path.join(sourceDir, "configs/default.yaml"), "--threads", "2"],
  });
  client = new OpenAI({ apiKey: "none", baseURL: `${server.baseURL}/v1`, maxRetries: 0 });
});

after(async () => {
  if (server) assert.equal((await server.stop()).code, 0);
});

test("with no model configured the bundled model is served", async () => {
  const models = await client.models.list();
  assert.equal(models.data.length, 1);
  assert.equal(models.data[0].id, "kvserve-tiny");
});

for (const c of cases) {
  test(`chat: pass key at ${c.depth * 100} % of a ${c.tokens}-token context`, async () => {
    const r = await client.chat.completions.create({
      model: "kvserve-tiny",
      messages: c.messages,
      temperature: 0,
      max_tokens: 16,
    });
    const reply = r.choices[0].message.content;
    assert.equal(reply, c.expected.replace(/<\|im_end\|>$/, ""));
    assert.ok(reply.includes(c.pass_key));
    assert.equal(r.choices[0].finish_reason, "stop");
    // The server's rendering and tokenization give the same prompt length
    // as the training script's (its count includes the BOS the template writes).
    assert.equal(r.usage.prompt_tokens, c.prompt_tokens);
  });
}

test("cache_salt: prefix KV is shared within a salt, never across salts", async () => {
  const c = cases[1];
  const ask = async (salt) => {
    const r = await client.chat.completions.create({
      model: "kvserve-tiny", messages: c.messages, temperature: 0, max_tokens: 16, cache_salt: salt,
    });
    assert.equal(r.choices[0].message.content, c.expected.replace(/<\|im_end\|>$/, ""));
    return r.usage.prompt_tokens_details.cached_tokens;
  };
  assert.equal(await ask("tenant-a"), 0, "the unsalted run above is not visible to tenant-a");
  const full = Math.floor((c.prompt_tokens - 1) / 16) * 16;
  assert.equal(await ask("tenant-a"), full, "tenant-a's second request reuses its full blocks");
  assert.equal(await ask("tenant-b"), 0, "tenant-b never sees tenant-a's KV");
});

test("priority must be an integer", async () => {
  await assert.rejects(
    client.chat.completions.create({ model: "kvserve-tiny", messages: [{ role: "user", content: "Hi" }], priority: "high" }),
    (e) => e.status === 400 && e.param === "priority");
});
