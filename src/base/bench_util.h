// Helpers of the micro-benchmarks (kernels_bench, attention_bench): the
// environment knobs every bench reads, and one shared thread pool.
//   KVSERVE_BENCH_THREADS=N   threads of the pool (default 2)
//   KVSERVE_BENCH_CPU_TIME=1  report CPU time instead of real time
// Thread-safety: BenchPool is created once (a function-local static); the
// rest are pure reads of the environment.
#pragma once

#include <cstdlib>

#include "base/thread_pool.h"

namespace kvs::testing {

inline int BenchThreads() {
  const char* s = std::getenv("KVSERVE_BENCH_THREADS");
  return s != nullptr && std::atoi(s) > 0 ? std::atoi(s) : 2;
}

// Whether benchmarks with threads measure real (wall) time.
inline bool BenchUseRealTime() {
  const char* s = std::getenv("KVSERVE_BENCH_CPU_TIME");
  return s == nullptr || s[0] != '1';
}

inline ThreadPool& BenchPool() {
  static ThreadPool pool(BenchThreads());
  return pool;
}

}  // namespace kvs::testing
