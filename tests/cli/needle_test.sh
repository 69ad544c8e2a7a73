#!/usr/bin/env bash
# `kvserve needle` end to end against a real `kvserve serve` with the
# bundled model (trained for pass-key recall up to 4K tokens), in
# completions and chat mode, and `kvserve serve --needle-gate`: the bundled
# model passes it and becomes ready; ../shared's stories260K (a TinyStories
# model that cannot recall a pass key) stays not ready with the reason on
# /ready; and the RULER suite (every task) through a gateway. Reports are
# checked from the outside by check_reports.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
source "$here/serve_util.sh"
trap 'stop_servers; rm -rf "$dir"' EXIT
model="$KVSERVE_SOURCE_DIR/models/kvserve-tiny.gguf"
[ -f "$model" ] || { echo "FAIL: bundled model $model is missing"; exit 1; }

start_server srv --model "$model" --max-context-length 4096
# A gate the bundled model passes, and one stories260K cannot.
start_server gated --model "$model" --max-context-length 4096 --needle-gate 512:0.6
stories="$KVSERVE_SHARED_DIR/models/stories260K.gguf"
if [ -f "$stories" ]; then start_server weak --model "$stories" --needle-gate 256:0.9; fi
# 4-bit KV (issue 37): the same recall with K and V stored as q4_0.
start_server kv4 --model "$model" --max-context-length 4096 --kv-dtype q4_0
wait_ready "$srv_URL" 60 || { echo "FAIL: server not ready"; cat "$dir/srv.log"; exit 1; }

code=0
"$KVSERVE_BIN" needle --url "$srv_URL" --lengths 256,1024 --depths 0,50,100 --trials 2 --expect-length 256 \
  --seed 11 --json "$dir/n.json" --html "$dir/n.html" --no-progress >"$dir/n.out" 2>"$dir/n.err" || code=$?
cat "$dir/n.out"
[ "$code" -le 1 ] || { echo "FAIL: needle exited $code"; cat "$dir/n.err"; exit 1; }
# The model card measures >= 95 % per cell; allow a few misses here.
/usr/bin/python3 "$here/check_reports.py" needle "$dir/n.json" "$dir/n.html" "$dir/n.out" "$code" 0.75

code=0
"$KVSERVE_BIN" needle --url "$srv_URL/v1" --api chat --lengths 512 --depths 25,75 --trials 2 --seed 5 \
  --json "$dir/c.json" --html "$dir/c.html" --no-progress >"$dir/c.out" 2>"$dir/c.err" || code=$?
cat "$dir/c.out"
/usr/bin/python3 "$here/check_reports.py" needle "$dir/c.json" "$dir/c.html" "$dir/c.out" "$code" 0.5
grep -q '"api": "chat"' "$dir/c.json" || { echo "FAIL: chat mode not recorded"; exit 1; }

# 4-bit KV keeps the pass key: the same grid on the q4_0-KV replica
# (docs/benchmarks.md: 95 % at 1K-4K against f16's 97.5 %).
wait_ready "$kv4_URL" 60 || { echo "FAIL: q4_0 KV server not ready"; cat "$dir/kv4.log"; exit 1; }
grep -q "Q4_0" "$dir/kv4.log" || { echo "FAIL: the server does not log its q4_0 KV"; cat "$dir/kv4.log"; exit 1; }
code=0
q4_grid=(--lengths 1024 --depths 0,50,100 --trials 2)
[ -n "${KVSERVE_SANITIZED:-}" ] && q4_grid=(--lengths 512 --depths 0,100 --trials 1)
"$KVSERVE_BIN" needle --url "$kv4_URL" "${q4_grid[@]}" --seed 11 \
  --json "$dir/q4.json" --html "$dir/q4.html" --no-progress >"$dir/q4.out" 2>"$dir/q4.err" || code=$?
cat "$dir/q4.out"
/usr/bin/python3 "$here/check_reports.py" needle "$dir/q4.json" "$dir/q4.html" "$dir/q4.out" "$code" 0.5

# Multikey: one value asked among 4 needles; misses classified and the
# chance level (25 %) reported, both recomputed by check_reports.py.
code=0
"$KVSERVE_BIN" needle --url "$srv_URL" --variant multikey --lengths 512 --depths 0,100 --trials 3 --seed 7 \
  --json "$dir/k.json" --html "$dir/k.html" --no-progress >"$dir/k.out" 2>"$dir/k.err" || code=$?
cat "$dir/k.out"
/usr/bin/python3 "$here/check_reports.py" needle "$dir/k.json" "$dir/k.html" "$dir/k.out" "$code" 0
grep -q "^chance level: 25.0 %" "$dir/k.out" || { echo "FAIL: no chance level for multikey"; exit 1; }
/usr/bin/python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))["summary"]; assert s["chance_level"] == 0.25, s' "$dir/k.json"

# Bad input.
c=0
"$KVSERVE_BIN" needle --url "$srv_URL" --lengths 8000 >/dev/null 2>"$dir/e.err" || c=$?
[ "$c" = 2 ] && grep -q "does not fit the context" "$dir/e.err" || { echo "FAIL: over-long length: $c"; cat "$dir/e.err"; exit 1; }
c=0
"$KVSERVE_BIN" needle --url "$srv_URL" --variant multikey --needle "The code is {value}." >/dev/null 2>"$dir/e.err" || c=$?
[ "$c" = 2 ] && grep -q "{key}" "$dir/e.err" || { echo "FAIL: keyless multikey template: $c"; cat "$dir/e.err"; exit 1; }

# The RULER suite (every task) through a gateway in front of the same
# replica: per-task scores recomputed from the cases, the aggregate their
# mean; the haystack keeps whole sentences; vt, cwe and fwe prompts are
# what they say (the bundled model, trained only to retrieve, scores near 0
# on those: a measurement, not a failure).
one_replica_gateway gw "$srv_URL" 4096
code=0
# Under the sanitizers one case per task (every builder still runs).
grid=(--lengths 512,1024 --depths 0,100 --trials 2)
[ -n "${KVSERVE_SANITIZED:-}" ] && grid=(--lengths 512 --depths 0 --trials 1)
"$KVSERVE_BIN" needle --url "$gw_URL" --tasks ruler "${grid[@]}" --seed 13 \
  --value-kind digits --json "$dir/r.json" --no-progress >"$dir/r.out" 2>"$dir/r.err" || code=$?
cat "$dir/r.out"
[ "$code" = 0 ] || { echo "FAIL: the RULER suite exited $code"; cat "$dir/r.err"; exit 1; }
grep -q "^  aggregate" "$dir/r.out" || { echo "FAIL: no aggregate row"; exit 1; }
/usr/bin/python3 - "$dir/r.json" <<'PY' || { echo "FAIL: the RULER suite's report"; exit 1; }
import json, re, sys
j = json.load(open(sys.argv[1]))
tasks = {t["task"]: t for t in j["tasks"]}
assert list(tasks) == ["single", "multikey", "multivalue", "multiquery", "vt", "cwe", "fwe"], list(tasks)
for name, t in tasks.items():
    cases = t["cases"]
    assert cases, name
    score = sum(c["score"] for c in cases) / len(cases)
    assert abs(score - t["score"]) < 1e-9, (name, score, t["score"])
    for c in cases:
        if c["error"]:
            continue
        if name in ("cwe", "fwe"):  # whole list items: at most a few tokens short
            assert any(l - 24 <= c["prompt_tokens"] <= l for l in (512, 1024)), (name, c["prompt_tokens"])
        else:  # exact, through the gateway
            assert c["prompt_tokens"] in (512, 1024), (name, c["prompt_tokens"])
    if name in ("cwe", "fwe"):
        assert {c["depth"] for c in cases} == {0}, name
    if name == "vt":
        assert all(len(c["expected"]) == 5 and all(re.fullmatch("[A-Z]{5}", v) for v in c["expected"]) for c in cases)
    if name == "fwe":
        assert all(len(c["expected"]) == 3 for c in cases)
agg = sum(t["score"] for t in tasks.values()) / len(tasks)
assert abs(agg - j["aggregate"]) < 1e-9, (agg, j["aggregate"])
if len(tasks["single"]["cases"]) >= 4:  # the bundled model's trained task
    assert tasks["single"]["score"] >= 0.75, tasks["single"]["score"]
print("RULER suite ok: aggregate %.3f" % agg)
PY

# The gates.
wait_ready "$gated_URL" 60 || { echo "FAIL: the gated server never became ready"; cat "$dir/gated.log"; exit 1; }
grep -q "needle gate 512:60% passed" "$dir/gated.log" || { echo "FAIL: no gate log line"; cat "$dir/gated.log"; exit 1; }
if [ ! -f "$stories" ]; then
  echo "SKIP (part): $stories is absent, the failing gate is not tested"
  echo "1 passed, 0 failed"
  exit 0
fi
reason=""
for _ in $(seq 1 600); do
  reason=$(http_body "$weak_URL" /ready)
  case "$reason" in *failed*) break ;; esac
  sleep 0.1
done
echo "stories260K /ready: $reason"
case "$reason" in
  *'"status":"not_ready"'*'needle gate 256:90% failed'*|*'needle gate 256:90% failed'*'"status":"not_ready"'*) ;;
  *) echo "FAIL: stories260K's gate should fail and keep it not ready"; cat "$dir/weak.log"; exit 1 ;;
esac
[ "$(http_status "$weak_URL" /ready)" = 503 ] || { echo "FAIL: /ready is not 503"; exit 1; }
grep -q "the server stays not ready" "$dir/weak.log" || { echo "FAIL: no log line for the failed gate"; exit 1; }
echo "1 passed, 0 failed"
