#include "engine/request.h"

namespace kvs::engine {

Status ValidateRequest(const Request& request, const RequestLimits& limits) {
  const auto num_prompt = static_cast<int64_t>(request.prompt_token_ids.size());
  if (num_prompt == 0) return InvalidArgument("the prompt is empty; at least one token is required");
  for (int64_t i = 0; i < num_prompt; ++i) {
    const int32_t t = request.prompt_token_ids[static_cast<size_t>(i)];
    if (t < 0 || t >= limits.vocab_size) {
      return InvalidArgument("prompt token {} at position {} is outside the vocabulary [0, {})", t, i,
                             limits.vocab_size);
    }
  }
  KVS_RETURN_IF_ERROR(request.sampling.Validate(limits.vocab_size));
  if (request.grammar && request.grammar->vocabulary().size() != limits.vocab_size) {
    return InvalidArgument("the grammar was compiled for a vocabulary of {} tokens, the model has {}",
                           request.grammar->vocabulary().size(), limits.vocab_size);
  }
  const int64_t max_tokens = request.sampling.max_tokens;
  if (num_prompt + max_tokens > limits.max_context_length) {
    return OutOfRange("prompt ({} tokens) + max_tokens ({}) = {} tokens exceeds max_context_length ({})", num_prompt,
                      max_tokens, num_prompt + max_tokens, limits.max_context_length);
  }
  // The last sampled token is never written to the KV cache.
  const int64_t positions = num_prompt + max_tokens - 1;
  const int64_t blocks = (positions + limits.block_size - 1) / limits.block_size;
  if (blocks > limits.num_blocks) {
    return OutOfRange(
        "prompt ({} tokens) + max_tokens ({}) needs up to {} KV blocks of {} tokens, but the whole KV pool has {} "
        "blocks ({} tokens); lower max_tokens or give the server more KV memory",
        num_prompt, max_tokens, blocks, limits.block_size, limits.num_blocks,
        static_cast<int64_t>(limits.num_blocks) * limits.block_size);
  }
  return Status::Ok();
}

StatusOr<ValidatedRequest> ValidatedRequest::Validate(Request request, const RequestLimits& limits) {
  KVS_RETURN_IF_ERROR(ValidateRequest(request, limits));
  return ValidatedRequest(std::move(request), limits);
}

void RequestStream::Push(StreamChunk delta) {
  bool notify = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    KVS_CHECK_MSG(!final_pushed_, "request {}: output after its final chunk", request_id_);
    notify = !has_pending_ && on_ready_ != nullptr;
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
  if (notify) on_ready_();
}

void RequestStream::SetOnReady(std::function<void()> fn) {
  bool ready = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    KVS_CHECK_MSG(on_ready_ == nullptr, "request {}: SetOnReady called twice", request_id_);
    on_ready_ = std::move(fn);
    ready = has_pending_;
  }
  if (ready) on_ready_();
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
