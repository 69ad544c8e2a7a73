#!/usr/bin/env bash
# `kvserve bench --probes` checks answers under load, end to end:
#   * against a real `kvserve serve` (bundled model, context 1024), recall,
#     json, over-length and malformed probes ride along an ordinary c=4
#     load: `answers` and `expected_errors` PASS, each probe is in the JSON
#     with its verdict, the latency figures leave the probes out;
#   * multi-turn recall: the fact stated in a conversation's first turn is
#     asked for in its last, through the history;
#   * the same probes through a real `kvserve gateway` in front of it;
#   * a wrong-answer endpoint (the real HTTP server over the test backend,
#     kvserve_fake, which answers every prompt with the same story) must
#     FAIL `answers` and exit 1, its misses named in the report.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/serve_util.sh"
bundled_model_test

start_server srv --model "$model" --max-context-length 1024 --max-concurrent-requests 8 --max-batch-size 4
wait_ready "$srv_URL" 60 || fail "server not ready"

# Resident memory under ASan is no measure of the server's (its shadow and
# quarantine): the memory check is the watermark test's, in Release.
mem=()
[ -n "${KVSERVE_SANITIZED:-}" ] && mem=(--memory-ratio-max 16)
bench() {  # NAME ARGS...: exit code in $code
  local name=$1
  shift
  code=0
  "$KVSERVE_BIN" bench "$@" "${mem[@]}" --warmup 0 --seed 7 --metrics-interval 0.5 --json "$dir/$name.json" --no-progress \
    >"$dir/$name.out" 2>"$dir/$name.err" || code=$?
}
check_json() {  # NAME: the probes in the JSON agree with the text
  /usr/bin/python3 - "$dir/$1.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
run = j["runs"][0]
probes = [r for r in run["requests"] if "probe" in r]
plain = [r for r in run["requests"] if "probe" not in r]
assert probes, "no probe requests in the JSON"
by_kind = {}
for r in probes:
    k = r["probe"]["kind"]
    v = r["probe"]["verdict"]
    by_kind.setdefault(k, [0, 0])
    by_kind[k][0] += 1
    by_kind[k][1] += v["ok"]
    if k in ("recall", "arithmetic"):
        assert r["probe"]["expected"].isdigit(), r
    if k in ("over_length", "malformed"):
        assert r["status"] == 400, r  # refused, as kvserve does
for t in run["probes"]:
    assert by_kind[t["kind"]] == [t["sent"], t["right"]], (t, by_kind)
    lo, hi = t["wilson_95"]
    assert lo <= t["share"] <= hi, t
# The figures count the ordinary requests only.
assert run["figures"]["planned"] == len(plain), (run["figures"]["planned"], len(plain))
checks = {c["name"]: c["status"] for c in j["checks"]}
print(json.dumps(by_kind), checks["answers"], checks["expected_errors"])
PY
}

# 1. Directly: every kind but arithmetic (the bundled model cannot add: it
#    would fail `answers` for the model's sake, not the server's).
# Under the sanitizers half the requests (the seed keeps every kind in).
n=48
[ -n "${KVSERVE_SANITIZED:-}" ] && n=24
bench direct --url "$srv_URL" --api chat -c 4 --num-requests "$n" --input-len 300 --output-len 8 \
  --probes recall:0.25,json:0.15,over-length:0.1,malformed:0.1
cat "$dir/direct.out"
[ "$code" = 0 ] || fail "direct run: exit $code"
grep -q "^PASS answers: .*recall [0-9]*/[0-9]* right" "$dir/direct.out" || fail "no PASS answers line with recall"
grep -q "^PASS answers: .*json [0-9]*/[0-9]* right" "$dir/direct.out" || fail "no json in the answers check"
grep -q "^PASS expected_errors: over_length [0-9]*/[0-9]* right .*malformed" "$dir/direct.out" ||
  fail "no PASS expected_errors line"
check_json direct || fail "the JSON report's probes"

# The completions API carries them as well.
bench compl --url "$srv_URL" --api completions -c 4 --num-requests 32 --input-len 300 --output-len 8 \
  --probes recall:0.3,malformed:0.1
[ "$code" = 0 ] || fail "completions run: exit $code"
grep -q "^PASS answers: recall" "$dir/compl.out" || fail "completions: no PASS answers"

# 2. Multi-turn recall: the fact from the first turn, through the history.
bench multi --url "$srv_URL" --multi-turn 12:3 -c 4 --input-len 120 --output-len 8 --probes recall:0.5
cat "$dir/multi.out"
[ "$code" = 0 ] || fail "multi-turn run: exit $code"
grep -q "^PASS answers: recall" "$dir/multi.out" || fail "multi-turn: no PASS answers"
/usr/bin/python3 - "$dir/multi.json" <<'PY' || fail "multi-turn: recall probes are not on last turns"
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
asked = [r for r in run["requests"] if "probe" in r]
assert asked and all(r["turn"] == 2 and r["probe"]["kind"] == "recall" for r in asked), asked
PY

# 3. Through a gateway in front of the same replica.
one_replica_gateway gw "$srv_URL" 1024
gw=$gw_URL
bench gateway --url "$gw" --replica-metrics "$srv_URL" --api chat -c 4 --num-requests "$n" --input-len 300 \
  --output-len 8 --probes recall:0.25,json:0.15,over-length:0.1,malformed:0.1
cat "$dir/gateway.out"
[ "$code" = 0 ] || fail "through the gateway: exit $code"
grep -q "^PASS answers: " "$dir/gateway.out" || fail "gateway: no PASS answers"
grep -q "^PASS expected_errors: over_length" "$dir/gateway.out" || fail "gateway: no PASS expected_errors"
check_json gateway || fail "gateway: the JSON report's probes"

# 4. A wrong-answer endpoint: every status 200, every answer the same story.
if [ -n "${KVSERVE_FAKE_BIN:-}" ] && [ -x "$KVSERVE_FAKE_BIN" ]; then
  KVSERVE_BIN=$KVSERVE_FAKE_BIN start_server wrong --fake-step-ms 1
  wait_ready "$wrong_URL" 30 || fail "the wrong-answer server is not ready"
  bench wrong --url "$wrong_URL" --tokenizer "$model" --api completions -c 4 --num-requests 24 --input-len 100 \
    --output-len 8 --probes recall:0.5
  cat "$dir/wrong.out"
  [ "$code" = 1 ] || fail "a wrong-answer endpoint must exit 1 (got $code)"
  grep -q "^FAIL answers: recall 0/[0-9]* right .*(e.g. request [0-9]*: no_number: expected [0-9]*" "$dir/wrong.out" ||
    fail "no FAIL answers line naming a miss"
  grep -q "^PASS server_errors" "$dir/wrong.out" || fail "the wrong answers are not server errors (every status was 200)"
else
  fail "KVSERVE_FAKE_BIN (the test server binary) is not set: the wrong-answer case cannot run"
fi
echo "1 passed, 0 failed"
