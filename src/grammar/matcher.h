// GrammarMatcher: one sequence's position in a CompiledGrammar.
//
// Decode loop (what the sampler does for a constrained sequence):
//   matcher.FillNextTokenMask(mask);      // mask: [vocab.mask_words()] words
//   ApplyTokenMask(mask, logits);         // disallowed logits -> -inf
//   token = sample(logits);
//   matcher.AcceptToken(token);           // advances; a disallowed token is an error
// A stop token (Vocabulary::stop_ids) is allowed exactly when the text so far
// is a complete match; accepting it terminates the matcher. When the text is
// complete and the grammar allows nothing more, only stop tokens are allowed.
//
// State is a small value (the set of parse stacks), so Clone() is cheap: use
// it for n > 1 / best_of forks. Preemption by recompute needs nothing (the
// matcher already reflects the tokens generated so far). Rollback(k) undoes
// the last k accepted tokens (up to max_rollback, for speculative decoding
// or jump-forward).
//
// Errors: a FillNextTokenMask error (grammar too ambiguous, nesting deeper
// than PdaLimits::max_depth) means the request cannot continue under its
// constraint; the engine should finish it with an error.
//
// Thread-safety: one matcher per sequence, used by one thread at a time;
// matchers of the same CompiledGrammar may run on different threads.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/compiled_grammar.h"
#include "grammar/stack_set.h"

namespace kvs::grammar {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar, int32_t max_rollback = 16);
  GrammarMatcher(GrammarMatcher&&) = default;
  GrammarMatcher& operator=(GrammarMatcher&&) = default;
  GrammarMatcher(const GrammarMatcher&) = delete;
  GrammarMatcher& operator=(const GrammarMatcher&) = delete;

  // Explicit copy (same grammar, same position, same rollback history).
  GrammarMatcher Clone() const;

  // Writes the allowed next tokens into mask ([vocabulary().mask_words()]).
  // After termination nothing is allowed (FailedPrecondition).
  Status FillNextTokenMask(std::span<uint32_t> mask);
  // Whether one token is allowed (no mask needed; costs one token's walk).
  bool IsTokenAllowed(int32_t token);

  // Advances by a token; InvalidArgument (state unchanged) if not allowed.
  Status AcceptToken(int32_t token);
  // Advances by raw bytes (text forced by the caller, e.g. a prefix the
  // client supplied); InvalidArgument (state unchanged) if not allowed.
  // Not recorded for Rollback.
  Status AcceptBytes(std::string_view bytes);

  // Undoes the last n accepted tokens; n <= num_rollback_tokens().
  Status Rollback(int32_t n);
  int32_t num_rollback_tokens() const { return static_cast<int32_t>(history_.size()); }

  void Reset();
  bool CanEnd() const { return !terminated_ && state_.can_end; }
  bool IsTerminated() const { return terminated_; }
  // Fewest bytes that complete the text (0 when it can end now): lets a
  // caller that must stop (max_tokens) steer to a valid end.
  int32_t MinCompletionBytes() const;

  // Whether the last IsTokenAllowed/AcceptToken/AcceptBytes failed on a
  // limit (too many parses, work budget) rather than on a mismatch.
  bool last_walk_hit_limit() const { return walk_overflow_; }
  const CompiledGrammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const CompiledGrammar>& grammar_ptr() const { return grammar_; }
  const StackSet& state() const { return state_; }

 private:
  // Bytes from `from`; false (and *to unspecified) when rejected or dead.
  bool Walk(const StackSet& from, std::string_view bytes, StackSet* to);
  void PushHistory();
  Status FillFromStack(std::span<const int32_t> stack, std::span<uint32_t> mask);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<Pda> pda_;   // holds scratch buffers; references grammar_'s automaton
  int32_t max_rollback_;
  StackSet state_;
  bool terminated_ = false;
  std::deque<std::pair<StackSet, bool>> history_;  // previous (state, terminated)
  // Scratch for mask filling.
  std::vector<uint32_t> tmp_mask_;
  TrieWalkScratch scratch_;
  std::vector<int32_t> applied_states_;
  bool walk_overflow_ = false;  // the last Walk failed on a limit, not a mismatch
};

// Sets logits of tokens whose mask bit is 0 to -infinity.
// logits: [n] with n <= mask.size() * 32.
void ApplyTokenMask(std::span<const uint32_t> mask, std::span<float> logits);

}  // namespace kvs::grammar
