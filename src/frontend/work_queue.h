// WorkQueue: the bounded worker pool where a front end prepares requests, so
// its HTTP I/O threads only read, route and write. Preparation is everything
// CPU-heavy before the engine or the upstream: parsing the JSON body,
// rendering the chat template, tokenizing, detokenizing, admission (the
// gateway's rate limits, which may ask Redis).
//
// A fixed number of threads take tasks from a FIFO queue. At most max_queued
// tasks wait for a thread (a task an idle thread is about to take does not
// count); TrySubmit refuses beyond that (the front end answers 503 with
// Retry-After), so a burst of huge prompts costs bounded memory and never
// delays /health. Submit ignores the bound, for the few tasks that must run
// (releasing a rate-limit lease).
// Thread-safety: all methods are thread-safe; tasks run on the pool's threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvs::frontend {

class WorkQueue {
 public:
  WorkQueue(int threads, int64_t max_queued);
  ~WorkQueue();  // Stop()
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Queues a task; false (and the task is dropped) when max_queued tasks
  // already wait, or after Stop.
  bool TrySubmit(std::function<void()> task);
  // Queues a task whatever the bound; dropped only after Stop.
  void Submit(std::function<void()> task);
  // Runs the tasks already queued, then joins the threads. Idempotent.
  void Stop();

  int64_t queued() const;  // waiting for a thread
  int64_t busy() const;    // being run
  int threads() const { return threads_count_; }
  int64_t max_queued() const { return max_queued_; }

 private:
  void Work();

  const int64_t max_queued_;
  const int threads_count_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;  // guarded by mu_
  int64_t busy_ = 0;                         // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::mutex join_mu_;                       // one Stop joins at a time
  std::vector<std::thread> threads_;         // guarded by join_mu_ after construction
};

}  // namespace kvs::frontend
