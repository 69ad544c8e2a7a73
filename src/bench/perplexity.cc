#include "bench/perplexity.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace kvs::bench {

double PerplexityEstimate::Ppl() const { return count > 0 ? std::exp(nll / static_cast<double>(count)) : 0.0; }

double PerplexityEstimate::PplError() const {
  if (count < 2) return 0.0;
  const double n = static_cast<double>(count);
  const double mean = nll / n;
  const double var = nll2 / n - mean * mean;
  // Rounding can make a zero variance slightly negative (every token equally likely).
  return var > 0.0 ? std::sqrt(var / (n - 1.0)) * Ppl() : 0.0;
}

double TokenLogProb(std::span<const float> logits, int32_t token) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0.0;
  for (float v : logits) sum += std::exp(static_cast<double>(v) - max);
  return static_cast<double>(logits[static_cast<size_t>(token)]) - max - std::log(sum);
}

StatusOr<int32_t> PerplexityChunks(int64_t n_tokens, const PerplexityOptions& o, int64_t model_ctx) {
  // Below 8, a window scores too few tokens for the error estimate to mean anything.
  if (o.ctx < 8) return InvalidArgument("context size {} is too small for perplexity (at least 8)", o.ctx);
  if (model_ctx > 0 && o.ctx > model_ctx) {
    return InvalidArgument("context size {} is above the model's trained context ({})", o.ctx, model_ctx);
  }
  if (o.batch < 1) return InvalidArgument("batch size must be positive (got {})", o.batch);
  if (n_tokens < 2 * static_cast<int64_t>(o.ctx)) {
    return InvalidArgument("the text tokenizes to {} tokens; perplexity with a context of {} needs at least {}",
                           n_tokens, o.ctx, 2 * static_cast<int64_t>(o.ctx));
  }
  const int64_t whole = n_tokens / o.ctx;
  return static_cast<int32_t>(o.max_chunks > 0 ? std::min<int64_t>(o.max_chunks, whole) : whole);
}

StatusOr<PerplexityEstimate> EvaluatePerplexity(engine::ModelRunner& runner, std::span<const int32_t> tokens,
                                                const PerplexityOptions& o, const PerplexityProgress& progress) {
  KVS_ASSIGN_OR_RETURN(const int32_t n_chunks, PerplexityChunks(static_cast<int64_t>(tokens.size()), o, 0));
  const int32_t bs = runner.block_size();
  const int32_t blocks = (o.ctx + bs - 1) / bs;
  if (blocks > runner.num_blocks()) {
    return FailedPrecondition("the KV pool holds {} positions; a window needs {}",
                              static_cast<int64_t>(runner.num_blocks()) * bs, o.ctx);
  }
  const int64_t vocab = runner.vocab_size();
  if (o.bos_id >= vocab) return InvalidArgument("BOS id {} is outside the vocabulary ({})", o.bos_id, vocab);
  // Every window reuses blocks [0, blocks): it starts at position 0, so it
  // overwrites what the previous one cached before attending to it.
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  const int32_t first = o.ctx / 2;
  const int32_t step = std::min(o.batch, o.ctx);
  std::vector<int32_t> window(static_cast<size_t>(o.ctx));
  // Only calls in the second half ask for logits, so they hold at most ctx - first rows.
  const int32_t rows = std::min(step, o.ctx - first);
  std::vector<float> logits(static_cast<size_t>(rows) * static_cast<size_t>(vocab));  // [rows, vocab]
  PerplexityEstimate est;
  for (int32_t c = 0; c < n_chunks; ++c) {
    const auto begin = tokens.begin() + static_cast<std::ptrdiff_t>(c) * o.ctx;
    std::copy(begin, begin + o.ctx, window.begin());
    if (o.bos_id >= 0) window[0] = o.bos_id;
    for (int32_t p = 0; p < o.ctx;) {
      // Calls end at `first` too, so the first half of a window asks for no logits.
      int32_t end = std::min(o.ctx, p + step);
      if (p < first && end > first) end = first;
      const bool scored = p >= first;
      engine::ForwardBatch batch;
      batch.seqs.push_back({0, std::span<const int32_t>(window.data() + p, static_cast<size_t>(end - p)), p, table,
                            scored, scored});
      const size_t n_logits = static_cast<size_t>(batch.NumLogits()) * static_cast<size_t>(vocab);
      KVS_RETURN_IF_ERROR(runner.Forward(batch, std::span<float>(logits.data(), n_logits)));
      if (scored) {
        // Position i's logits predict token i + 1; the window's last position predicts nothing in it.
        for (int32_t i = p; i < end && i + 1 < o.ctx; ++i) {
          const std::span<const float> row(logits.data() + static_cast<size_t>(i - p) * vocab, static_cast<size_t>(vocab));
          est.Add(-TokenLogProb(row, window[static_cast<size_t>(i) + 1]));
        }
      }
      p = end;
    }
    ++est.chunks;
    if (progress) progress(est);
  }
  return est;
}

}  // namespace kvs::bench
