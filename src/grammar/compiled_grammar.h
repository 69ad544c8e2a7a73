// CompiledGrammar: a Grammar compiled for one model's Vocabulary, shared by
// every sequence constrained by it (hold it in a shared_ptr; the API layer
// may cache it by constraint text). GrammarMatcher (matcher.h) is the
// per-sequence state.
//
// Token masks are computed the way xgrammar does it: for each automaton
// state q, a walk of the vocabulary trie from a stack [caller?, q] sorts
// every token into accepted (whatever the caller), rejected (whatever the
// caller) or uncertain (the token finishes q's rule and goes on into text the
// caller decides). That TokenCacheEntry is computed on first use (or all at
// once by PrecomputeAll) and kept; at run time only the uncertain tokens are
// checked against the sequence's real stack.
//
// Thread-safety: const methods are safe from many threads at once; the lazily
// filled cache is published with atomics (two threads may both compute an
// entry; one result is kept).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/stack_set.h"
#include "grammar/vocabulary.h"

namespace kvs::grammar {

struct CompileOptions {
  GrammarLimits limits;
  PdaLimits pda;
};

// The precomputed verdicts of one automaton state (see above).
struct TokenCacheEntry {
  bool rejected_form = false;        // ids are the rejected tokens, else the accepted ones
  std::vector<int32_t> ids;          // ascending
  std::vector<int32_t> uncertain;    // trie (byte) order
  int32_t growth = 0;                // most frames any token's parse stacks above the state
  bool overflow = false;             // too ambiguous: more than PdaLimits::max_stacks parses
};

class CompiledGrammar {
 public:
  static StatusOr<std::shared_ptr<const CompiledGrammar>> Compile(const Grammar& grammar,
                                                                  std::shared_ptr<const Vocabulary> vocabulary,
                                                                  const CompileOptions& options = {});
  // ParseGbnf + Compile.
  static StatusOr<std::shared_ptr<const CompiledGrammar>> FromGbnf(std::string_view gbnf,
                                                                   std::shared_ptr<const Vocabulary> vocabulary,
                                                                   const CompileOptions& options = {});
  ~CompiledGrammar();
  CompiledGrammar(const CompiledGrammar&) = delete;
  CompiledGrammar& operator=(const CompiledGrammar&) = delete;

  const Automaton& automaton() const { return automaton_; }
  const Vocabulary& vocabulary() const { return *vocabulary_; }
  const std::shared_ptr<const Vocabulary>& vocabulary_ptr() const { return vocabulary_; }
  const CompileOptions& options() const { return options_; }

  // The cache entry of state q, computed now if needed.
  const TokenCacheEntry& CacheFor(int32_t q) const;
  // Computes every state's entry (e.g. on an API worker before the request
  // reaches the engine thread, so no decode step pays for it).
  void PrecomputeAll() const;
  int32_t num_cached() const;

 private:
  CompiledGrammar(Automaton a, std::shared_ptr<const Vocabulary> v, CompileOptions o);

  Automaton automaton_;
  std::shared_ptr<const Vocabulary> vocabulary_;
  CompileOptions options_;
  std::unique_ptr<std::atomic<const TokenCacheEntry*>[]> cache_;  // [states]
};

// The trie walk behind TokenCacheEntry, from any start set: calls
// on_token(id, certain) for each token that may be accepted (certain=false:
// uncertain, its bytes run past a kContextFrame pop). Sets *overflow when a
// set exceeds the stack limit; *max_len to the longest stack seen.
void WalkVocabularyTrie(Pda& pda, const Vocabulary& vocab, const StackSet& start,
                        const std::function<void(int32_t, bool)>& on_token, bool* overflow, int32_t* max_len);

}  // namespace kvs::grammar
