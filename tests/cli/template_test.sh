#!/usr/bin/env bash
# `kvserve template --explain`: the detected capabilities of a chat template,
# the polyfills that apply, then the prompt, for an OpenAI tool loop (content
# null, arguments as JSON text, a tool result). The bundled model's ChatML
# template lacks tool support; real templates from ../shared/templates (when
# present) need other polyfills.
set -euo pipefail
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
model="$KVSERVE_SOURCE_DIR/models/kvserve-tiny.gguf"
cat > "$dir/loop.json" <<'JSON'
{"messages": [{"role": "user", "content": "What is the weather?"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
    "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
  {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}],
 "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
 "add_generation_prompt": true}
JSON
passed=0
fail() { echo "FAIL: $1"; echo "--- output:"; cat "$dir/out"; exit 1; }
# Whole-text match (grep -F would take each line of a multi-line needle alone).
expect() {
  local text
  text=$(cat "$dir/out")
  [[ "$text" == *"$1"* ]] || fail "missing: $1"
}

# The bundled model: tool definitions and calls polyfilled, in Hermes syntax.
"$KVSERVE_BIN" template -m "$model" --messages "$dir/loop.json" --explain > "$dir/out" || fail "exit $?"
expect "  system role: yes"
expect "  tool definitions: no (polyfilled: listed in the system message with how to call them)"
expect "  assistant tool calls: no (polyfilled: written into the assistant's content)"
expect "  tool role: yes"
expect "tool-call syntax: hermes"
expect "polyfills for this template: tool-calls-as-text, tool-definitions-in-system"
expect "polyfills applied to this conversation: tool-calls-as-text, tool-definitions-in-system"
# The prompt follows "prompt:": the tool list in the system turn, the call as
# Hermes text in the assistant's turn, the result in a tool turn.
sed -n '/^prompt:$/,$p' "$dir/out" | tail -n +2 > "$dir/prompt"
head -c 31 "$dir/prompt" | grep -qF '<|bos|><|im_start|>system' || fail "prompt does not start with the system turn"
expect '{"type":"function","function":{"name":"get_weather","description":"Current weather"'
expect '<|im_start|>assistant'
expect $'<|im_start|>user\nWhat is the weather?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n<|im_start|>tool\nsunny<|im_end|>\n<|im_start|>assistant'
[ "$(tail -c 22 "$dir/prompt"; echo .)" = $'<|im_start|>assistant\n.' ] || fail "the prompt does not end with the generation prompt"
passed=$((passed + 1))

# Without the polyfills the template fails on content null: the issue's 400.
if "$KVSERVE_BIN" template -m "$model" --messages "$dir/loop.json" --no-polyfill > "$dir/out" 2>&1; then
  fail "--no-polyfill rendered content null"
fi
expect "Cannot perform operation + on null values"
passed=$((passed + 1))

# A plain conversation: no polyfill applies, the prompt is the template's own.
echo '[{"role": "user", "content": "Hi"}]' > "$dir/plain.json"
"$KVSERVE_BIN" template -m "$model" --messages "$dir/plain.json" --add-generation-prompt --explain > "$dir/out"
expect "polyfills applied to this conversation: none"
"$KVSERVE_BIN" template -m "$model" --messages "$dir/plain.json" --add-generation-prompt > "$dir/a"
"$KVSERVE_BIN" template -m "$model" --messages "$dir/plain.json" --add-generation-prompt --no-polyfill > "$dir/b"
cmp -s "$dir/a" "$dir/b" || fail "a plain chat changed"
passed=$((passed + 1))

templates="$KVSERVE_SHARED_DIR/templates"
if [ -d "$templates" ]; then
  # Qwen2.5 renders arguments|tojson: the API's JSON text is parsed, so the
  # prompt holds the object, not a doubly encoded string.
  "$KVSERVE_BIN" template --template "$templates/Qwen-Qwen2.5-7B-Instruct.jinja" --messages "$dir/loop.json" --explain > "$dir/out"
  expect "  tool call arguments: an object only (polyfilled: JSON text parsed)"
  expect "polyfills for this template: object-arguments"
  expect '{"name": "get_weather", "arguments": {"city": "Paris"}}'
  passed=$((passed + 1))
  # Mistral Small 3.2 raises on call ids that are not 9 alphanumerics.
  "$KVSERVE_BIN" template --template "$templates/Mistral-Small-3.2-24B-Instruct-2506.jinja" --messages "$dir/loop.json" --explain > "$dir/out"
  expect "  any tool call id: no (polyfilled: ids mapped to 9 alphanumerics)"
  expect "tool-call syntax: mistral"
  expect "polyfills applied to this conversation: object-arguments, call-ids"
  passed=$((passed + 1))
  # Phi-3.5 knows neither tools nor the tool role.
  "$KVSERVE_BIN" template --template "$templates/microsoft-Phi-3.5-mini-instruct.jinja" --messages "$dir/loop.json" --explain > "$dir/out"
  expect "polyfills for this template: tool-calls-as-text, tool-results-as-user, tool-definitions-in-system"
  expect $'<|user|>\nResult of the tool call get_weather (id call_1):\nsunny<|end|>'
  passed=$((passed + 1))
else
  echo "note: $templates is absent; the real-template cases are skipped"
fi
echo "$passed passed, 0 failed"
