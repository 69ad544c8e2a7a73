#!/usr/bin/env bash
# Serving side by side: `kvserve serve` and llama.cpp's llama-server on the same GGUF, one after the other, each
# under tools/serve_load.py (32 concurrent streaming clients, 1,000-token prompts of which 500 shared, 64 output
# tokens; cold, then the same prompts warm), 2 threads each. Prints both reports' lines and writes OUTDIR/*.json.
# Usage: scripts/serve_side_by_side.sh KVSERVE LLAMA_SERVER MODEL.gguf [OUTDIR] [extra serve_load.py flags]
# Example: scripts/serve_side_by_side.sh build/release/src/cli/kvserve ~/kvserve-ref/llama.cpp/build/bin/llama-server \
#            ~/kvserve-ref/models/rand-llama-S-Q8_0.gguf /tmp/serve
set -euo pipefail
KV=${1:?usage: serve_side_by_side.sh KVSERVE LLAMA_SERVER MODEL [OUTDIR]}
LS=${2:?llama-server path}
MODEL=${3:?model path}
OUT=${4:-/tmp/kvserve-serve-side-by-side}
shift $(( $# < 4 ? $# : 4 ))
HERE=$(cd "$(dirname "$0")/.." && pwd)
PY=/usr/bin/python3
PORT_KV=${PORT_KV:-18431}
PORT_LS=${PORT_LS:-18432}
mkdir -p "$OUT"

wait_ready() {  # URL PID
  for _ in $(seq 1 600); do
    if ! kill -0 "$2" 2>/dev/null; then echo "server exited during start-up" >&2; return 1; fi
    if curl -sf "$1" >/dev/null 2>&1; then return 0; fi
    sleep 0.5
  done
  echo "server not ready after 300 s" >&2
  return 1
}

SERVER_PID=
trap 'if [[ -n $SERVER_PID ]]; then kill $SERVER_PID 2>/dev/null || true; fi' EXIT

run_one() {  # LABEL PORT READY_PATH -- command...
  local label=$1 port=$2 ready=$3
  shift 4
  "$@" >"$OUT/$label.log" 2>&1 &
  local pid=$!
  SERVER_PID=$pid
  wait_ready "http://127.0.0.1:$port$ready" "$pid"
  $PY "$HERE/tools/serve_load.py" --url "http://127.0.0.1:$port" --pid "$pid" --label "$label" \
    --json "$OUT/$label.json" "${EXTRA[@]}" || echo "$label: some requests failed (see $OUT/$label.json)"
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  SERVER_PID=
}

EXTRA=("$@")
echo "# $(date -u '+%F %T') UTC, load: $(cut -d' ' -f1-3 /proc/loadavg)"
run_one kvserve "$PORT_KV" /ready -- "$KV" serve --model "$MODEL" --port "$PORT_KV" --threads 2
run_one llama-server "$PORT_LS" /health -- "$LS" -m "$MODEL" -c 16384 -np 8 -t 2 --port "$PORT_LS"
echo "# done $(date -u '+%F %T') UTC, load: $(cut -d' ' -f1-3 /proc/loadavg); reports in $OUT"
