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
// own cost, grammar/matcher.h). Where that gives the same distribution
// (greedy, or sampling without top-k/top-p/min-p) the token is drawn first and
// the mask computed only when the grammar refuses it (UnmaskedDrawIsExact). Logprobs stay the model's raw distribution.
// Near max_tokens a constrained sequence is steered to a valid end
// (SteerToEnd): once the fewest bytes that complete the grammar, written as
// one-byte tokens, plus the stop token, would use up the tokens left (with
// kSteerSlack to spare), only tokens after which such a completion still fits
// stay allowed, so a reply that can end within max_tokens does (valid JSON,
// finish_reason "stop") instead of being cut. When even that cannot fit, the
// token that brings the end nearest is taken and the reply ends "length".
// Before that zone a single token can put the end out of reach (one that
// opens an optional part whose closing tags alone outgrow the tokens left:
// Hy3's `<arg_key:opensource>` of an optional parameter); such a draw is
// undone and drawn again as near the end (EndsInTime), so the steering's
// promise holds from the first token.
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

  // Speculative decoding (engine/speculative.h): whether drafts of this
  // sequence can be verified here, i.e. its next token's distribution
  // depends on the logits and its RNG only (no grammar, no penalties) and
  // it reports no logprobs.
  static bool CanVerifyDrafts(const Sequence& seq);
  // Verifies `draft` against the logits of the position before it.
  // Greedy: accepted iff it is the argmax; the result is the argmax.
  // Sampled: accepted with probability p(draft), else the result is drawn
  // from p without the draft (rejection sampling: the result is distributed
  // exactly as Sample's). REQUIRES: CanVerifyDrafts(seq).
  SampleResult AcceptDraft(std::span<const float> logits, Sequence& seq, int32_t draft, bool* accepted);

  int32_t vocab_size() const { return vocab_size_; }

 private:
  void ApplyPenalties(const Sequence& seq);  // on work_
  // The logits with the sequence's penalties and logit_bias applied (in
  // work_), or `logits` itself when it has none and no grammar.
  std::span<const float> Prepare(std::span<const float> logits, const Sequence& seq);
  // Draws among ids_[0, n) that `keep` accepts, by their work_ weights; -1
  // when they weigh nothing. One uniform from rng.
  template <class Keep>
  int32_t DrawAmong(size_t n, Keep keep, std::mt19937_64& rng);
  // Whether a constrained sequence may draw from the unmasked distribution
  // and mask only when the grammar refuses the drawn token (same result
  // distribution as masking first): greedy or untruncated sampling, and
  // not near the end where SteerToEnd applies.
  bool UnmaskedDrawIsExact(const Sequence& seq) const;
  // After an untruncated Draw (work_ = every token's weight) and a mask in
  // mask_: draws among the allowed tokens by weight; -1 when their weights
  // sum to 0 (all underflowed).
  int32_t DrawAllowed(std::mt19937_64& rng);
  // On work_ (already masked): restricts a constrained sequence with
  // `tokens_left` tokens of budget (this one included) to tokens after which
  // its grammar can still end in time, near that budget's end or when
  // `force`d; returns whether it did. Probes at most kSteerTopK likely
  // tokens plus the allowed one-byte and stop tokens.
  bool SteerToEnd(Sequence& seq, int32_t tokens_left, bool force);
  // After a token was accepted with `tokens_left` of budget (that token
  // included): whether the grammar can still complete in the tokens left.
  static bool EndsInTime(const grammar::GrammarMatcher& m, int32_t tokens_left);
  static constexpr int32_t kSteerSlack = 1;
  static constexpr size_t kSteerTopK = 32;
  // logits: the processed logits (may be work_ itself).
  int32_t Draw(std::span<const float> logits, const SamplingParams& p, std::mt19937_64& rng);
  // Draw's distribution without the draw: candidates ids_[0, n) (returns n)
  // with unnormalised probabilities in work_ (temperature, top-k, top-p, min-p).
  size_t Weigh(std::span<const float> logits, const SamplingParams& p);
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
