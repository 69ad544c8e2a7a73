#include "frontend/work_queue.h"

#include <algorithm>

namespace kvs::frontend {

WorkQueue::WorkQueue(int threads, int64_t max_queued)
    : max_queued_(std::max<int64_t>(0, max_queued)), threads_count_(std::max(1, threads)) {
  for (int i = 0; i < threads_count_; ++i) threads_.emplace_back([this] { Work(); });
}

WorkQueue::~WorkQueue() { Stop(); }

bool WorkQueue::TrySubmit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    // Tasks an idle thread is about to take do not wait: only the rest count.
    const int64_t idle = threads_count_ - busy_;
    if (static_cast<int64_t>(tasks_.size()) >= max_queued_ + idle) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void WorkQueue::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
}

void WorkQueue::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> lock(join_mu_);
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

int64_t WorkQueue::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(tasks_.size());
}

int64_t WorkQueue::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

void WorkQueue::Work() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;  // stopping, and nothing left to run
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++busy_;
    }
    task();
    std::lock_guard<std::mutex> lock(mu_);
    --busy_;
  }
}

}  // namespace kvs::frontend
