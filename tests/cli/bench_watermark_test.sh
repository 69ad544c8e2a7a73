#!/usr/bin/env bash
# `kvserve bench --url` checks the KV watermark and memory the way a go-live
# needs, end to end against a real `kvserve serve` (bundled model) whose KV
# pool holds 64 blocks (1,024 tokens), directly and through a real
# `kvserve gateway`:
#   * one request of 700 tokens at concurrency 1 finishes between two
#     /metrics samples; the server's per-step peak gauge still shows it
#     (~69 %), so a 50 % limit FAILS (exit 1), from the peak gauge;
#   * the memory check compares the server's RSS with its memory plan;
#   * through the gateway without --replica-metrics the watermark check
#     FAILS naming the flag (the gateway's public port has no replica
#     peaks), not a silent skip; with it, a 900-token request's peak is read
#     from the replica's gauge and a 95 % limit passes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_util.sh"
bundled_model_test

# The memory limit whose pool is 64 blocks, from the planner.
limit=$("$KVSERVE_BIN" plan --model "$model" --context 1024 --concurrency 4 --max-batch-size 4 --threads 2 \
  --device cpu:4GiB --json | /usr/bin/python3 -c '
import json, sys
p = json.load(sys.stdin)
print(p["weights_bytes"] + p["activation_bytes"] + p["overhead_bytes"] + 64 * p["kv_bytes_per_block"] + 1024)')
start_server wm --model "$model" --max-context-length 1024 --max-concurrent-requests 4 --max-batch-size 4 \
  --prefix-caching false --kv_cache.memory_fraction 1 --kv_cache.memory_limit_bytes "$limit"
wait_ready "$wm_URL" 60 || fail "server not ready"
curl -fsS "$wm_URL/metrics" | grep '^kvserve:kv_cache_blocks 64$' >/dev/null || fail "the pool is not the 64 blocks the test sized"

bench() {  # NAME ARGS...: exit code in $code
  local name=$1
  shift
  code=0
  "$KVSERVE_BIN" bench "$@" --warmup 0 --output-len 8 --num-requests 1 -c 1 --metrics-interval 0.5 \
    --json "$dir/$name.json" --no-progress >"$dir/$name.out" 2>"$dir/$name.err" || code=$?
}
field() {  # NAME PYTHON-EXPRESSION over the report j
  /usr/bin/python3 -c "import json, sys; j = json.load(open(sys.argv[1])); print($2)" "$dir/$1.json"
}

# 1. A peak the samples miss, caught by the gauge: FAIL at 50 %.
bench direct --url "$wm_URL" --input-len 700 --kv-watermark-max 0.5
cat "$dir/direct.out"
[ "$code" = 1 ] || fail "a watermark over its limit must exit 1 (got $code)"
grep -q "^FAIL kv_watermark: peak KV cache use .* > 50.0 % .*the server's per-step peak gauge" "$dir/direct.out" ||
  fail "no FAIL kv_watermark line from the peak gauge"
[ "$(field direct 'j["runs"][0]["server_metrics"]["kv_usage_peak_from"]')" = "peak gauge" ] || fail "JSON: not from the gauge"
peak=$(field direct 'j["runs"][0]["server_metrics"]["kv_usage_peak"]')
/usr/bin/python3 -c "import sys; p = float(sys.argv[1]); assert 0.6 < p < 0.8, p" "$peak" || fail "peak $peak, expected ~0.69 (44 of 64 blocks)"
# The memory check: RSS within the plan.
grep -q "^PASS memory: peak resident memory .* of the memory plan" "$dir/direct.out" || fail "no PASS memory line"
ratio=$(field direct 'j["runs"][0]["server_metrics"]["memory_ratio_peak"]')
/usr/bin/python3 -c "import sys; r = float(sys.argv[1]); assert 0 < r < 1, r" "$ratio" || fail "memory ratio $ratio"

# 2. Through a gateway.
cat >"$dir/gateway.yaml" <<YAML
gateway: {host: 127.0.0.1, port: 0, admin_port: 0, allow_anonymous: true, health_interval_seconds: 0.2}
model: {path: "$model"}
logging: {audit_log: "off"}
pools:
  - {name: main, max_context: 1024, replicas: [{url: "$wm_URL"}]}
YAML
"$KVSERVE_BIN" gateway --config "$dir/gateway.yaml" >"$dir/gw.out" 2>"$dir/gw.log" &
started_pids+=("$!")
gw=""
for _ in $(seq 100); do
  gw=$(sed -n 's/.*\] listening on \(http:\/\/[0-9.:]*\).*/\1/p' "$dir/gw.log" | head -1)
  [ -n "$gw" ] && [ "$(http_status "$gw" /ready)" = 200 ] && break
  sleep 0.1
done
[ -n "$gw" ] && [ "$(http_status "$gw" /ready)" = 200 ] || fail "the gateway did not start: $(cat "$dir/gw.log")"
bench nometrics --url "$gw" --input-len 100 --kv-watermark-max 0.95
cat "$dir/nometrics.out"
[ "$code" = 1 ] || fail "through the gateway without replica metrics the watermark check must fail (exit $code)"
grep -q "^FAIL kv_watermark: .*--replica-metrics" "$dir/nometrics.out" || fail "the failure does not name --replica-metrics"
grep -q "(kvserve gateway)" "$dir/nometrics.err" || fail "the endpoint is not recognised as a gateway"
bench replicas --url "$gw" --replica-metrics "$wm_URL" --input-len 900 --kv-watermark-max 0.95
cat "$dir/replicas.out"
[ "$code" = 0 ] || fail "through the gateway with --replica-metrics: exit $code"
[ "$(field replicas 'j["runs"][0]["server_metrics"]["kv_usage_peak_from"]')" = "peak gauge" ] || fail "JSON: not from the gauge"
peak=$(field replicas 'j["runs"][0]["server_metrics"]["kv_usage_peak"]')
/usr/bin/python3 -c "import sys; p = float(sys.argv[1]); assert 0.8 < p <= 0.95, p" "$peak" || fail "peak $peak, expected ~0.89 (57 of 64 blocks)"
grep -q -- "--replica-metrics $wm_URL" <(field replicas 'j["command"]') || fail "the command line in the report lacks --replica-metrics"
expect2() {  # WHAT ARGS...
  local what=$1 c=0
  shift
  "$KVSERVE_BIN" bench "$@" >"$dir/e.out" 2>"$dir/e.err" || c=$?
  [ "$c" = 2 ] && grep -q -- "$what" "$dir/e.err" || fail "$what: exit $c: $(cat "$dir/e.err")"
}
expect2 "127.0.0.1:1" --url "$gw" --replica-metrics http://127.0.0.1:1 --num-requests 1
echo "1 passed, 0 failed"
