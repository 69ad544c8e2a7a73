// CompiledGrammar: a Grammar compiled for one model's Vocabulary, shared by
// every sequence constrained by it (hold it in a shared_ptr; the API layer
// may cache it by constraint text). GrammarMatcher (matcher.h) is the
// per-sequence state.
//
// Token masks use per-state verdicts (token_cache.h): for each automaton
// state, which tokens are accepted or rejected whatever the caller of its
// rule, and which are uncertain (checked at run time against the real
// stack). An entry is computed on first use (or all at once by
// PrecomputeAll) and kept for the grammar's lifetime.
//
// Thread-safety: const methods are safe from many threads at once; the lazily
// filled cache is published with atomics (two threads may both compute an
// entry; one result is kept).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "grammar/automaton.h"
#include "grammar/grammar.h"
#include "grammar/stack_set.h"
#include "grammar/token_cache.h"
#include "grammar/vocabulary.h"

namespace kvs::grammar {

struct CompileOptions {
  GrammarLimits limits;
  PdaLimits pda;
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

}  // namespace kvs::grammar
