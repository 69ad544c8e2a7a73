#include "engine/sampling_params.h"

#include <cmath>

#include <fmt/format.h>

namespace kvs::engine {

std::string ParamLimit::Message(std::string_view got, std::string_view name) const {
  return fmt::format("'{}' must be {} in {}{}, {}], got {}", name.empty() ? std::string_view(param) : name,
                     integer ? "an integer" : "a number", lo_open ? "(" : "[", lo, hi, got);
}

namespace {

Status Check(const ParamLimit& limit, double v) {
  if (limit.Contains(v)) return Status::Ok();
  return InvalidArgument("{}", limit.Message(fmt::format("{}", v)));
}

}  // namespace

Status SamplingParams::Validate(int32_t vocab_size) const {
  using L = SamplingLimits;
  // Contains is written so that NaN fails every check.
  KVS_RETURN_IF_ERROR(Check(L::kTemperature, temperature));
  KVS_RETURN_IF_ERROR(Check(L::kTopK, top_k));
  KVS_RETURN_IF_ERROR(Check(L::kTopP, top_p));
  KVS_RETURN_IF_ERROR(Check(L::kMinP, min_p));
  KVS_RETURN_IF_ERROR(Check(L::kRepetitionPenalty, repetition_penalty));
  KVS_RETURN_IF_ERROR(Check(L::kPresencePenalty, presence_penalty));
  KVS_RETURN_IF_ERROR(Check(L::kFrequencyPenalty, frequency_penalty));
  KVS_RETURN_IF_ERROR(Check(L::kMaxTokens, max_tokens));
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("stop token id {} is outside the vocabulary [0, {})", id, vocab_size);
    }
  }
  if (logprobs) KVS_RETURN_IF_ERROR(Check(L::kLogprobs, *logprobs));
  if (logit_bias.size() > kMaxLogitBias) {
    return InvalidArgument("logit_bias has {} entries; at most {} are allowed", logit_bias.size(), kMaxLogitBias);
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return InvalidArgument("logit_bias token id {} is outside the vocabulary [0, {})", id, vocab_size);
    }
    if (!L::kLogitBias.Contains(bias)) {
      // Starts with the field's name, which the server reads to name the param.
      return InvalidArgument("logit_bias for token {} must be in [{}, {}], got {}", id, L::kLogitBias.lo,
                             L::kLogitBias.hi, bias);
    }
  }
  return Status::Ok();
}

}  // namespace kvs::engine
