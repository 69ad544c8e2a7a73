#!/usr/bin/env bash
# The go-live checklist of docs/validation.md in one run against a deployed
# endpoint (a kvserve gateway, a replica, or another OpenAI-compatible
# server such as llama-server):
#   1. connectivity: /health, /ready, /v1/models;
#   2. the load workload (configs/go-live.yaml: TTFT by length up to the
#      context, Poisson load, a mix that fills the KV cache with answers
#      checked and bad inputs, multi-turn recall): `kvserve bench`;
#   3. needle recall at several depths up to the context: `kvserve needle`,
#      then the RULER suite (every task, fewer trials) for the aggregate;
#   4. a soak with bad inputs and hang-ups: `kvserve soak`.
# Reports (JSON, HTML) go to OUT; OUT/summary.txt has every check line. Exit
# 0 when every step passed, 1 when one failed, 2 for bad options.
#   scripts/go_live.sh --url URL --out DIR [--api-key KEY] [--replica-metrics URL]... [--tokenizer GGUF]
#                      [--trials N] [--soak-seconds S] [--workload FILE] [--seed N]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${KVSERVE_BIN:-build/release/src/cli/kvserve}
url="" out="" key="" tokenizer="" trials=5 soak=120 workload=configs/go-live.yaml seed=2026
metrics=()
while [ $# -gt 0 ]; do
  case "$1" in
    --url) url=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --api-key) key=$2; shift 2 ;;
    --replica-metrics) metrics+=(--replica-metrics "$2"); shift 2 ;;
    --tokenizer) tokenizer=$2; shift 2 ;;
    --trials) trials=$2; shift 2 ;;
    --soak-seconds) soak=$2; shift 2 ;;
    --workload) workload=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    *) echo "go_live: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$url" ] && [ -n "$out" ] || { echo "usage: go_live.sh --url URL --out DIR [...]" >&2; exit 2; }
[ -x "$BIN" ] || { echo "go_live: $BIN is missing (cmake --build build/release --target kvserve)" >&2; exit 2; }
mkdir -p "$out"
common=(--url "$url")
[ -n "$key" ] && common+=(--api-key "$key")
[ -n "$tokenizer" ] && common+=(--tokenizer "$tokenizer")
summary="$out/summary.txt"
: >"$summary"
failed=0
note() { echo "$*" | tee -a "$summary"; }
step() {  # NAME CMD...: runs it, keeps its stdout, its check lines into the summary
  local name=$1 t0 code=0
  shift
  t0=$(date +%s)
  note "=== $name"
  "$@" >"$out/$name.out" 2>"$out/$name.err" || code=$?
  grep -E '^(PASS|FAIL|SKIP) |^effective context length|^overall recall' "$out/$name.out" >>"$summary" || true
  note "--- $name: exit $code in $(( $(date +%s) - t0 )) s"
  [ "$code" = 0 ] || failed=1
}

note "go-live run against $url ($(date -u +%FT%TZ)), seed $seed"
note "=== connectivity"
auth=()
[ -n "$key" ] && auth=(-H "Authorization: Bearer $key")
for path in /health /ready /v1/models; do
  code=$(curl -s -o "$out/conn$(echo "$path" | tr / _).json" -w '%{http_code}' "${auth[@]}" "$url$path" || true)
  note "GET $path: HTTP $code"
  if [ "$path" != /ready ] && [ "$code" != 200 ]; then failed=1; fi
done
step bench "$BIN" bench "${common[@]}" "${metrics[@]}" --workload "$workload" --seed "$seed" --no-progress \
  --json "$out/bench.json" --html "$out/bench.html"
step needle "$BIN" needle "${common[@]}" --trials "$trials" --seed "$seed" --no-progress \
  --json "$out/needle.json" --html "$out/needle.html"
step ruler "$BIN" needle "${common[@]}" --tasks ruler --trials 3 --depths 0,50,100 --seed "$seed" --no-progress \
  --json "$out/ruler.json"
grep -A20 '^=== tasks' "$out/ruler.out" >>"$summary" || true
step soak "$BIN" soak "${common[@]}" "${metrics[@]}" --duration "$soak" --seed "$seed" --json "$out/soak.json"
note "=== go-live: $([ "$failed" = 0 ] && echo PASSED || echo FAILED)"
exit "$failed"
