#!/usr/bin/env bash
# Realistic inputs for `kvserve bench`, end to end against a real
# `kvserve serve` (bundled model) and through a real `kvserve gateway`:
#   * --dataset with the project's synthetic ShareGPT file
#     (tools/make_sharegpt.py): each request sends its entry's first human
#     turn as it is (the server's prompt_tokens equal the tool's count) and
#     asks for as many tokens as the recorded reply has; the entry without
#     a human turn is skipped; --percentiles adds p95 / p99.9 to every
#     summary, recomputed here from the request records, with mean and
#     stddev;
#   * a timed trace (JSON Lines: timestamp, input_length, output_length) is
#     replayed at its own times with exact prompt lengths;
#   * --rate with --burstiness and --ramp-up plans gamma arrivals whose
#     rate rises from 0.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_util.sh"
bundled_model_test
data="$KVSERVE_SOURCE_DIR/tests/cli/data/sharegpt_small.json"

# Admission (32) above any run's requests in flight: the trace's 12 arrive
# within 0.65 s, and a sanitizer build under load may finish none of them by
# then (with 8, the 12th was refused with a 429); four run at a time.
start_server srv --model "$model" --max-context-length 2048 --max-concurrent-requests 32 --max-batch-size 4
wait_ready "$srv_URL" 60 || fail "server not ready"
one_replica_gateway gw "$srv_URL" 2048

# Resident memory under ASan is no measure of the server's (its shadow and
# quarantine): the memory check is the watermark test's, in Release.
mem=()
[ -n "${KVSERVE_SANITIZED:-}" ] && mem=(--memory-ratio-max 16)
bench() {  # NAME ARGS...
  local name=$1
  shift
  code=0
  "$KVSERVE_BIN" bench "$@" "${mem[@]}" --warmup 0 --seed 5 --json "$dir/$name.json" --no-progress >"$dir/$name.out" \
    2>"$dir/$name.err" || code=$?
  [ "$code" = 0 ] || fail "$name: exit $code"
}

# Under the sanitizers the first 8 entries (--num-requests takes them in order;
# each asks for its recorded reply's length, slow to decode under ASan).
subset=()
[ -n "${KVSERVE_SANITIZED:-}" ] && subset=(--num-requests 8)
export KVSERVE_SUBSET=${#subset[@]}
for target in srv gw; do
  url_var="${target}_URL"
  bench "sharegpt_$target" --url "${!url_var}" --replica-metrics "$srv_URL" --dataset "$data" -c 4 --percentiles 95,99.9 \
    "${subset[@]}"
  cat "$dir/sharegpt_$target.out"
  /usr/bin/python3 - "$dir/sharegpt_$target.json" "$data" <<'PY' || fail "$target: the dataset run's report"
import json, sys
j = json.load(open(sys.argv[1]))
data = json.load(open(sys.argv[2]))
usable = [d for d in data if any(t["from"] == "human" for t in d["conversations"])]
run = j["runs"][0]
reqs = run["requests"]
assert run["settings"]["dataset"].endswith("sharegpt_small.json"), run["settings"]
import os
want = 8 if os.environ.get("KVSERVE_SUBSET", "0") != "0" else len(usable)
assert len(reqs) == want, (len(reqs), want)
for q in reqs:
    assert q["ok"], q
    assert q["prompt_tokens"] == q["input_tokens"], q            # the prompt sent as it is, counted exactly
    assert q["completion_tokens"] == q["max_tokens"], q          # ignore_eos: the recorded reply's length
lens = sorted({q["max_tokens"] for q in reqs})
assert len(lens) > want // 4, lens                               # answer lengths from the replies, not one value
f = run["figures"]
def pct(v, p):
    v = sorted(v); k = (len(v) - 1) * p / 100; lo = int(k); hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)
ttft = [q["ttft"] for q in reqs]
for p in (95, 99.9):
    got = f["ttft"][f"p{p:g}"]
    assert abs(got - pct(ttft, p)) < 1e-9, (p, got, pct(ttft, p))
mean = sum(ttft) / len(ttft)
sd = (sum((x - mean) ** 2 for x in ttft) / (len(ttft) - 1)) ** 0.5
assert abs(f["ttft"]["mean"] - mean) < 1e-9 and abs(f["ttft"]["stddev"] - sd) < 1e-9, (f["ttft"], mean, sd)
print("dataset report ok:", len(reqs), "requests,", len(lens), "answer lengths")
PY
  grep -q "^  p95: TTFT" "$dir/sharegpt_$target.out" || fail "$target: no p95 line"
  grep -q "^  mean +- stddev: TTFT" "$dir/sharegpt_$target.out" || fail "$target: no mean +- stddev line"
done

# A timed trace: its own arrival times and lengths.
/usr/bin/python3 -c '
import json
for i in range(12):
    print(json.dumps({"timestamp": 100 + 0.05 * i + (0.4 if i >= 6 else 0), "input_length": 40 + 15 * i, "output_length": 4 + i}))
' >"$dir/trace.jsonl"
bench trace --url "$srv_URL" --dataset "$dir/trace.jsonl"
/usr/bin/python3 - "$dir/trace.json" <<'PY' || fail "the trace run's report"
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
assert run["settings"]["arrival"] == "trace", run["settings"]
for i, q in enumerate(run["requests"]):
    want = 0.05 * i + (0.4 if i >= 6 else 0)
    assert abs(q["scheduled"] - want) < 1e-6, (i, q["scheduled"], want)   # the plan is the trace
    assert q["sent"] >= q["scheduled"] - 1e-3, q                           # never early
    assert q["prompt_tokens"] == 40 + 15 * i and q["completion_tokens"] == 4 + i, q
print("trace report ok")
PY

# Gamma arrivals with a ramp-up: the plan (seeded) is what was sent.
bench ramp --url "$srv_URL" --rate 50 --burstiness 0.5 --ramp-up 2 --num-requests 80 --input-len 32 --output-len 2 \
  --input-stddev 8
/usr/bin/python3 - "$dir/ramp.json" <<'PY' || fail "the ramp-up run's report"
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
s = run["settings"]
assert s["burstiness"] == 0.5 and s["ramp_up_seconds"] == 2, s
t = [q["scheduled"] for q in run["requests"]]
assert t == sorted(t), "arrivals out of order"
# Lambda(t) = rate t^2 / 4 in the first 2 s: about 50 arrivals there at most
# (25 expected), the rest after.
first = sum(1 for x in t if x < 1)
assert first < sum(1 for x in t if 1 <= x < 2), (first, t[:30])
ins = [q["prompt_tokens"] for q in run["requests"]]
assert len(set(ins)) > 5, ins                                               # lengths drawn, not one value
print("ramp-up report ok")
PY
echo "1 passed, 0 failed"
