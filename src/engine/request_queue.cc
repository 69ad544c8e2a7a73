#include "engine/request_queue.h"

namespace kvs::engine {

StatusOr<std::shared_ptr<RequestStream>> RequestQueue::Push(Request request) {
  const Clock::time_point arrival = Clock::now();
  std::shared_ptr<RequestStream> stream;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return Status(StatusCode::kUnavailable, "the engine is stopped");
    if (num_queued_ >= max_queued_) {
      return ResourceExhausted("{} requests are already queued (max_queued_requests = {}); retry later",
                               num_queued_, max_queued_);
    }
    if (request.request_id.empty()) {
      do {
        request.request_id = fmt::format("req-{}", next_id_++);
      } while (live_.count(request.request_id) != 0);
    } else if (live_.count(request.request_id) != 0) {
      return InvalidArgument("request id '{}' is already in use by a live request", request.request_id);
    }
    live_.insert(request.request_id);
    ++num_queued_;
    stream = std::make_shared<RequestStream>(request.request_id);
    requests_.push_back({std::move(request), stream, arrival});
  }
  cv_.notify_one();
  return stream;
}

Status RequestQueue::Cancel(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_.count(request_id) == 0) return NotFound("no live request has id '{}'", request_id);
    cancels_.push_back(request_id);
  }
  cv_.notify_one();
  return Status::Ok();
}

bool RequestQueue::WaitForWork(bool busy) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!busy) cv_.wait(lock, [this] { return closed_ || !requests_.empty() || !cancels_.empty(); });
  return !closed_;
}

void RequestQueue::Drain(std::vector<PendingRequest>* requests, std::vector<std::string>* cancels) {
  requests->clear();
  cancels->clear();
  std::lock_guard<std::mutex> lock(mu_);
  requests->swap(requests_);
  cancels->swap(cancels_);
}

void RequestQueue::OnAdmitted() {
  std::lock_guard<std::mutex> lock(mu_);
  --num_queued_;
}

void RequestQueue::OnRetired(const std::string& request_id, bool was_queued) {
  std::lock_guard<std::mutex> lock(mu_);
  live_.erase(request_id);
  if (was_queued) --num_queued_;
}

void RequestQueue::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  cv_.notify_all();
}

int32_t RequestQueue::num_pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int32_t>(requests_.size());
}

}  // namespace kvs::engine
