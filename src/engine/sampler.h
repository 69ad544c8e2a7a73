// Sampler: turns one sequence's logits into its next token, following the
// sequence's SamplingParams (order and semantics in sampling_params.h).
// Randomness comes only from the sequence's own RNG (seq.rng), advanced once
// per sampled token, so a seeded request gives the same output whatever else
// is batched with it, and after a preemption it continues identically.
// Greedy sampling draws nothing.
//
// Logprobs: log-softmax of the raw logits (the model's distribution, as
// OpenAI reports it), for the sampled token plus the top-N tokens by raw
// logit (ties: lower id first).
//
// Constrained sequences (seq.matcher): the grammar's token mask sets every
// disallowed logit to -inf after the penalties and logit_bias, and the drawn
// token advances the matcher (FillNextTokenMask + AcceptToken: the grammar's
// own cost, grammar/matcher.h). Logprobs stay the model's raw distribution.
//
// Cost: O(vocab) per token (one exp per candidate); top-k and top-p are
// O(vocab) expected selections (quickselect), never a sort of the vocabulary.
// Thread-safety: one Sampler per thread (it keeps scratch buffers).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/sequence.h"

namespace kvs::engine {

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  int32_t token_id = 0;
  float logprob = 0.0f;            // of token_id, when logprobs were asked for
  std::vector<TokenLogprob> top;   // [params.logprobs], most likely first
  // Constrained sequences: the matcher could not go on (mask error, e.g. a
  // grammar limit); token_id is still a valid id but the sequence must end
  // with this error.
  Status error;
  // The token completed the grammar (the matcher accepted a stop token):
  // the sequence ends with kStop even if the token is not an engine EOS id.
  bool grammar_done = false;
};

class Sampler {
 public:
  explicit Sampler(int32_t vocab_size);

  // logits: [vocab_size] for the sequence's last token; they are not modified.
  SampleResult Sample(std::span<const float> logits, Sequence& seq);

  int32_t vocab_size() const { return vocab_size_; }

 private:
  void ApplyPenalties(const Sequence& seq);  // on work_
  // logits: the processed logits (may be work_ itself).
  int32_t Draw(std::span<const float> logits, const SamplingParams& p, std::mt19937_64& rng);
  // Puts the k most likely ids (by logits) in ids_[0, k), in heap order.
  void SelectTopK(std::span<const float> logits, size_t k);
  // Moves the top-p nucleus of ids_[0, n) (by work_ weights) to the front;
  // returns its size. O(n) expected.
  size_t SelectNucleus(size_t n, double target);
  void FillLogprobs(std::span<const float> logits, int32_t n, SampleResult& r);

  int32_t vocab_size_;
  std::vector<float> work_;       // [vocab] penalised logits, then candidate weights
  std::vector<int32_t> ids_;      // [vocab] candidate ids
  std::vector<uint32_t> stamp_;   // [vocab] penalty bookkeeping, by generation
  std::vector<int32_t> count_;    // [vocab] occurrences in the output
  std::vector<int32_t> touched_;  // ids seen in this generation
  std::vector<uint32_t> mask_;    // [vocab / 32 rounded up] a constrained sequence's allowed tokens
  uint32_t generation_ = 0;
};

// A uniform double in [0, 1) from 53 random bits (same on every platform,
// unlike std::uniform_real_distribution).
double UniformDouble(std::mt19937_64& rng);

}  // namespace kvs::engine
