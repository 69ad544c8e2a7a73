#include "gateway/fair_queue.h"

#include <algorithm>

namespace kvs::gateway {

FairQueue::Cancel FairQueue::Push(const std::string& tenant, double weight, double cost, Resume resume) {
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard<std::mutex> lock(mu_);
  double& last = last_finish_[tenant];
  const double finish = std::max(vtime_, last) + std::max(cost, 1.0) / std::max(weight, 1e-6);
  last = finish;
  waiting_.emplace(std::make_tuple(finish, next_seq_++), Entry{tenant, std::move(resume), cancelled});
  return cancelled;
}

bool FairQueue::PopAndResume() {
  Resume resume;
  {
    std::lock_guard<std::mutex> lock(mu_);
    while (!waiting_.empty()) {
      auto it = waiting_.begin();
      Entry e = std::move(it->second);
      const double tag = std::get<0>(it->first);
      waiting_.erase(it);
      if (e.cancelled->load()) continue;
      vtime_ = std::max(vtime_, tag);
      resume = std::move(e.resume);
      break;
    }
    if (waiting_.empty()) {
      // Nobody waits: tags of idle tenants no longer matter.
      std::erase_if(last_finish_, [this](const auto& kv) { return kv.second <= vtime_; });
    }
  }
  if (!resume) return false;
  resume();
  return true;
}

size_t FairQueue::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

}  // namespace kvs::gateway
