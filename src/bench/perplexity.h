// Perplexity of a token stream, by llama-perplexity's method, so figures
// compare with llama.cpp's: the stream is cut into non-overlapping windows of
// `ctx` tokens, each evaluated from an empty cache with its first token
// replaced by BOS (when the vocabulary adds one); in each window the tokens
// after position ctx/2 are scored (position i's logits predict token i+1), so
// every prediction sees at least ctx/2 tokens of context. The estimate is
// exp(mean NLL) with the standard error of the mean NLL carried through exp.
//
// Used by `kvserve perplexity` (src/cli/cmd_perplexity.cc); tested against
// the NumPy reference tools/perplexity_ref.py by tests/cli/perplexity_test.sh.
// Thread-safety: EvaluatePerplexity drives the runner it is given, so it runs
// on the one thread that owns that runner; the rest are plain values.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "base/status.h"
#include "engine/model_runner.h"

namespace kvs::bench {

struct PerplexityOptions {
  int32_t ctx = 512;        // tokens per window (llama-perplexity's -c)
  int32_t batch = 2048;     // most tokens per forward call; a window takes ceil(ctx / batch) calls
  int32_t max_chunks = -1;  // windows to evaluate; <= 0: every whole window of the stream
  int32_t bos_id = -1;      // written over each window's first token; -1: the stream's token stays
};

// Running sums of the scored tokens' negative log-likelihoods.
struct PerplexityEstimate {
  int64_t count = 0;    // tokens scored
  double nll = 0.0;     // sum of -log p(token)
  double nll2 = 0.0;    // sum of (-log p(token))^2
  int32_t chunks = 0;   // windows evaluated

  void Add(double token_nll) {
    ++count;
    nll += token_nll;
    nll2 += token_nll * token_nll;
  }
  double Ppl() const;
  // Standard error of Ppl(): ppl * sqrt(var(nll) / (count - 1)); 0 with fewer than two tokens.
  double PplError() const;
};

// log softmax(logits)[token], in double precision. token must index logits.
double TokenLogProb(std::span<const float> logits, int32_t token);

// Windows a stream of n_tokens gives, or the error llama-perplexity gives
// too: fewer than 2 * ctx tokens; ctx below 8 (too few tokens scored per
// window) or above model_ctx (the model's trained context).
StatusOr<int32_t> PerplexityChunks(int64_t n_tokens, const PerplexityOptions& o, int64_t model_ctx);

// Called after each window with the estimate so far (the `[1]x,[2]y` line).
using PerplexityProgress = std::function<void(const PerplexityEstimate&)>;

// Evaluates the windows of `tokens` (the whole text, tokenized as llama.cpp
// does: with BOS first when the vocabulary adds one) on `runner`, whose KV
// storage must hold ctx positions (block_size * num_blocks >= ctx; blocks
// 0.. are used) and whose activation buffers take min(batch, ctx) tokens.
// Call PerplexityChunks first: this checks only what the runner needs.
StatusOr<PerplexityEstimate> EvaluatePerplexity(engine::ModelRunner& runner, std::span<const int32_t> tokens,
                                                const PerplexityOptions& o, const PerplexityProgress& progress);

}  // namespace kvs::bench
