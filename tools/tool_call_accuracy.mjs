#!/usr/bin/env node
// Tool-call accuracy of a served model: with `tool_choice: "auto"` and no
// grammar (the model is free to call or not), what fraction of the model's
// attempts at a tool call parse into `tool_calls`. A reply counts as
//   - a call:        message.tool_calls is non-empty (the server parsed it);
//   - a failed call: no tool_calls, but the content shows a call attempt (a
//                    tool-call marker of any family, or a JSON object naming
//                    one of the tools): the server could not parse it;
//   - text:          anything else.
// accuracy = calls / (calls + failed calls); "n/a" when the model never tried.
// Calls whose arguments are not valid JSON, or name no offered tool, are
// counted apart (parsed but wrong).
//
// Usage: node tools/tool_call_accuracy.mjs --url http://127.0.0.1:8000 [--key KEY] [--model ID]
//          [--n 50] [--max-tokens 96] [--temperature 0.8] [--json OUT.json]
// Prints a table; exits 0 whatever the accuracy (it is a measurement).
import { writeFileSync } from "node:fs";

const args = Object.fromEntries(
  process.argv.slice(2).reduce((acc, a, i, all) => (a.startsWith("--") ? [...acc, [a.slice(2), all[i + 1]]] : acc), []),
);
const url = (args.url || "http://127.0.0.1:8000").replace(/\/$/, "");
const key = args.key || "none";
const n = Number(args.n || 50);
const maxTokens = Number(args["max-tokens"] || 96);
const temperature = Number(args.temperature ?? 0.8);

const TOOLS = [
  { name: "get_weather", description: "The current weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } },
  { name: "get_time", description: "The current time in a time zone", parameters: { type: "object", properties: { zone: { type: "string" } }, required: ["zone"] } },
  { name: "add", description: "Adds two numbers", parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] } },
];
const PROMPTS = [
  "What is the weather in Oslo?",
  "What time is it in UTC?",
  "What is 17 plus 25?",
  "Is it raining in Paris right now?",
  "Tell me a short story about a cat.",
  "Use a tool to find the time in CET.",
  "Add 3 and 4 for me.",
  "What color is the sky?",
];
// Markers of a call attempt across the families the server knows.
const MARKERS = ["<tool_call>", "[TOOL_CALLS]", "<|python_tag|>", "<function=", "tool▁calls", "<|tool_call", "<TOOLCALL>",
  "<|START_ACTION|>", "<invoke", "<seed:tool_call>", "to=functions."];

async function post(path, body) {
  const r = await fetch(url + path, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${path}: ${r.status} ${text}`);
  return JSON.parse(text);
}

async function main() {
  let model = args.model;
  if (!model) {
    const r = await fetch(`${url}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
    model = (await r.json()).data[0].id;
  }
  const counts = { requests: 0, calls: 0, wrong_calls: 0, failed_calls: 0, text: 0 };
  const examples = { failed: [], wrong: [] };
  const names = new Set(TOOLS.map((t) => t.name));
  for (let i = 0; i < n; ++i) {
    const res = await post("/v1/chat/completions", {
      model,
      messages: [{ role: "user", content: PROMPTS[i % PROMPTS.length] }],
      tools: TOOLS.map((f) => ({ type: "function", function: f })),
      tool_choice: "auto",
      max_tokens: maxTokens,
      temperature,
      seed: 1000 + i,
    });
    ++counts.requests;
    const m = res.choices[0].message;
    if (m.tool_calls && m.tool_calls.length) {
      const ok = m.tool_calls.every((c) => {
        if (!names.has(c.function.name)) return false;
        try {
          return typeof JSON.parse(c.function.arguments) === "object";
        } catch {
          return false;
        }
      });
      if (ok) ++counts.calls;
      else {
        ++counts.wrong_calls;
        if (examples.wrong.length < 3) examples.wrong.push(m.tool_calls);
      }
      continue;
    }
    const text = m.content || "";
    const attempt = MARKERS.some((k) => text.includes(k)) || [...names].some((t) => text.includes(`"${t}"`));
    if (attempt) {
      ++counts.failed_calls;
      if (examples.failed.length < 3) examples.failed.push(text.slice(0, 300));
    } else {
      ++counts.text;
    }
  }
  const tried = counts.calls + counts.wrong_calls + counts.failed_calls;
  const report = {
    url, model, n, max_tokens: maxTokens, temperature, ...counts,
    attempted: tried,
    parse_rate: tried ? (counts.calls + counts.wrong_calls) / tried : null,
    accuracy: tried ? counts.calls / tried : null,
    examples,
  };
  const pct = (x) => (x === null ? "n/a (no call attempted)" : `${(100 * x).toFixed(1)} %`);
  console.log(`model ${model} at ${url}: ${n} requests, tool_choice auto, temperature ${temperature}, max_tokens ${maxTokens}`);
  console.log(`  calls parsed and valid   ${counts.calls}`);
  console.log(`  parsed but wrong         ${counts.wrong_calls} (unknown tool or arguments not a JSON object)`);
  console.log(`  attempts that failed     ${counts.failed_calls} (a call's marker or JSON in the text, not parsed)`);
  console.log(`  plain text               ${counts.text}`);
  console.log(`  parse rate of attempts   ${pct(report.parse_rate)}`);
  console.log(`  accuracy of attempts     ${pct(report.accuracy)}`);
  if (args.json) writeFileSync(args.json, JSON.stringify(report, null, 2) + "\n");
}

main().catch((e) => {
  console.error(e.message);
  process.exit(2);
});
