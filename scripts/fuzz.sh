#!/usr/bin/env bash
# Builds every libFuzzer target (clang, instrumented build in build/fuzz) and
# runs each for SECONDS (default 30) from its committed seeds plus a corpus
# kept in build/fuzz/corpus/NAME. Usage: scripts/fuzz.sh [SECONDS] [NAME...]
# Long runs: scripts/fuzz.sh 3600. A crash stops the script with the input
# saved as build/fuzz/crash-* (libFuzzer's artifact prefix).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH=${1:-30}
shift || true
JOBS=${JOBS:-$(nproc)}
# KVSERVE_FUZZ_BUILD: an existing tree configured with -DKVSERVE_FUZZ=ON (scripts/test.sh passes its
# ASan+UBSan tree, which has the fuzzers too); default build/fuzz, configured here.
FUZZ_BUILD=${KVSERVE_FUZZ_BUILD:-build/fuzz}
if [ -z "${KVSERVE_FUZZ_BUILD:-}" ]; then
  cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_C_COMPILER=clang -DKVSERVE_FUZZ=ON -DKVSERVE_BENCH=OFF >/dev/null
fi
mapfile -t rows < "$FUZZ_BUILD/fuzzers.txt"
names=()
for row in "${rows[@]}"; do
  [ -n "$row" ] || continue
  IFS=$'\t' read -r name _ _ _ <<<"$row"
  if [ $# -eq 0 ] || printf '%s\n' "$@" | grep -qx "$name"; then names+=("$name"); fi
done
cmake --build "$FUZZ_BUILD" -j "$JOBS" --target "${names[@]}"
# One fuzzer per core at a time (each is single-threaded): the same fuzzing
# time per target in 1/JOBS of the wall time.
run_one() {
  local name=$1 bin=$2 seeds=$3 max_len=$4 t0 rc=0
  mkdir -p "$FUZZ_BUILD/corpus/$name"
  t0=$(date +%s)
  "$bin" -max_total_time="$SECONDS_EACH" -max_len="$max_len" -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$FUZZ_BUILD/crash-$name-" "$FUZZ_BUILD/corpus/$name" "$seeds" >"$FUZZ_BUILD/$name.log" 2>&1 || rc=$?
  echo "--- $name for ${SECONDS_EACH}s"
  tail -n 3 "$FUZZ_BUILD/$name.log"
  if [ $rc -ne 0 ]; then echo "--- $name FAILED (exit $rc); log: $FUZZ_BUILD/$name.log"; return 1; fi
  echo "--- $name ran clean for $(( $(date +%s) - t0 ))s"
}
export -f run_one
export SECONDS_EACH FUZZ_BUILD
for row in "${rows[@]}"; do
  IFS=$'\t' read -r name bin seeds max_len <<<"$row"
  printf '%s\n' "${names[@]}" | grep -qx "$name" || continue
  printf '%s\0%s\0%s\0%s\0' "$name" "$bin" "$seeds" "$max_len"
done | xargs -0 -n 4 -P "$JOBS" bash -c 'run_one "$@"' _
