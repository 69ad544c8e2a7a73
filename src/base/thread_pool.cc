#include "base/thread_pool.h"

#include <immintrin.h>
#include <sched.h>

namespace kvs {
namespace {
// Waiting has three phases. A decode step issues hundreds of jobs a few
// microseconds apart, so first spin with PAUSE (cheapest wake-up). Then
// yield: when the machine is oversubscribed the thread we wait for may be
// queued behind us on our core, and pure spinning would burn its time slice.
// Only then sleep on the futex (tens of microseconds to wake).
constexpr int kPauseIterations = 4096;
constexpr int kYieldIterations = kPauseIterations + 2048;

// Returns false when the caller should block instead of spinning again.
inline bool SpinOnce(int& spins) {
  ++spins;
  if (spins < kPauseIterations) { _mm_pause(); return true; }
  if (spins < kYieldIterations) { sched_yield(); return true; }
  return false;
}
}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (num_threads <= 0) num_threads = 1;
  num_threads_ = num_threads;
  for (int t = 1; t < num_threads_; ++t) workers_.emplace_back([this, t] { WorkerLoop(t); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (std::thread& w : workers_) w.join();
}

void ThreadPool::Run(const std::function<void(int, int)>& fn) {
  if (num_threads_ == 1) { fn(0, 1); return; }
  job_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0, num_threads_);
  int spins = 0;
  for (;;) {
    int p = pending_.load(std::memory_order_acquire);
    if (p == 0) break;
    if (SpinOnce(spins)) continue;
    pending_.wait(p, std::memory_order_acquire);
  }
  job_ = nullptr;
}

void ThreadPool::WorkerLoop(int tid) {
  // Generation 0 is the state before any job; reading it here instead
  // would miss a job posted before this thread started.
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    uint32_t g;
    while ((g = generation_.load(std::memory_order_acquire)) == seen) {
      if (SpinOnce(spins)) continue;
      generation_.wait(seen, std::memory_order_acquire);
    }
    seen = g;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(tid, num_threads_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

}  // namespace kvs
