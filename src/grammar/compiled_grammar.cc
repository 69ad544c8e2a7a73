#include "grammar/compiled_grammar.h"

#include <algorithm>

namespace kvs::grammar {

CompiledGrammar::CompiledGrammar(Automaton a, std::shared_ptr<const Vocabulary> v, CompileOptions o)
    : automaton_(std::move(a)), vocabulary_(std::move(v)), options_(std::move(o)) {
  const size_t n = automaton_.states.size();
  cache_ = std::make_unique<std::atomic<const TokenCacheEntry*>[]>(n);
  for (size_t i = 0; i < n; ++i) cache_[i].store(nullptr, std::memory_order_relaxed);
}

CompiledGrammar::~CompiledGrammar() {
  for (size_t i = 0; i < automaton_.states.size(); ++i) delete cache_[i].load(std::memory_order_relaxed);
}

StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::Compile(const Grammar& grammar,
                                                                           std::shared_ptr<const Vocabulary> vocabulary,
                                                                           const CompileOptions& options) {
  if (vocabulary == nullptr) return InvalidArgument("no vocabulary to compile the grammar for");
  KVS_ASSIGN_OR_RETURN(Automaton a, BuildAutomaton(grammar, options.limits));
  return std::shared_ptr<const CompiledGrammar>(new CompiledGrammar(std::move(a), std::move(vocabulary), options));
}

StatusOr<std::shared_ptr<const CompiledGrammar>> CompiledGrammar::FromGbnf(std::string_view gbnf,
                                                                            std::shared_ptr<const Vocabulary> vocabulary,
                                                                            const CompileOptions& options) {
  KVS_ASSIGN_OR_RETURN(Grammar g, ParseGbnf(gbnf, options.limits));
  return Compile(g, std::move(vocabulary), options);
}

const TokenCacheEntry& CompiledGrammar::CacheFor(int32_t q) const {
  const TokenCacheEntry* e = cache_[q].load(std::memory_order_acquire);
  if (e != nullptr) return *e;
  auto fresh = std::make_unique<TokenCacheEntry>(ComputeTokenCacheEntry(automaton_, *vocabulary_, options_.pda, q));
  const TokenCacheEntry* expected = nullptr;
  if (cache_[q].compare_exchange_strong(expected, fresh.get(), std::memory_order_acq_rel)) return *fresh.release();
  return *expected;  // another thread won; ours is dropped
}

void CompiledGrammar::PrecomputeAll() const {
  for (int32_t q = 0; q < automaton_.num_states(); ++q) {
    if (automaton_.states[q].has_bytes()) (void)CacheFor(q);
  }
}

int32_t CompiledGrammar::num_cached() const {
  int32_t n = 0;
  for (int32_t q = 0; q < automaton_.num_states(); ++q) n += cache_[q].load(std::memory_order_acquire) != nullptr;
  return n;
}

}  // namespace kvs::grammar
