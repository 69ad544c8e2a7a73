#include "server/prep_pool.h"

#include <algorithm>

namespace kvs::server {

PrepPool::PrepPool(int threads, int max_queued) : max_queued_(std::max(0, max_queued)) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Work(); });
}

PrepPool::~PrepPool() { Stop(); }

bool PrepPool::TrySubmit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    // Tasks an idle thread is about to take do not wait: only the rest count.
    const int64_t idle = static_cast<int64_t>(threads_.size()) - busy_;
    if (static_cast<int64_t>(tasks_.size()) >= max_queued_ + idle) return false;
    tasks_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void PrepPool::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && threads_.empty()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int64_t PrepPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(tasks_.size());
}

int64_t PrepPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

void PrepPool::Work() {
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

}  // namespace kvs::server
