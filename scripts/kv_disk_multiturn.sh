#!/usr/bin/env bash
# Issue 37's multi-turn workload for the disk KV tier: conversations whose
# histories grow turn by turn, all of them in flight at once (`kvserve bench
# --url --multi-turn CONVS:TURNS:SYSTEM -c CONVS`), so that between two turns
# of one conversation every other conversation runs a turn, and the working
# set (every history) is several times the RAM KV pool. One row per case:
#   ram-only      kvserve serve, RAM prefix cache only
#   disk          kvserve serve --kv-disk-path (write-through, restore on a hit)
#   disk-restart  the same directory after a restart, RAM empty: the first
#                 turns find the histories of the previous run on disk
#   llama-server  llama-server (LLAMA_SERVER, when set) with the same RAM for
#                 KV: its host-RAM prompt cache (--cache-ram, default 8 GiB)
#                 on and off; it saves slots to files only when asked by API
#                 (--slot-save-path), which a load test does not do.
# Each row: TTFT p50/p90, output tokens/s, prompt tokens served from the
# cache (usage.cached_tokens: RAM and disk together; by tier from the
# server's counters). Every case gets a fresh server, the same seed (the
# same conversations) and the same KV pool in RAM. ONLY_LLAMA=1: the
# llama-server rows alone.
#   scripts/kv_disk_multiturn.sh [MODEL] [CONVS:TURNS:SYSTEM] [INPUT_LEN] [OUTPUT_LEN]
# Defaults: the bundled model, 24:6:512, 256, 16. RAM pool: CONTEXT (4096)
# x 2 sequences' tokens. KVSERVE_BIN, THREADS (2), CONTEXT, LLAMA_SERVER.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${KVSERVE_BIN:-$src/build/release/src/cli/kvserve}
model=${1:-$src/models/kvserve-tiny.gguf}
multi=${2:-24:6:512}
input_len=${3:-256}
output_len=${4:-16}
threads=${THREADS:-2}
context=${CONTEXT:-4096}  # per sequence; two sequences of RAM KV
convs=${multi%%:*}
dir=$(mktemp -d)
pid=""
trap '[ -z "$pid" ] || kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT

stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
wait_url() {  # LOG: sets url from kvserve's "listening on" line, waits for /ready
  url=""
  for _ in $(seq 600); do
    url=$(sed -n 's/.*listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$1" | head -1)
    if [ -n "$url" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/ready")" = 200 ]; then return 0; fi
    sleep 0.1
  done
  echo "server did not start:" >&2
  tail -20 "$1" >&2
  exit 1
}
# The server admits every conversation's turn (--max-concurrent-requests
# 64), runs two at a time (--max-batch-size 2), and its KV pool holds
# 2 x CONTEXT tokens: --memory-limit is set so that the memory plan leaves
# exactly that for KV (a probe start reads the plan's other accounts).
common=(--max-context-length "$context" --max-concurrent-requests 64 --max-batch-size 2)
memory_limit() {
  "$bin" serve --host 127.0.0.1 --port 0 --access-log off --threads "$threads" --model "$model" "${common[@]}" \
    --memory-limit 4294967296 >/dev/null 2>"$dir/probe.log" &
  pid=$!
  wait_url "$dir/probe.log"
  stop
  /usr/bin/python3 - "$dir/probe.log" "$context" <<'PY'
import re, sys
log, context = open(sys.argv[1]).read(), int(sys.argv[2])
unit = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
def size(name):
    m = re.search(name + r" ([0-9.]+) (B|KiB|MiB|GiB)", log)
    return float(m.group(1)) * unit[m.group(2)]
frac = float(re.search(r"x memory_fraction ([0-9.]+)", log).group(1))
block = re.search(r"blocks of ([0-9.]+) (B|KiB|MiB|GiB)", log)
block_bytes = float(block.group(1)) * unit[block.group(2)]
bs = int(re.search(r"KV blocks of ([0-9]+) tokens", log).group(1))
kv = (2 * context // bs + 0.5) * block_bytes
print(int((size("weights") + size("activations") + size("overhead") + kv) / frac))
PY
}
limit=$(memory_limit)
serve() {  # EXTRA ARGS...
  "$bin" serve --host 127.0.0.1 --port 0 --access-log off --threads "$threads" --model "$model" "${common[@]}" \
    --memory-limit "$limit" "$@" >/dev/null 2>"$dir/log" &
  pid=$!
  wait_url "$dir/log"
  pool=$(sed -n 's/.*engine: \([0-9]*\) KV blocks of \([0-9]*\) tokens.*/\1 x \2/p' "$dir/log" | head -1)
}
llama() {  # EXTRA ARGS...
  local port
  port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  "$LLAMA_SERVER" -m "$model" --host 127.0.0.1 --port "$port" -t "$threads" -c $((2 * context)) -np 2 "$@" >"$dir/log" 2>&1 &
  pid=$!
  url="http://127.0.0.1:$port"
  for _ in $(seq 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/health")" = 200 ] && return 0
    sleep 0.1
  done
  echo "llama-server did not start:" >&2
  tail -20 "$dir/log" >&2
  exit 1
}
metric() { { curl -fsS "$url/metrics" 2>/dev/null || true; } | awk -v k="$1" '$1 == k { v = $2 } END { print v + 0 }'; }
bench() {  # NAME: one run of the workload against $url; prints its row
  local name=$1 ram0 disk0
  ram0=$(metric 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="ram"}')
  disk0=$(metric 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}')
  "$bin" bench --url "$url" --api chat --tokenizer "$model" --multi-turn "$multi" -c "$convs" \
    --input-len "$input_len" --output-len "$output_len" --seed 37 --no-progress --metrics-interval 0 \
    --json "$dir/$name.json" >"$dir/$name.txt" 2>&1 || { cat "$dir/$name.txt" >&2; exit 1; }
  local ram disk
  ram=$(( $(metric 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="ram"}') - ram0 ))
  disk=$(( $(metric 'kvserve:prefix_cache_hit_tokens_by_tier_total{tier="disk"}') - disk0 ))
  /usr/bin/python3 - "$dir/$name.json" "$name" "$ram" "$disk" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
f = j["runs"][0]["figures"]
name, ram, disk = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
tiers = "n/a" if name.startswith("llama") else f"{ram:,} / {disk:,}"
share = f["cached_share"]
print(f"| {name} | {f['ok']}/{f['planned']} | {f['prompt_tokens']:,} | "
      f"{'n/a' if share is None else f'{100 * share:.1f} %'} | {tiers} | "
      f"{f['ttft']['p50']:.3f} s | {f['ttft']['p90']:.3f} s | {f['output_token_throughput']:.1f} |")
PY
}

if [ -z "${ONLY_LLAMA:-}" ]; then
serve
stop
echo "workload: --multi-turn $multi -c $convs --input-len $input_len --output-len $output_len, seed 37, $(basename "$model"); RAM KV pool: $pool tokens (--memory-limit $limit)"
echo "| case | requests ok | prompt tokens | cached (usage) | RAM / disk hit tokens | TTFT p50 | TTFT p90 | output tok/s |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
serve
bench ram-only
stop
serve --kv-disk-path "$dir/disk"
bench disk
stop
serve --kv-disk-path "$dir/disk"
bench disk-restart
echo "(disk: $(du -sh "$dir/disk" | cut -f1) in $(find "$dir/disk" -name '*.kvb' | wc -l) block files)"
stop
fi
if [ -n "${LLAMA_SERVER:-}" ]; then
  llama
  bench llama-server
  stop
  llama --cache-ram 0
  bench llama-server-no-cache-ram
  stop
fi
