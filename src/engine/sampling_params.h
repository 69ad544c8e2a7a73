// SamplingParams: how one request turns logits into tokens and when it stops.
// A plain value, validated once where a request enters (Validate, through
// ValidatedRequest::Validate); everything downstream trusts it. The ranges
// are one table (SamplingLimits): the API parser reads a field against the
// same entry and says the same message, so the API and the engine cannot
// disagree on a bound.
//
// Processing order (sampler.cc): raw logits -> repetition, presence and
// frequency penalties -> logit_bias -> the grammar mask (a constrained
// sequence, sequence.h: disallowed tokens to -inf) -> greedy argmax if temperature == 0, else
// logits / temperature -> softmax -> top-k -> top-p -> min-p -> draw.
// Logprobs are the model's own distribution: log-softmax of the RAW logits,
// before penalties, temperature and truncation (what OpenAI reports).
// Thread-safety: value type.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kvs::engine {

// The most top-N alternatives a request may ask for (OpenAI's limit).
inline constexpr int32_t kMaxLogprobs = 20;

// The range of one bounded sampling parameter, under its API name (OpenAI's
// documented ranges where OpenAI has the field; vLLM's names otherwise).
struct ParamLimit {
  const char* param;  // the request field: "temperature", ...
  double lo = 0, hi = 0;
  bool lo_open = false;  // (lo, hi] instead of [lo, hi]
  bool integer = false;

  // False for NaN and infinities outside the range.
  bool Contains(double v) const { return v >= lo && v <= hi && !(lo_open && v == lo); }
  // "'temperature' must be a number in [0, 2], got 3" (got: the value as
  // the caller shows it), the message of both the API's 400 and Validate.
  // `param` overrides the field name (e.g. top_logprobs for logprobs).
  std::string Message(std::string_view got, std::string_view param = {}) const;
};

// The one table of sampling limits.
struct SamplingLimits {
  static constexpr ParamLimit kTemperature{"temperature", 0, 2};
  static constexpr ParamLimit kTopP{"top_p", 0, 1, /*lo_open=*/true};
  // -1 and 0 both disable it (vLLM's -1).
  static constexpr ParamLimit kTopK{"top_k", -1, std::numeric_limits<int32_t>::max(), false, /*integer=*/true};
  static constexpr ParamLimit kMinP{"min_p", 0, 1};
  static constexpr ParamLimit kPresencePenalty{"presence_penalty", -2, 2};
  static constexpr ParamLimit kFrequencyPenalty{"frequency_penalty", -2, 2};
  static constexpr ParamLimit kRepetitionPenalty{"repetition_penalty", 0, 10, /*lo_open=*/true};
  static constexpr ParamLimit kMaxTokens{"max_tokens", 1, std::numeric_limits<int32_t>::max(), false, true};
  static constexpr ParamLimit kLogprobs{"logprobs", 0, kMaxLogprobs, false, /*integer=*/true};
  static constexpr ParamLimit kLogitBias{"logit_bias", -100, 100};
};

struct SamplingParams {
  // Ranges: SamplingLimits.
  float temperature = 1.0f;         // [0, 2]; 0: greedy (argmax, ties to the lowest id)
  int32_t top_k = 0;                // <= 0: off; else keep the k most likely tokens
  float top_p = 1.0f;               // (0, 1]; 1: off
  float min_p = 0.0f;               // [0, 1]; drop tokens with p < min_p * p_max
  float repetition_penalty = 1.0f;  // (0, 10]; 1: off. Prompt and output tokens:
                                    // positive logits / penalty, negative * penalty
  float presence_penalty = 0.0f;    // [-2, 2]; subtracted once per token seen in the output
  float frequency_penalty = 0.0f;   // [-2, 2]; subtracted per occurrence in the output
  std::optional<uint64_t> seed;     // same seed, same prompt: same output, whatever the batch
  int32_t max_tokens = 16;          // >= 1 output tokens, the stop token included
  std::vector<int32_t> stop_token_ids;  // stop when one is sampled (in addition to EOS)
  bool ignore_eos = false;          // keep going after the model's EOS ids
  bool speculative = true;          // false: no speculative drafts for this request (engine/speculative.h)
  std::optional<int32_t> logprobs;  // report logprobs with this many top alternatives
                                    // [0, kMaxLogprobs]; nullopt: no logprobs
  // OpenAI's logit_bias: added to the token's logit after the penalties
  // (token id in [0, vocab), bias in [-100, 100]; -100 bans, 100 forces).
  std::vector<std::pair<int32_t, float>> logit_bias;

  bool greedy() const { return temperature == 0.0f; }
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }
  // Maximum entries of logit_bias (OpenAI's limit is 300).
  static constexpr size_t kMaxLogitBias = 1024;
  // InvalidArgument naming the offending field and value.
  Status Validate(int32_t vocab_size) const;
};

}  // namespace kvs::engine
