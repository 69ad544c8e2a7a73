// PrepPool: the bounded worker pool where requests are prepared, so the
// HTTP I/O threads only read, route and write. Preparation is everything
// CPU-heavy before the engine: parsing the JSON body, rendering the chat
// template, tokenizing, detokenizing (/detokenize, echo).
//
// A fixed number of threads take tasks from a FIFO queue holding at most
// max_queued tasks that wait for a thread; TrySubmit refuses beyond that
// (the service answers 503 with Retry-After), so a burst of huge prompts
// costs bounded memory and never delays /health.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvs::server {

class PrepPool {
 public:
  PrepPool(int threads, int max_queued);
  ~PrepPool();  // Stop()
  PrepPool(const PrepPool&) = delete;
  PrepPool& operator=(const PrepPool&) = delete;

  // Queues a task; false (and the task is dropped) when max_queued tasks
  // already wait, or after Stop.
  bool TrySubmit(std::function<void()> task);
  // Runs the tasks already queued, then joins the threads. Idempotent.
  void Stop();

  int64_t queued() const;  // waiting for a thread
  int64_t busy() const;    // being run
  int threads() const { return static_cast<int>(threads_.size()); }
  int max_queued() const { return max_queued_; }

 private:
  void Work();

  const int max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  int64_t busy_ = 0;                         // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace kvs::server
