#include "grammar/compiled_grammar.h"

#include <algorithm>

namespace kvs::grammar {

void WalkVocabularyTrie(Pda& pda, const Vocabulary& vocab, const StackSet& start,
                        const std::function<void(int32_t, bool)>& on_token, bool* overflow, int32_t* max_len) {
  *overflow = false;
  *max_len = start.max_depth();
  const int32_t max_d = vocab.max_token_bytes();
  std::vector<StackSet> levels(static_cast<size_t>(max_d) + 1);
  // taint[d]: on the path to depth d some parse popped the unknown caller
  // (or hit the depth limit), so a token not consumed inside the state's
  // own rule may still be consumed by the caller.
  std::vector<uint8_t> taint(static_cast<size_t>(max_d) + 1, 0);
  levels[0] = start;
  const int32_t n = vocab.num_nodes();
  int32_t i = 1;
  while (i < n) {
    const int32_t d = vocab.node_depth(i);
    StackSet& level = levels[d];
    pda.Advance(levels[d - 1], vocab.node_byte(i), &level);
    if (level.overflow) {
      *overflow = true;
      return;
    }
    *max_len = std::max(*max_len, level.max_len);
    const bool consumed = level.stepped > 0 && (!level.empty() || level.popped_context || level.can_end);
    for (int32_t id : vocab.node_tokens(i)) {
      if (consumed) {
        on_token(id, true);
      } else if (taint[d - 1] || level.depth_exceeded) {
        on_token(id, false);
      }
    }
    taint[d] = taint[d - 1] || level.popped_context || level.depth_exceeded;
    if (level.empty()) {
      if (taint[d]) {
        for (int32_t k = i + 1; k < vocab.node_end(i); ++k) {
          for (int32_t id : vocab.node_tokens(k)) on_token(id, false);
        }
      }
      i = vocab.node_end(i);
    } else {
      ++i;
    }
  }
}

namespace {

TokenCacheEntry ComputeEntry(const Automaton& a, const Vocabulary& vocab, const PdaLimits& limits, int32_t q) {
  Pda pda(a, limits);
  StackSet start;
  const int32_t frames[2] = {kContextFrame, q};
  start.Append(frames);
  TokenCacheEntry entry;
  std::vector<int32_t> accepted;
  std::vector<uint32_t> seen(vocab.mask_words(), 0);
  bool overflow = false;
  int32_t max_len = 0;
  WalkVocabularyTrie(
      pda, vocab, start,
      [&](int32_t id, bool certain) {
        (certain ? accepted : entry.uncertain).push_back(id);
        MaskSet(seen, id);
      },
      &overflow, &max_len);
  entry.overflow = overflow;
  entry.growth = std::max(0, max_len - 2);
  const auto num_text = static_cast<size_t>(MaskCount(vocab.text_mask()));
  const size_t num_rejected = num_text - accepted.size() - entry.uncertain.size();
  if (num_rejected < accepted.size()) {
    entry.rejected_form = true;
    for (int32_t w = 0; w < vocab.mask_words(); ++w) {
      uint32_t bits = vocab.text_mask()[w] & ~seen[w];
      while (bits != 0) {
        entry.ids.push_back(w * 32 + std::countr_zero(bits));
        bits &= bits - 1;
      }
    }
  } else {
    std::sort(accepted.begin(), accepted.end());
    entry.ids = std::move(accepted);
  }
  return entry;
}

}  // namespace

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
  auto fresh = std::make_unique<TokenCacheEntry>(ComputeEntry(automaton_, *vocabulary_, options_.pda, q));
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
