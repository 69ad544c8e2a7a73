#!/usr/bin/env bash
# The 16K bundled model (models/kvserve-tiny-16k.gguf, issue 37) as deployed:
# a gateway that routes by length to two pools, "short" (max_context 4,096:
# the 4K bundled model) and "long" (16,384: the 16K model), each a real
# `kvserve serve`. Checks, through the gateway:
#   1. kvserve needle at 16K (the longest prompt the long pool holds):
#      recall at every depth, the effective context length, the report;
#   2. routing by length: an 8K-token chat prompt with a pass key is answered
#      by the long pool's replica (exactly), a 2K one by the short pool's, as
#      the replicas' own request counters say;
#   3. a prompt longer than every pool: 400 context_length_exceeded, nothing
#      forwarded;
#   4. the 4K model served alone refuses the same 8K prompt with a 400 that
#      names its context.
set -euo pipefail
# 16K-token prompts through two replicas and a gateway: under the sanitizers
# this adds most of a minute to CI and checks no code the other server tests
# do not; the Release stage runs it.
if [ -n "${KVSERVE_SANITIZED:-}" ]; then echo "SKIP: 16K prompts run in the Release tree only"; exit 77; fi
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
source "$here/serve_util.sh"
trap 'stop_servers; rm -rf "$dir"' EXIT
model="$KVSERVE_SOURCE_DIR/models/kvserve-tiny.gguf"
model16="$KVSERVE_SOURCE_DIR/models/kvserve-tiny-16k.gguf"
for m in "$model" "$model16"; do [ -f "$m" ] || { echo "FAIL: bundled model $m is missing"; exit 1; }; done

start_server short --model "$model" --max-context-length 4096
# One public model id for both pools (as a deployment that routes one model
# by length would publish it): clients never pick the pool themselves.
start_server long --model "$model16" --max-context-length 16384 --served-model-name kvserve-tiny
for s in short long; do
  url_var="${s}_URL"
  wait_ready "${!url_var}" 60 || fail "replica $s not ready"
done
grep -q "context 16384" "$dir/long.log" || fail "the 16K model is not served with a 16,384-token context"

cat >"$dir/gw.yaml" <<YAML
gateway: {host: 127.0.0.1, port: 0, admin_port: 0, allow_anonymous: true, health_interval_seconds: 0.2}
model: {path: "$model16"}
logging: {audit_log: "off"}
pools:
  - {name: short, max_context: 4096, replicas: [{url: "$short_URL"}]}
  - {name: long, max_context: 16384, replicas: [{url: "$long_URL"}]}
YAML
start_gateway gw "$dir/gw.yaml"

requests_of() {  # URL: the replica's finished requests (all outcomes)
  curl -s "$1/metrics" | awk '/^kvserve:request_finished_total/ {s += $2} END {print s + 0}'
}

# 1. Needle recall at 16K through the gateway. Under the sanitizers one
# case (the same path: a 16K prompt through both processes, checked for
# memory errors; recall is the Release run's to judge).
grid=(--lengths 16363 --depths 0,25,50,75,100 --trials 4 --expect-length 16363)
min_recall=0.8
if [ -n "${KVSERVE_SANITIZED:-}" ]; then
  grid=(--lengths 16363 --depths 50 --trials 1)
  min_recall=0
fi
code=0
"$KVSERVE_BIN" needle --url "$gw_URL" "${grid[@]}" --seed 16 --json "$dir/n.json" --html "$dir/n.html" \
  --no-progress >"$dir/n.out" 2>"$dir/n.err" || code=$?
cat "$dir/n.out"
[ "$code" -le 1 ] || fail "needle exited $code"
/usr/bin/python3 "$here/check_reports.py" needle "$dir/n.json" "$dir/n.html" "$dir/n.out" "$code" "$min_recall"
/usr/bin/python3 - "$dir/n.json" <<'PY' || fail "the 16K needle cases"
import json, sys
j = json.load(open(sys.argv[1]))
cases = j["cases"]
assert cases and all(c["prompt_tokens"] == 16363 for c in cases if not c["error"]), \
    [c["prompt_tokens"] for c in cases]
assert not any(c["error"] for c in cases), [c["error"] for c in cases if c["error"]]
print("needle at 16K: %d cases, %d exact" % (len(cases), sum(1 for c in cases if c["score"] == 1)))
PY
long_before=$(requests_of "$long_URL")
short_before=$(requests_of "$short_URL")

# 2. Routing by length: chat prompts made by the training script's own
# generator (models/kvserve-tiny-16k.recall.jsonl holds 2K, 4K, 8K and 16K ones).
chat_prompt() {  # TOKENS: writes $dir/q.json (a chat request) and prints its pass key
  /usr/bin/python3 - "$KVSERVE_SOURCE_DIR/models/kvserve-tiny-16k.recall.jsonl" "$1" "$dir/q.json" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r["format"] == "chat" and r["tokens"] == int(sys.argv[2]):
        json.dump({"model": "kvserve-tiny", "messages": r["messages"], "max_tokens": 24, "temperature": 0},
                  open(sys.argv[3], "w"))
        print(r["pass_key"])
        break
else:
    sys.exit("no %s-token chat prompt in %s" % (sys.argv[2], sys.argv[1]))
PY
}
for tokens in 8192 2048; do
  key=$(chat_prompt "$tokens") || fail "no $tokens-token chat prompt"
  status=$(curl -s -o "$dir/a.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary @"$dir/q.json" "$gw_URL/v1/chat/completions")
  [ "$status" = 200 ] || fail "$tokens-token chat through the gateway: HTTP $status $(cat "$dir/a.json")"
  /usr/bin/python3 - "$dir/a.json" "$key" "$tokens" <<'PY' || fail "$tokens-token chat answer"
import json, sys
a = json.load(open(sys.argv[1]))
text = a["choices"][0]["message"]["content"]
print("%s-token chat (%d prompt tokens): %r" % (sys.argv[3], a["usage"]["prompt_tokens"], text))
assert text == "The pass key is %s." % sys.argv[2], text
PY
done
long_after=$(requests_of "$long_URL")
short_after=$(requests_of "$short_URL")
echo "requests: long pool $long_before -> $long_after, short pool $short_before -> $short_after"
[ $((long_after - long_before)) = 1 ] || fail "the 8K prompt did not go to the long pool"
[ $((short_after - short_before)) = 1 ] || fail "the 2K prompt did not go to the short pool"

# 3. Longer than every pool: the gateway refuses it itself.
/usr/bin/python3 -c '
import json
print(json.dumps({"model": "kvserve-tiny", "prompt": "The grass is green. " * 4000, "max_tokens": 8}))' >"$dir/big.json"
status=$(curl -s -o "$dir/big.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$dir/big.json" "$gw_URL/v1/completions")
[ "$status" = 400 ] && grep -q context_length_exceeded "$dir/big.out" || fail "over-long prompt: HTTP $status $(cat "$dir/big.out")"
[ "$(requests_of "$long_URL")" = "$long_after" ] || fail "the over-long prompt reached a replica"

# 4. The 4K model alone refuses the 8K prompt, naming its context.
chat_prompt 8192 >/dev/null || fail "no 8192-token chat prompt"
status=$(curl -s -o "$dir/r4.out" -w '%{http_code}' -H 'Content-Type: application/json' \
  --data-binary @"$dir/q.json" "$short_URL/v1/chat/completions")
[ "$status" = 400 ] && grep -q 4096 "$dir/r4.out" || fail "the 4K replica and an 8K prompt: HTTP $status $(cat "$dir/r4.out")"
echo "1 passed, 0 failed"
