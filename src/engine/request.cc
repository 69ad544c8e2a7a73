#include "engine/request.h"

namespace kvs::engine {

void RequestStream::Push(StreamChunk delta) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    KVS_CHECK_MSG(!final_pushed_, "request {}: output after its final chunk", request_id_);
    if (!has_pending_) {
      pending_ = std::move(delta);
    } else {
      StreamChunk& p = pending_;
      p.token_ids.insert(p.token_ids.end(), delta.token_ids.begin(), delta.token_ids.end());
      for (OutputLogprobs& l : delta.logprobs) p.logprobs.push_back(std::move(l));
      p.token_times_s.insert(p.token_times_s.end(), delta.token_times_s.begin(), delta.token_times_s.end());
      p.finish_reason = delta.finish_reason;
      p.stop_token_id = delta.stop_token_id;
      p.error = std::move(delta.error);
      p.num_prompt_tokens = delta.num_prompt_tokens;
      p.num_output_tokens = delta.num_output_tokens;
      p.num_cached_tokens = delta.num_cached_tokens;
      p.num_computed_prompt_tokens = delta.num_computed_prompt_tokens;
      p.num_preemptions = delta.num_preemptions;
      p.timings = delta.timings;
    }
    has_pending_ = true;
    final_pushed_ = pending_.finished();
  }
  cv_.notify_all();
}

StatusOr<StreamChunk> RequestStream::TakeLocked() {
  if (has_pending_) {
    has_pending_ = false;
    final_taken_ = pending_.finished();
    return std::exchange(pending_, StreamChunk{});
  }
  if (final_taken_) return OutOfRange("request {}: the stream has ended", request_id_);
  return Status(StatusCode::kDeadlineExceeded, fmt::format("request {}: no output yet", request_id_));
}

StatusOr<StreamChunk> RequestStream::Next(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  // A zero timeout polls without a timed wait (no futex call).
  if (timeout > std::chrono::milliseconds::zero()) {
    cv_.wait_for(lock, timeout, [this] { return has_pending_ || final_taken_; });
  }
  return TakeLocked();
}

StatusOr<StreamChunk> RequestStream::Next() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return has_pending_ || final_taken_; });
  return TakeLocked();
}

bool RequestStream::finished() const {
  std::lock_guard<std::mutex> lock(mu_);
  return final_pushed_;
}

}  // namespace kvs::engine
