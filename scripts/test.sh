#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite through ctest:
#   1. Release build, all tests, then a 30 s soak (scripts/soak.sh; KVSERVE_SOAK_SECONDS);
#   2. ASan+UBSan build (clang), all tests but the forced-ISA reruns of
#      model_test (label isa_variant: every variant's kernels are under the
#      sanitizers in kernels_test and paged_attention_test); the same tree
#      has the libFuzzer targets (-DKVSERVE_FUZZ=ON), so CI builds three
#      trees, not four;
#   3. TSan build (clang: ~15 % less compile than g++'s TSan, and this
#      stage's build is on CI's critical path), the tests labelled
#      "engine": those where threads
#      run (the engine thread, the server's and gateway's I/O and prep
#      threads, HTTP, work queues, the real server in ops_warm_start_test);
#      single-threaded unit tests (scheduler, sampler, block manager, API
#      parsing) are not labelled: TSan finds nothing without threads;
#   4. every libFuzzer target for 8 s each (KVSERVE_FUZZ_SECONDS;
#      scripts/fuzz.sh on the ASan+UBSan tree), beside the TSan tests.
# The ASan+UBSan tree builds (at nice 19) while the Release tests and the
# soak run, and the TSan tree while the ASan+UBSan tests run: the test
# stages leave part of the two cores idle, and the build yields to them.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
JOBS=${JOBS:-$(nproc)}
FUZZ_SECONDS=${KVSERVE_FUZZ_SECONDS:-8}
SOAK_SECONDS=${KVSERVE_SOAK_SECONDS:-30}
start=$(date +%s)
# The tests write to $TMPDIR (random models, logs: ~0.8 GB in the Release
# stage). Each test removes what it made when it exits; one directory per run,
# emptied at every stage, also bounds what a crashed test leaves behind, so a
# small CI disk holds the build trees and one stage's files at most.
TMPDIR=$(mktemp -d "${TMPDIR:-/tmp}/kvserve-ci-XXXXXX")
export TMPDIR
trap 'rm -rf "$TMPDIR"; [ -z "${bg_pid:-}" ] || { pkill -P "$bg_pid"; kill "$bg_pid"; } 2>/dev/null || true' EXIT
stage() {
  find "$TMPDIR" -mindepth 1 -delete 2>/dev/null || true
  echo "=== $1 ($(( $(date +%s) - start )) s elapsed, $(df -h --output=avail . | tail -1 | tr -d ' ') free on disk)"
}

# The next tree builds in the background, at the lowest CPU priority, while
# a test stage runs: the test stages leave 10-20 % of the two cores idle
# (servers starting, clients waiting on replies, Prometheus scrapes), which
# the build takes, and yield the rest at once. Its log is printed when it
# is waited for; its failure fails CI like any other stage's.
bg_pid="" bg_log="" bg_name=""
background_build() {  # NAME LOG COMMAND...
  bg_name=$1 bg_log=$2
  shift 2
  # Its own TMPDIR: each stage empties the tests' one, and g++ keeps its
  # assembly in temporary files there.
  mkdir -p build/tmp-background
  ( renice -n 19 -p "$BASHPID" >/dev/null; export TMPDIR=$PWD/build/tmp-background; "$@" ) >"$bg_log" 2>&1 &
  bg_pid=$!
}
wait_build() {
  local rc=0
  wait "$bg_pid" || rc=$?
  cat "$bg_log"
  [ "$rc" = 0 ] || { echo "=== $bg_name failed (exit $rc)"; exit "$rc"; }
  echo "=== $bg_name done ($(( $(date +%s) - start )) s elapsed)"
}
# The build trees' logs live beside the trees: TMPDIR is emptied per stage.
mkdir -p build

asan_build() {
  cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DKVSERVE_SANITIZE=address,undefined -DKVSERVE_FUZZ=ON -DKVSERVE_BENCH=OFF >/dev/null
  cmake --build build/asan -j "$JOBS"
}
tsan_build() {
  cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    -DKVSERVE_SANITIZE=thread -DKVSERVE_BENCH=OFF >/dev/null
  # Build only the binaries of tests labelled "engine" (test name == target
  # name for GoogleTest binaries).
  local tsan_tests all_targets tsan_targets=()
  mapfile -t tsan_tests < <(cd build/tsan && ctest -N -L engine | sed -n 's/^ *Test *#[0-9]*: //p')
  all_targets=$(cd build/tsan && ninja -t targets all | sed -n 's/^\([A-Za-z0-9_]*\): .*/\1/p' | sort -u)
  for t in "${tsan_tests[@]}"; do
    if grep -qx "$t" <<<"$all_targets"; then tsan_targets+=("$t"); fi
  done
  # ops tests of the label start the real server: the kvserve binary (and
  # the fake replica) under TSan too.
  tsan_targets+=(kvserve kvserve_fake)
  cmake --build build/tsan -j "$JOBS" --target "${tsan_targets[@]}"
}

stage "release build"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$JOBS"
background_build "asan+ubsan build (beside the release tests and the soak)" build/asan-build.log asan_build
stage "release tests"
(cd build/release && ctest --output-on-failure -j "$JOBS")

stage "soak: ${SOAK_SECONDS}s of mixed traffic on the Release server"
bash scripts/soak.sh "$SOAK_SECONDS"

stage "asan+ubsan build (the rest of it)"
wait_build
background_build "tsan build (engine label; beside the asan+ubsan tests)" build/tsan-build.log tsan_build
stage "asan+ubsan tests"
(cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 KVSERVE_SANITIZED=1 ctest --output-on-failure -LE isa_variant -j "$JOBS")

stage "tsan build (the rest of it)"
wait_build
# The fuzzers (each for a fixed wall time) run beside the TSan tests, at
# nice 19: the TSan tests wait on threads and sockets much of the time, and
# the fuzzers take what they leave.
if [ "$FUZZ_SECONDS" -gt 0 ]; then
  background_build "fuzz: every fuzzer for ${FUZZ_SECONDS}s (beside the tsan tests)" build/fuzz.log \
    env KVSERVE_FUZZ_BUILD=build/asan bash scripts/fuzz.sh "$FUZZ_SECONDS"
fi
stage "tsan tests"
(cd build/tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" KVSERVE_SANITIZED=1 ctest --output-on-failure -L engine -j "$JOBS")

if [ "$FUZZ_SECONDS" -gt 0 ]; then
  stage "fuzz (the rest of it)"
  wait_build
fi
stage "all tests passed"
