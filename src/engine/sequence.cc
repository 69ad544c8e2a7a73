#include "engine/sequence.h"

#include <algorithm>

namespace kvs::engine {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kCancelled: return "cancelled";
    case FinishReason::kError: return "error";
  }
  return "unknown";
}

Sequence::Sequence(int64_t id, std::string req_id, std::vector<int32_t> prompt, SamplingParams p)
    : seq_id(id),
      request_id(std::move(req_id)),
      params(std::move(p)),
      arrival_time(Clock::now()),
      token_ids(std::move(prompt)) {
  num_prompt_tokens = static_cast<int32_t>(token_ids.size());
  token_ids.reserve(token_ids.size() + static_cast<size_t>(params.max_tokens));
}

std::optional<FinishReason> Sequence::AppendToken(int32_t token, std::span<const int32_t> eos_token_ids,
                                                  int32_t max_context_length) {
  token_ids.push_back(token);
  const auto contains = [token](std::span<const int32_t> ids) {
    return std::find(ids.begin(), ids.end(), token) != ids.end();
  };
  if ((!params.ignore_eos && contains(eos_token_ids)) || contains(params.stop_token_ids)) {
    stop_token_id = token;
    return FinishReason::kStop;
  }
  if (num_output_tokens() >= params.max_tokens || num_tokens() >= max_context_length) {
    return FinishReason::kLength;
  }
  return std::nullopt;
}

}  // namespace kvs::engine
