// ThreadPool: a fork-join pool for compute kernels. Run(fn) calls fn(tid, n)
// on every thread, the calling thread being tid 0, and returns when all are
// done. Workers spin briefly between jobs (a decode step issues hundreds of
// small jobs) and then sleep, so an idle pool costs no CPU.
// Thread-safety: Run may be called by one thread at a time (the engine
// thread); it is not reentrant.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace kvs {

class ThreadPool {
 public:
  // num_threads counts the caller; 0 means hardware concurrency.
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  void Run(const std::function<void(int tid, int num_threads)>& fn);

  // Splits [0, n) into one contiguous range per thread: f(begin, end).
  template <typename F>
  void ParallelFor(int64_t n, F&& f) {
    if (n <= 0) return;
    if (num_threads_ == 1 || n == 1) { f(int64_t{0}, n); return; }
    Run([&](int tid, int nth) {
      const int64_t begin = n * tid / nth;
      const int64_t end = n * (tid + 1) / nth;
      if (begin < end) f(begin, end);
    });
  }

 private:
  void WorkerLoop(int tid);

  int num_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int, int)>* job_ = nullptr;
  std::atomic<uint32_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace kvs
