// The gateway's context policies (issue 37, item 4; gateway/context_policy.h),
// on the served path: a real `kvserve serve` replica of the bundled model
// behind real `kvserve gateway` processes whose one pool has a short context
// (320 tokens) and each its own on_overflow / clean_content:
//   * reject: an over-long chat gets 400 context_length_exceeded (and says
//     how long the prompt is: the full count the other tests compare with);
//   * truncate_oldest_turns: a long conversation is answered (200) with the
//     system message and the latest turns kept and the oldest dropped, in
//     Chat Completions (whole and streamed) and in Anthropic's Messages; the
//     answer carries X-Kvserve-Truncated-Prompt-Tokens and
//     usage.truncated_prompt_tokens, equal to the full count minus what the
//     replica counted, and the replica's prompt fits the budget; one giant
//     latest turn is refused with a message saying why;
//   * truncate_middle: a long Completions prompt and a long chat message keep
//     their head and tail, lose their middle, and fit;
//   * clean_content: a message with zero-width, bidi and tag characters costs
//     exactly the tokens of the same text without them, and the gateway
//     counts the characters it removed;
//   * every truncation is counted in the gateway's metrics and audit log.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import {
  auditLine, bundled, metricSum, parseSse, request, requireBinary, skipFile, startGateway, startReplica,
} from "./common.mjs";

requireBinary();
const modelPath = bundled();
if (!modelPath) skipFile("models/kvserve-tiny.gguf is not present");

const MODEL = "kvserve-tiny";
const CONTEXT = 320;
const MAX_TOKENS = 8;
const BUDGET = CONTEXT - MAX_TOKENS;  // prompt tokens a request with max_tokens 8 may have

const cleanup = [];
after(async () => {
  for (const c of cleanup.reverse()) await c();
});

const SYSTEM = "You are a careful storyteller who remembers the color of every ball.";
// Turn i of a long conversation: each user turn ~30 tokens, each answer ~20.
function conversation(turns, last = "What color was the first ball?") {
  const messages = [{ role: "system", content: SYSTEM }];
  for (let i = 0; i < turns; i++) {
    messages.push({ role: "user", content: `Turn ${i}: Tom found a ball in the park. It was round and bright and he played with it all day long.` });
    messages.push({ role: "assistant", content: `In turn ${i} Tom played with the ball until the sun went down.` });
  }
  messages.push({ role: "user", content: last });
  return messages;
}
const LONG_TEXT = (head, tail) =>
  `${head} ` + "Lily and Ben walked to the big tree by the river and sang a song about the sun. ".repeat(30) + ` ${tail}`;

describe("context policies at the gateway (bundled model)", () => {
  let replica, reject, turns, middle;
  before(async () => {
    replica = await startReplica({ model: modelPath, args: ["--max-context-length", "1024"] });
    cleanup.push(() => replica.stop());
    const gateway = (pool) =>
      startGateway({
        model: modelPath,
        gateway: { allow_anonymous: true },
        args: ["--logging.audit_prompts", "true"],
        pools: [{ name: "main", max_context: CONTEXT, default_max_tokens: MAX_TOKENS, replicas: [replica.baseURL], ...pool }],
      });
    reject = await gateway({});
    cleanup.push(() => reject.stop());
    turns = await gateway({ on_overflow: "truncate_oldest_turns", clean_content: true });
    cleanup.push(() => turns.stop());
    middle = await gateway({ on_overflow: "truncate_middle" });
    cleanup.push(() => middle.stop());
  });

  // The full prompt count of a body, from the reject gateway's 400.
  async function fullCount(path, body) {
    const r = await request(reject, "POST", path, body);
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.code, "context_length_exceeded", r.text);
    return r.json.error.prompt_tokens;
  }

  test("reject (the default) refuses an over-long conversation", async () => {
    const full = await fullCount("/v1/chat/completions", { model: MODEL, messages: conversation(12), max_tokens: MAX_TOKENS });
    assert.ok(full > CONTEXT, `the conversation is ${full} tokens`);
    assert.equal(await metricSum(reject, "kvserve_gateway:prompts_truncated_total"), 0);
  });

  test("truncate_oldest_turns keeps the system message and the latest turns, and says what it dropped", async () => {
    const body = { model: MODEL, messages: conversation(12), max_tokens: MAX_TOKENS, temperature: 0 };
    const full = await fullCount("/v1/chat/completions", body);
    const r = await request(turns, "POST", "/v1/chat/completions", body);
    assert.equal(r.status, 200, r.text);
    const dropped = Number(r.headers["x-kvserve-truncated-prompt-tokens"]);
    assert.ok(dropped > 0, JSON.stringify(r.headers));
    assert.equal(r.json.usage.truncated_prompt_tokens, dropped);
    // The replica counted what the gateway sent: the full prompt minus what was cut, within budget.
    assert.equal(r.json.usage.prompt_tokens, full - dropped);
    assert.ok(r.json.usage.prompt_tokens <= BUDGET, `${r.json.usage.prompt_tokens} > ${BUDGET}`);
    // The fewest turns dropped (whole user/assistant pairs): keeping one pair
    // more would not have fitted.
    const pair = full - (await fullCount("/v1/chat/completions", { ...body, messages: conversation(11) }));
    assert.ok(r.json.usage.prompt_tokens + pair > BUDGET, `${r.json.usage.prompt_tokens} kept, a pair is ${pair}`);
    const a = await auditLine(turns, (l) => l.truncated && l.status === 200);
    assert.match(a.truncated, /^prompt truncated \(truncate_oldest_turns\): \d+ -> \d+ tokens, \d+ messages dropped$/);
    assert.equal(a.truncated_prompt_tokens, dropped);
    assert.ok(a.prompt.includes(SYSTEM), "the system message was dropped");
    assert.ok(a.prompt.includes("What color was the first ball?"), "the latest turn was dropped");
    assert.ok(!a.prompt.includes("Turn 0:"), "the oldest turn was kept");
    assert.ok(a.prompt.includes("Turn 11:"), "the latest earlier turn was dropped");
    // The conversation starts with a user turn after the system message.
    assert.match(a.prompt, new RegExp(`${SYSTEM}[\\s\\S]*?Turn \\d+: Tom found`));
    assert.ok((await metricSum(turns, "kvserve_gateway:prompts_truncated_total", { policy: "truncate_oldest_turns" })) >= 1);
    assert.ok((await metricSum(turns, "kvserve_gateway:prompt_tokens_truncated_total")) >= dropped);
  });

  test("a truncated stream says so in its header and in its usage chunk", async () => {
    const body = {
      model: MODEL, messages: conversation(10), max_tokens: MAX_TOKENS, temperature: 0, stream: true,
      stream_options: { include_usage: true },
    };
    const r = await request(turns, "POST", "/v1/chat/completions", body);
    assert.equal(r.status, 200, r.text);
    const dropped = Number(r.headers["x-kvserve-truncated-prompt-tokens"]);
    assert.ok(dropped > 0);
    const usage = parseSse(r.text).map((e) => (e.data === "[DONE]" ? null : JSON.parse(e.data))).find((j) => j?.usage);
    assert.ok(usage, r.text);
    assert.equal(usage.usage.truncated_prompt_tokens, dropped);
    assert.ok(usage.usage.prompt_tokens <= BUDGET);
  });

  test("Anthropic's Messages: the oldest turns dropped, usage says how many tokens", async () => {
    const messages = conversation(12).slice(1);  // system is its own field here
    const body = { model: MODEL, system: SYSTEM, messages, max_tokens: MAX_TOKENS, temperature: 0 };
    const r = await request(turns, "POST", "/v1/messages", body);
    assert.equal(r.status, 200, r.text);
    const dropped = Number(r.headers["x-kvserve-truncated-prompt-tokens"]);
    assert.ok(dropped > 0);
    assert.equal(r.json.usage.truncated_prompt_tokens, dropped);
    assert.ok(r.json.usage.input_tokens + (r.json.usage.cache_read_input_tokens ?? 0) <= BUDGET, r.text);
  });

  test("OpenAI's Responses: the oldest input items dropped", async () => {
    const input = conversation(12).slice(1);
    const body = { model: MODEL, instructions: SYSTEM, input, max_output_tokens: MAX_TOKENS, temperature: 0 };
    const r = await request(turns, "POST", "/v1/responses", body);
    assert.equal(r.status, 200, r.text);
    const dropped = Number(r.headers["x-kvserve-truncated-prompt-tokens"]);
    assert.ok(dropped > 0);
    assert.equal(r.json.usage.truncated_prompt_tokens, dropped);
    assert.ok(r.json.usage.input_tokens <= BUDGET, r.text);
  });

  test("one latest turn longer than the context is refused, saying why", async () => {
    const messages = [{ role: "system", content: SYSTEM }, { role: "user", content: LONG_TEXT("Start.", "End.") }];
    const r = await request(turns, "POST", "/v1/chat/completions", { model: MODEL, messages, max_tokens: MAX_TOKENS });
    assert.equal(r.status, 400, r.text);
    assert.equal(r.json.error.code, "context_length_exceeded");
    assert.match(r.json.error.message, /latest user turn/);
  });

  test("truncate_middle keeps a long prompt's head and tail", async () => {
    const prompt = LONG_TEXT("Once upon a time there was a red fox named Pip.", "And that is why the fox smiled.");
    const body = { model: MODEL, prompt, max_tokens: MAX_TOKENS, temperature: 0 };
    const full = await fullCount("/v1/completions", body);
    const r = await request(middle, "POST", "/v1/completions", body);
    assert.equal(r.status, 200, r.text);
    const dropped = Number(r.headers["x-kvserve-truncated-prompt-tokens"]);
    assert.equal(r.json.usage.truncated_prompt_tokens, dropped);
    assert.equal(r.json.usage.prompt_tokens, full - dropped);
    assert.ok(r.json.usage.prompt_tokens <= BUDGET && r.json.usage.prompt_tokens > BUDGET - 8, JSON.stringify(r.json.usage));
    const a = await auditLine(middle, (l) => l.truncated && l.path === "/v1/completions");
    assert.ok(a.prompt.startsWith("Once upon a time there was a red fox named Pip."), a.prompt.slice(0, 80));
    assert.ok(a.prompt.endsWith("And that is why the fox smiled."), a.prompt.slice(-80));
    assert.ok(a.prompt.length < prompt.length);
    assert.ok(!a.prompt.includes("\uFFFD"), "a character was split");
  });

  test("truncate_middle cuts a prompt of token ids too", async () => {
    const tokens = (await request(replica, "POST", "/tokenize", { model: MODEL, prompt: LONG_TEXT("Start.", "End.") })).json.tokens;
    for (const prompt of [tokens, [tokens]]) {
      const r = await request(middle, "POST", "/v1/completions", { model: MODEL, prompt, max_tokens: MAX_TOKENS });
      assert.equal(r.status, 200, r.text);
      assert.ok(r.json.usage.truncated_prompt_tokens > 0 && r.json.usage.prompt_tokens <= BUDGET, JSON.stringify(r.json.usage));
    }
  });

  test("truncate_middle cuts the longest message of a chat, not the question", async () => {
    const messages = [
      { role: "system", content: SYSTEM },
      { role: "user", content: LONG_TEXT("Here is a story.", "That was the story.") },
      { role: "user", content: "Who walked to the tree?" },
    ];
    const r = await request(middle, "POST", "/v1/chat/completions", { model: MODEL, messages, max_tokens: MAX_TOKENS });
    assert.equal(r.status, 200, r.text);
    assert.ok(r.json.usage.truncated_prompt_tokens > 0 && r.json.usage.prompt_tokens <= BUDGET, JSON.stringify(r.json.usage));
    const a = await auditLine(middle, (l) => l.truncated && l.path === "/v1/chat/completions");
    for (const kept of [SYSTEM, "Here is a story.", "That was the story.", "Who walked to the tree?"]) {
      assert.ok(a.prompt.includes(kept), `"${kept}" was cut`);
    }
  });

  test("clean_content removes invisible characters before they cost a token", async () => {
    const ask = (gw, content) =>
      request(gw, "POST", "/v1/chat/completions", { model: MODEL, messages: [{ role: "user", content }], max_tokens: 1 });
    const plain = await ask(turns, "Hello world, tell me a story.");
    const hidden = await ask(turns, "Hel\u200Blo \u202Eworld,\u2060 tell\uFEFF me\u{E0041}\u{E0042} a story.\u0007");
    assert.equal(plain.status, 200, plain.text);
    assert.equal(hidden.status, 200, hidden.text);
    assert.equal(hidden.json.usage.prompt_tokens, plain.json.usage.prompt_tokens);
    assert.equal(hidden.headers["x-kvserve-truncated-prompt-tokens"], undefined);
    assert.equal(await metricSum(turns, "kvserve_gateway:content_cleaned_characters_total", { pool: "main" }), 7);
    // Without clean_content the same text costs more.
    const kept = await ask(middle, "Hel\u200Blo \u202Eworld,\u2060 tell\uFEFF me\u{E0041}\u{E0042} a story.\u0007");
    assert.ok(kept.json.usage.prompt_tokens > plain.json.usage.prompt_tokens, JSON.stringify(kept.json.usage));
  });
});
