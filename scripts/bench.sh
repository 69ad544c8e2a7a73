#!/usr/bin/env bash
# The model and engine benchmarks of docs/benchmarks.md, on random-weight
# 125M Llama models (the issue's test shape: 12 layers, hidden 768, 12/4
# heads, FFN 2048, vocab 32000) that kvserve writes itself. Prints figures;
# asserts nothing. Usage: bash scripts/bench.sh [build dir] (default build/release).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
KV="$BUILD/src/cli/kvserve"
[ -x "$KV" ] || { echo "build kvserve first: cmake --build $BUILD --target kvserve" >&2; exit 1; }
DIR=${KVSERVE_BENCH_DIR:-build/bench-models}
mkdir -p "$DIR"
for t in Q8_0 F16 Q4_K_M; do
  [ -f "$DIR/m125-$t.gguf" ] || "$KV" random-model --preset test-125m --type "$t" -o "$DIR/m125-$t.gguf" >&2
done
echo "## cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
for t in Q8_0 F16 Q4_K_M; do
  echo "## $t: $KV bench --offline -m $DIR/m125-$t.gguf -p 512 -n 128 -t 2 -r 5"
  "$KV" bench --offline -m "$DIR/m125-$t.gguf" -p 512 -n 128 -t 2 -r 5 2>/dev/null
done
echo "## Q8_0 at depth 4096: $KV bench --offline -m $DIR/m125-Q8_0.gguf -p 0 -n 128 -d 4096 -t 2 -r 3"
"$KV" bench --offline -m "$DIR/m125-Q8_0.gguf" -p 0 -n 128 -d 4096 -t 2 -r 3 2>/dev/null
echo "## engine, aggregate decode: $KV bench --offline -m $DIR/m125-Q8_0.gguf -c 1,4,16,64 -p 128 -n 64 -t 2 -r 3"
"$KV" bench --offline -m "$DIR/m125-Q8_0.gguf" -c 1,4,16,64 -p 128 -n 64 -t 2 -r 3 2>/dev/null
