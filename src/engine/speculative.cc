#include "engine/speculative.h"

#include <algorithm>

namespace kvs::engine {

Status SpeculativeConfig::Validate() const {
  if (method == Method::kOff) return Status::Ok();
  if (num_tokens < 1 || num_tokens > 64) {
    return InvalidArgument("speculative.num_tokens must be in [1, 64], got {}", num_tokens);
  }
  if (ngram_min < 1 || ngram_max < ngram_min || ngram_max > 64) {
    return InvalidArgument("speculative n-gram sizes must satisfy 1 <= ngram_min <= ngram_max <= 64, got {} and {}",
                           ngram_min, ngram_max);
  }
  return Status::Ok();
}

StatusOr<SpeculativeConfig::Method> ParseSpeculativeMethod(const std::string& name) {
  if (name == "off") return SpeculativeConfig::Method::kOff;
  if (name == "ngram") return SpeculativeConfig::Method::kNgram;
  if (name == "draft") return SpeculativeConfig::Method::kDraft;
  return InvalidArgument("speculative method \"{}\" is not one of off, ngram, draft", name);
}

int32_t ProposeNgram(std::span<const int32_t> tokens, int32_t ngram_min, int32_t ngram_max, int32_t max_tokens,
                     std::vector<int32_t>* out) {
  const auto len = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0) return 0;
  for (int64_t n = std::min<int64_t>(ngram_max, len - 1); n >= ngram_min; --n) {
    const int32_t* suffix = tokens.data() + (len - n);
    // The most recent earlier occurrence: start positions len-n-1 down to 0.
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (tokens[static_cast<size_t>(j)] != suffix[0]) continue;
      if (!std::equal(suffix, suffix + n, tokens.data() + j)) continue;
      const int64_t from = j + n;  // < len: j <= len - n - 1
      const int64_t count = std::min<int64_t>(max_tokens, len - from);
      out->insert(out->end(), tokens.begin() + from, tokens.begin() + from + count);
      return static_cast<int32_t>(count);
    }
  }
  return 0;
}

int32_t SpecControl::Budget(int32_t num_tokens) {
  if (max_draft < 0) max_draft = num_tokens;
  if (pause > 0) {
    --pause;
    return 0;
  }
  return std::min(max_draft, num_tokens);
}

void SpecControl::Update(int32_t drafted, int32_t accepted, int32_t num_tokens) {
  if (drafted <= 0) return;
  if (accepted == 0) {
    max_draft = std::max(1, max_draft / 2);
    ++misses;
    if (misses >= 2) pause = std::min(kMaxPause, 1 << std::min(misses, 6));
    return;
  }
  misses = 0;
  // Full acceptance: try one more; partial: the run that held, plus one
  // (drafts past the usual run cost a verification row each for nothing).
  max_draft = accepted == drafted ? std::min(num_tokens, max_draft + 1) : std::min(num_tokens, accepted + 1);
}

}  // namespace kvs::engine
