#!/usr/bin/env bash
# `kvserve bench --url` end to end against a real `kvserve serve` with the
# bundled model: a YAML workload (input-length sweep, Poisson arrivals with a
# short/long mix, shared-prefix multi-turn chat), then the flag path, a
# failing check and bad input. The reports are checked from the outside by
# check_reports.py (figures recomputed from the per-request records, SVG
# parsed as XML, PASS/FAIL lines and exit code against the JSON).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
source "$here/serve_util.sh"
trap 'stop_servers; rm -rf "$dir"' EXIT
model="$KVSERVE_SOURCE_DIR/models/kvserve-tiny.gguf"
[ -f "$model" ] || { echo "FAIL: bundled model $model is missing"; exit 1; }

start_server srv --model "$model" --max-context-length 4096
wait_ready "$srv_URL" 60 || { echo "FAIL: server not ready"; cat "$dir/srv.log"; exit 1; }

cat >"$dir/workload.yaml" <<'EOF'
output_len: 8
slo: ["ttft:10s", "tpot:1s"]
runs:
  - name: sweep
    concurrency: 1
    input-lengths: 128:512
    num-requests: 3
  - name: load
    rate: 20
    num-requests: 12
    mix: {64: 0.7, 512: 0.3}
    probes: {recall: 0.2, malformed: 0.1}
  - name: chat
    multi-turn: {conversations: 2, turns: 3, system_tokens: 64}
    concurrency: 2
    input-len: 32
    probes: {recall: 0.5}
EOF
code=0
"$KVSERVE_BIN" bench --url "$srv_URL" --workload "$dir/workload.yaml" --metrics-interval 0.1 \
  --json "$dir/b.json" --html "$dir/b.html" --no-progress >"$dir/b.out" 2>"$dir/b.err" || code=$?
cat "$dir/b.out"
[ "$code" -le 1 ] || { echo "FAIL: bench exited $code"; cat "$dir/b.err"; exit 1; }
/usr/bin/python3 "$here/check_reports.py" bench "$dir/b.json" "$dir/b.html" "$dir/b.out" "$code" 5
# The sweep's lengths and the multi-turn cache use are in the report.
/usr/bin/python3 - "$dir/b.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
runs = {r["settings"]["name"]: r for r in j["runs"]}
sweep = [n for n in runs if n.startswith("sweep")]
assert len(sweep) == 3, sweep
series = j["ttft_vs_input_length"]
assert any([p["input_tokens"] for p in s["points"]] == [128, 256, 512] for s in series), series
chat = [r for n, r in runs.items() if n.startswith("chat")][0]
turns = sorted((q["conversation"], q["turn"], q["prompt_tokens"]) for q in chat["requests"])
for (c0, t0, p0), (c1, t1, p1) in zip(turns, turns[1:]):
    if c0 == c1:
        assert p1 > p0, f"history did not grow: {turns}"
# Later turns reuse the shared prefix: the server reports cached tokens.
assert chat["figures"]["cached_share"] and chat["figures"]["cached_share"] > 0.2, chat["figures"]["cached_share"]
load = [r for n, r in runs.items() if n.startswith("load")][0]
assert load["settings"]["arrival"] == "poisson"
labels = [b["label"] for b in load["by_input_length"]]
assert set(labels) <= {"64", "512"} and len(labels) >= 1, labels
assert all(r["server_metrics"]["samples"] >= 2 for r in j["runs"]), "metrics not sampled"
# Runs never reuse each other's (or the warm-up's) prompts: no single-turn
# request finds more than one block (16 tokens) of its prompt in the cache.
for r in j["runs"]:
    if r["settings"]["multi_turn"]["conversations"] == 0:
        for q in r["requests"]:
            assert q["cached_tokens"] is None or q["cached_tokens"] <= 16, (r["settings"]["name"], q["index"], q["cached_tokens"], q["prompt_tokens"])
assert j["endpoint"]["tokenize"].startswith("/tokenize"), j["endpoint"]
print("workload checks ok")
PY

# Flags instead of a file; a check forced to fail gives exit code 1.
code=0
"$KVSERVE_BIN" bench --url "$srv_URL/v1" -c 2 --input-lengths 64,128 --output-len 4 --num-requests 4 \
  --ttft-jump-max 0.001 --json "$dir/f.json" --html "$dir/f.html" --no-progress >"$dir/f.out" 2>"$dir/f.err" || code=$?
cat "$dir/f.out"
[ "$code" = 1 ] || { echo "FAIL: a failing check should exit 1, got $code"; cat "$dir/f.err"; exit 1; }
grep -q "^FAIL ttft_growth:" "$dir/f.out" || { echo "FAIL: no FAIL ttft_growth line"; exit 1; }
/usr/bin/python3 "$here/check_reports.py" bench "$dir/f.json" "$dir/f.html" "$dir/f.out" "$code" 2

# Bad input: clear messages, exit 2, no report.
expect_error() {
  local what=$1
  shift
  local c=0
  "$KVSERVE_BIN" bench "$@" >"$dir/e.out" 2>"$dir/e.err" || c=$?
  [ "$c" = 2 ] || { echo "FAIL: $what: exit $c (want 2)"; cat "$dir/e.err"; exit 1; }
  grep -q "$what" "$dir/e.err" || { echo "FAIL: message lacks '$what':"; cat "$dir/e.err"; exit 1; }
}
echo "concurency: 3" >"$dir/bad.yaml"
expect_error "concurency" --url "$srv_URL" --workload "$dir/bad.yaml"
expect_error "127.0.0.1:1" --url "http://127.0.0.1:1" --num-requests 1
expect_error "does not serve model 'nope'" --url "$srv_URL" --served-model-name nope
expect_error "do not fit" --url "$srv_URL" --input-len 4090 --output-len 64 --num-requests 1
expect_error "bad SLO" --url "$srv_URL" --slo "ttft<2s" --num-requests 1
expect_error "not both" --url "$srv_URL" -c 2 --rate 1
echo "1 passed, 0 failed"
