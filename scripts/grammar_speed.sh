#!/usr/bin/env bash
# Decode tokens/s with vs without a JSON-schema constraint (response_format
# json_schema), on the same model, in one run of one `kvserve serve`
# (scripts/grammar_speed.mjs alternates the two kinds of request).
#   bash scripts/grammar_speed.sh                       # the bundled model, 6 rounds of 200 tokens
#   MODEL=path.gguf ROUNDS=10 MAX_TOKENS=400 THREADS=2 bash scripts/grammar_speed.sh
# Needs a Release build (build/release/src/cli/kvserve) and node.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=${MODEL:-models/kvserve-tiny.gguf}
ROUNDS=${ROUNDS:-6}
MAX_TOKENS=${MAX_TOKENS:-200}
THREADS=${THREADS:-1}
BIN=${KVSERVE_BIN:-build/release/src/cli/kvserve}
[ -x "$BIN" ] || { echo "error: $BIN is missing (cmake --build build/release --target kvserve)" >&2; exit 1; }
log=$(mktemp)
alog=$(mktemp)
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log" "$alog"' EXIT
"$BIN" serve --config configs/default.yaml --model "$MODEL" --port 0 --threads "$THREADS" --log-level info \
  --access-log "$alog" >/dev/null 2>"$log" &
pid=$!
port=""
for _ in $(seq 1 300); do
  port=$(sed -n 's/.*listening on http:\/\/[^:]*:\([0-9]*\).*/\1/p' "$log" | head -1)
  [ -n "$port" ] && curl -fs "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.2
done
[ -n "$port" ] || { echo "error: the server did not start" >&2; cat "$log" >&2; exit 1; }
echo "model $MODEL, $THREADS thread(s), $ROUNDS rounds x 2 modes, max_tokens $MAX_TOKENS, $(date -u +%FT%TZ)"
node scripts/grammar_speed.mjs "http://127.0.0.1:$port" "$alog" "$ROUNDS" "$MAX_TOKENS"
