#!/usr/bin/env bash
# kvserve against llama.cpp and ik_llama.cpp, side by side in one run, on the same GGUF files (issue 18's
# table): every model (S = 125M, M = 1.1B; F16, Q8_0, Q4_0, Q4_K_M), pp512/tg128, pp4096, pp16384, tg128 at
# KV depth 4096 and 16384; each peer's llama-bench once (llama.cpp, ik_llama.cpp, ik_llama.cpp -rtr 1), and
# kvserve forced to its AVX2 kernels against llama.cpp built for AVX2 only, and (set bf16) the F16 models
# with kvserve's --dtype bf16 (F16 converted to BF16 at load, as ik's -rtr). Runs are alternated per row
# by ../shared/tools/perf_side_by_side.py (medians of passes). Never builds a peer.
#
# Usage: bash scripts/bench_side_by_side.sh [--quick] PEER_DIR [OUT_DIR]
#   --quick   a short run (~10 min on a quiet 2-core machine): S-Q8_0 and S-Q4_K_M, pp512/tg128 and pp4096
#             against every peer, plus the forced AVX2 path's pp512/tg128; 2 reps, 1 pass. Same as
#             SETS="base pp4096 avx2" MODELS=S-Q8_0,S-Q4_K_M REPS=2 PASSES=1 (any of them can still be set).
#   PEER_DIR  made by ../shared/tools/make_peer_ref.sh: llama.cpp/build/bin/llama-bench,
#             ik_llama.cpp/build/bin/llama-bench, models/rand-llama-{S,M}-{F16,Q8_0,Q4_0,Q4_K_M}.gguf, and
#             for the AVX2 rows llama.cpp/build-avx2/bin/llama-bench (cmake -DGGML_NATIVE=OFF -DGGML_AVX2=ON
#             -DGGML_FMA=ON -DGGML_F16C=ON); missing peers are skipped with a note.
#   OUT_DIR   default build/side-by-side (build/side-by-side-quick with --quick); its old JSON and text
#             files are removed first. One JSON per (set, peer), meta.txt (machine, load, commits),
#             report.md (the table) and side_by_side.svg (the plot), written by tools/side_by_side_report.py.
# Environment: KVS_BUILD (default build/release), SETS (default "base bf16 pp4096 pp16384 d4096 d16384 avx2"),
#   MODELS (default S-F16,S-Q8_0,S-Q4_0,S-Q4_K_M,M-F16,M-Q8_0,M-Q4_0,M-Q4_K_M), PEERS (default
#   "llama.cpp ik ik-rtr"), REPS (3), PASSES (2), THREADS (2), LLAMA_CPP_COMMIT / IK_COMMIT (recorded in
#   meta.txt). The full run takes hours on 2 cores (pp16384 on M alone is tens of minutes per peer): use
#   --quick for a look, e.g. after a change to the kernels or attention.
#   NO_WARMUP=1: kvserve and llama.cpp run without their untimed warm-up, which repeats the whole ppN test
#   (ik_llama.cpp's llama-bench warms up with one token only, so it is left as is). For the long prompts,
#   where the warm-up doubles a row's time and the first-touch page faults it absorbs are well under 1 %.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ ${1:-} == --quick ]]; then
  shift
  SETS=${SETS:-base pp4096 avx2}
  MODELS=${MODELS:-S-Q8_0,S-Q4_K_M}
  REPS=${REPS:-2}
  PASSES=${PASSES:-1}
  QUICK_SUFFIX=-quick
fi
PEER=${1:?usage: bench_side_by_side.sh [--quick] PEER_DIR [OUT_DIR]}
PEER=$(cd "$PEER" && pwd)
OUT=${2:-build/side-by-side${QUICK_SUFFIX:-}}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.json "$OUT"/*.txt  # the report describes this run only
BUILD=${KVS_BUILD:-build/release}
KV=$(pwd)/$BUILD/src/cli/kvserve
[[ -x $KV ]] || { echo "build kvserve first: cmake --build $BUILD --target kvserve" >&2; exit 1; }
TOOL=$(pwd)/../shared/tools/perf_side_by_side.py
[[ -f $TOOL ]] || { echo "missing $TOOL" >&2; exit 1; }
SETS=${SETS:-base bf16 pp4096 pp16384 d4096 d16384 avx2}
MODELS=${MODELS:-S-F16,S-Q8_0,S-Q4_0,S-Q4_K_M,M-F16,M-Q8_0,M-Q4_0,M-Q4_K_M}
PEERS=${PEERS:-llama.cpp ik ik-rtr}
COMMON=(--reps "${REPS:-3}" --passes "${PASSES:-2}" --threads "${THREADS:-2}")
PY=/usr/bin/python3

# perf_side_by_side.py runs a binary with fixed arguments; these wrappers (made here, in OUT) add the rest.
WRAP=$OUT/wrappers
mkdir -p "$WRAP"
printf '#!/bin/sh\nexec "%s" "$@" -rtr 1\n' "$PEER/ik_llama.cpp/build/bin/llama-bench" >"$WRAP/ik-rtr"
printf '#!/bin/sh\nKVSERVE_ISA=avx2 exec "%s" "$@"\n' "$KV" >"$WRAP/kvserve-avx2"
printf '#!/bin/sh\nexec "%s" "$@" --dtype bf16\n' "$KV" >"$WRAP/kvserve-bf16"
chmod +x "$WRAP"/*

peer_bin() {
  case $1 in
    llama.cpp) echo "$PEER/llama.cpp/build/bin/llama-bench" ;;
    ik) echo "$PEER/ik_llama.cpp/build/bin/llama-bench" ;;
    ik-rtr) [[ -x $PEER/ik_llama.cpp/build/bin/llama-bench ]] && echo "$WRAP/ik-rtr" ;;
    llama.cpp-avx2) echo "$PEER/llama.cpp/build-avx2/bin/llama-bench" ;;
  esac
}

no_warmup() {  # binary name -> a wrapper that adds --no-warmup
  local w=$WRAP/nowarmup-$2
  printf '#!/bin/sh\nexec "%s" "$@" --no-warmup\n' "$1" >"$w"
  chmod +x "$w"
  echo "$w"
}

# The peers' trees are extracted without .git (make_peer_ref.sh), so their commits come from the caller:
# LLAMA_CPP_COMMIT / IK_COMMIT (e.g. `git --git-dir MIRROR rev-parse --short HEAD` of the copies given to
# make_peer_ref.sh).
{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "kvserve: commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src || echo ' (src modified)')"
  echo "llama.cpp: commit ${LLAMA_CPP_COMMIT:-unknown (set LLAMA_CPP_COMMIT)}"
  echo "ik_llama.cpp: commit ${IK_COMMIT:-unknown (set IK_COMMIT)}"
  echo "threads: ${THREADS:-2}, reps: ${REPS:-3}, passes: ${PASSES:-2}"
  [[ -z ${NO_WARMUP:-} ]] || echo "no warm-up: kvserve and llama.cpp with --no-warmup"
} >"$OUT/meta.txt"

run_set() {  # set peer
  local set=$1 peer=$2 kv=$KV bin tests depth=0 models=$MODELS
  case $set in
    base) tests=pp512,tg128 ;;
    bf16) tests=pp512,tg128 kv=$WRAP/kvserve-bf16 models=$(tr , '\n' <<<"$MODELS" | { grep -- '-F16$' || true; } | paste -sd, -) ;;
    pp4096) tests=pp4096 ;;
    pp16384) tests=pp16384 ;;
    d4096) tests=tg128 depth=4096 ;;
    d16384) tests=tg128 depth=16384 ;;
    avx2) tests=pp512,tg128 kv=$WRAP/kvserve-avx2 ;;
    *) echo "unknown set $set" >&2; return 1 ;;
  esac
  bin=$(peer_bin "$peer") || true
  if [[ -z $bin || ! -x $bin ]]; then
    echo "## $set vs $peer: skipped (no llama-bench for $peer in $PEER)" | tee -a "$OUT/meta.txt"
    return 0
  fi
  if [[ -z $models ]]; then
    echo "## $set vs $peer: skipped (no F16 model in MODELS)" | tee -a "$OUT/meta.txt"
    return 0
  fi
  if [[ -n ${NO_WARMUP:-} ]]; then
    kv=$(no_warmup "$kv" "kvserve-$set")
    if [[ $peer == llama.cpp* ]]; then bin=$(no_warmup "$bin" "$peer"); fi
  fi
  local args=("${COMMON[@]}" --models "$models" --tests "$tests" --json "$OUT/$set-$peer.json")
  [[ $depth -gt 0 ]] && args+=(--depth "$depth")
  echo "## $set vs $peer: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M)" | tee -a "$OUT/meta.txt"
  $PY "$TOOL" "$kv" "$bin" "$PEER/models" "${args[@]}" | tee "$OUT/$set-$peer.txt"
  echo "## $set vs $peer done: load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M)" >>"$OUT/meta.txt"
}

for set in $SETS; do
  if [[ $set == avx2 ]]; then
    run_set avx2 llama.cpp-avx2
  elif [[ $set == d* ]]; then
    # Decode at depth: the goal is against llama.cpp, and ik_llama.cpp's
    # llama-bench has no -d (its -gp measures something else).
    for peer in $PEERS; do if [[ $peer == llama.cpp ]]; then run_set "$set" "$peer"; fi; done
  else
    for peer in $PEERS; do run_set "$set" "$peer"; done
  fi
done
$PY tools/side_by_side_report.py "$OUT"
echo "wrote $OUT/report.md and $OUT/side_by_side.svg"
