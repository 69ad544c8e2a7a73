#include "engine/sampling_params.h"

#include <cmath>

namespace kvs::engine {

Status SamplingParams::Validate(int32_t vocab_size) const {
  // Written as !(in range) so that NaN fails every check.
  if (!(temperature >= 0.0f && std::isfinite(temperature))) {
    return InvalidArgument("temperature must be >= 0, got {}", temperature);
  }
  if (top_k < 0) return InvalidArgument("top_k must be >= 0 (0 disables it), got {}", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return InvalidArgument("top_p must be in (0, 1], got {}", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return InvalidArgument("min_p must be in [0, 1], got {}", min_p);
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty))) {
    return InvalidArgument("repetition_penalty must be > 0, got {}", repetition_penalty);
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return InvalidArgument("presence_penalty must be in [-2, 2], got {}", presence_penalty);
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return InvalidArgument("frequency_penalty must be in [-2, 2], got {}", frequency_penalty);
  }
  if (max_tokens < 1) return InvalidArgument("max_tokens must be >= 1, got {}", max_tokens);
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("stop token id {} is outside the vocabulary [0, {})", id, vocab_size);
    }
  }
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxLogprobs)) {
    return InvalidArgument("logprobs must be in [0, {}], got {}", kMaxLogprobs, *logprobs);
  }
  if (logit_bias.size() > kMaxLogitBias) {
    return InvalidArgument("logit_bias has {} entries; at most {} are allowed", logit_bias.size(), kMaxLogitBias);
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("logit_bias token id {} is outside the vocabulary [0, {})", id, vocab_size);
    }
    if (!(bias >= -100.0f && bias <= 100.0f)) {
      return InvalidArgument("logit_bias for token {} must be in [-100, 100], got {}", id, bias);
    }
  }
  return Status::Ok();
}

}  // namespace kvs::engine
