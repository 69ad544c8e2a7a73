// Speculative decoding. Drafts come either from n-gram prompt lookup: the
// sequence itself (prompt and output), as the tokens that followed the most
// recent earlier occurrence of its current suffix (no second model; it
// serves long-context work that copies: quoting, summarising, editing code
// and documents, RAG answers); or from a draft model of the same vocabulary
// (engine/draft_model.h), whose greedy continuation they are.
//
// The engine (engine.h) proposes drafts for running decode sequences before
// each schedule (a draft model: how many; it fills them after the schedule), the scheduler runs [last token, drafts...] as one chunk
// with every position's logits, and the engine verifies them in order with
// Sampler::AcceptDraft: greedy sequences accept a draft iff it is the
// argmax (output identical to decoding without speculation); sampled ones
// accept draft d with probability p(d) and on rejection draw from p without
// d, which is exactly p (a draft is a point mass). Each verification emits
// the accepted drafts plus one token (the correction, or the bonus token
// after the last accepted draft). Rejected drafts' KV lies beyond
// num_computed_tokens and is overwritten by the next step.
//
// SpecControl adapts per sequence: the draft length grows by one after a
// fully accepted draft, becomes the accepted run plus one after a partly
// accepted one and halves after a wholly rejected one; repeated
// wholly rejected drafts pause proposing for a number of steps that doubles
// (up to kMaxPause), so a sequence whose text does not repeat costs
// almost nothing.
// Thread-safety: plain functions and data, engine thread only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace kvs::engine {

struct SpeculativeConfig {
  enum class Method { kOff, kNgram, kDraft };
  Method method = Method::kOff;
  int32_t num_tokens = 5;  // most draft tokens per sequence and step
  int32_t ngram_min = 2;   // shortest suffix looked up
  int32_t ngram_max = 4;   // longest suffix looked up (tried first)

  bool enabled() const { return method != Method::kOff; }
  // InvalidArgument naming the field.
  Status Validate() const;
};

// "off", "ngram", "draft"; InvalidArgument naming the choices for anything else.
StatusOr<SpeculativeConfig::Method> ParseSpeculativeMethod(const std::string& name);

// Appends to *out at most max_tokens tokens that followed the most recent
// earlier occurrence of the longest suffix of `tokens` of ngram_max down to
// ngram_min tokens; returns how many. The continuation is taken from
// `tokens` and may run into the suffix itself (a repeating pattern).
// Cost: O(tokens.size() * ngram_max) in the worst case.
int32_t ProposeNgram(std::span<const int32_t> tokens, int32_t ngram_min, int32_t ngram_max, int32_t max_tokens,
                     std::vector<int32_t>* out);

// Per-sequence adaptive draft length (see the header comment).
struct SpecControl {
  static constexpr int32_t kMaxPause = 64;
  int32_t max_draft = -1;    // -1: not started (the config's num_tokens)
  int32_t misses = 0;        // wholly rejected drafts in a row
  int32_t pause = 0;         // steps left without proposing
  // Draft tokens to propose this step (0: none), given the config's cap.
  int32_t Budget(int32_t num_tokens);
  // After a verification of `drafted` tokens of which `accepted` held.
  void Update(int32_t drafted, int32_t accepted, int32_t num_tokens);
};

}  // namespace kvs::engine
