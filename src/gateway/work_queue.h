// WorkQueue: a fixed set of threads running posted jobs in order, with a
// bound on jobs waiting. The gateway's request preparation (JSON parsing,
// chat templates, tokenization, admission against Redis) runs here, never on
// the I/O threads.
// Thread-safety: TryPost/Post/Stop are thread-safe; jobs run on the pool's
// threads.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kvs::gateway {

class WorkQueue {
 public:
  WorkQueue(int threads, size_t max_waiting) : max_waiting_(max_waiting) {
    for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~WorkQueue() { Stop(); }
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // False when max_waiting jobs are already waiting (or stopped).
  bool TryPost(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || jobs_.size() >= max_waiting_) return false;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
    return true;
  }
  // Ignores the bound (for jobs that must run, such as releasing a lease).
  void Post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_) return;
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  // Runs the jobs already queued, then joins.
  void Stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
    threads_.clear();
  }
  size_t waiting() const {
    std::lock_guard<std::mutex> lock(mu_);
    return jobs_.size();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }

  const size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool stop_ = false;                       // guarded by mu_
  std::vector<std::thread> threads_;
};

}  // namespace kvs::gateway
