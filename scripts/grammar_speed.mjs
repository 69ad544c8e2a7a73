// Decode speed with and without a JSON-schema constraint, same server, same
// run (scripts/grammar_speed.sh starts the server). Requests alternate
// between the two modes (response_format json_schema, then free text of the
// same length) so load on a shared machine hits both alike. Per request, from the server's access
// log: decode rate = (tokens - 1) / (duration - time to first token), so
// prefill and queueing are left out. Prints a Markdown table and one JSON line.
//   node scripts/grammar_speed.mjs BASE_URL ACCESS_LOG ROUNDS MAX_TOKENS
import { readFileSync } from "node:fs";

const [base, accessLog, roundsArg = "6", maxTokensArg = "200"] = process.argv.slice(2);
const rounds = Number(roundsArg);
const maxTokens = Number(maxTokensArg);

// A schema whose replies run long (6 to 8 records), so both modes decode
// many tokens; with MAX_TOKENS 300 a reply ends before the budget, so the
// figure is the mask's cost, not steering's (sampler.h).
const SCHEMA = {
  type: "object",
  properties: {
    people: {
      type: "array",
      minItems: 6,
      maxItems: 8,
      items: {
        type: "object",
        properties: { name: { type: "string", maxLength: 24 }, age: { type: "integer", minimum: 0, maximum: 120 } },
        required: ["name", "age"],
        additionalProperties: false,
      },
    },
  },
  required: ["people"],
  additionalProperties: false,
};

async function models() {
  const r = await fetch(`${base}/v1/models`);
  return (await r.json()).data[0].id;
}

async function run(model, constrained, seed, tokens = maxTokens) {
  const body = {
    model,
    messages: [{ role: "user", content: "List people with their ages as JSON." }],
    max_tokens: tokens,
    temperature: 1,
    seed,
  };
  if (constrained) body.response_format = { type: "json_schema", json_schema: { name: "people", schema: SCHEMA } };
  else body.ignore_eos = true;  // free text runs the whole budget
  const res = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${res.status}: ${await res.text()}`);
  const j = await res.json();
  return [j.id, j.usage.completion_tokens];
}

// The server's own timing of a request (access log): decode = end - first token.
function timing(id) {
  for (const line of readFileSync(accessLog, "utf8").split("\n")) {
    if (!line.includes(id)) continue;
    const r = JSON.parse(line);
    return { tokens: r.completion_tokens, seconds: (r.duration_ms - r.ttft_ms) / 1000, finish: r.finish_reason };
  }
  throw new Error(`request ${id} is not in ${accessLog}`);
}

const model = await models();
await run(model, false, 0);  // warm-up: caches, the compiled grammar
await run(model, true, 0);
// Each constrained reply is paired with a free one of the same length (same
// KV depth, so the same attention cost per step).
const ids = [];
for (let r = 0; r < rounds; ++r) {
  const [id, n] = await run(model, true, 1 + r);
  ids.push([true, id]);
  ids.push([false, (await run(model, false, 1 + r, n))[0]]);
}
await new Promise((resolve) => setTimeout(resolve, 300));  // the access log is written after the response
const acc = { free: [], json_schema: [] };
for (const [constrained, id] of ids) {
  const x = timing(id);
  if (x.tokens > 1 && x.seconds > 0) acc[constrained ? "json_schema" : "free"].push({ ...x, rate: (x.tokens - 1) / x.seconds });
}
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : NaN;
};
const summary = {};
for (const [mode, xs] of Object.entries(acc)) {
  const tokens = xs.reduce((a, x) => a + x.tokens - 1, 0);
  const seconds = xs.reduce((a, x) => a + x.seconds, 0);
  summary[mode] = {
    requests: xs.length,
    mean_tokens: xs.length ? tokens / xs.length + 1 : 0,
    median_tok_s: median(xs.map((x) => x.rate)),
    pooled_tok_s: tokens / seconds,
    finishes: xs.map((x) => x.finish).join(","),
  };
}
const slowdown = 1 - summary.json_schema.pooled_tok_s / summary.free.pooled_tok_s;
console.log("| mode | requests | mean tokens | decode t/s (median) | decode t/s (pooled) |");
console.log("| --- | --- | --- | --- | --- |");
for (const [mode, s] of Object.entries(summary)) {
  console.log(`| ${mode} | ${s.requests} | ${s.mean_tokens.toFixed(0)} | ${s.median_tok_s.toFixed(1)} | ${s.pooled_tok_s.toFixed(1)} |`);
}
console.log(`json_schema vs free (pooled): ${(slowdown * 100).toFixed(1)} % slower`);
console.log(JSON.stringify({ model, rounds, max_tokens: maxTokens, summary, slowdown }));
