// Per-automaton-state token verdicts (the "adaptive token mask cache" idea
// of xgrammar) and the vocabulary-trie walks that compute and use them.
//
// For a state q, the trie is walked from the stack [kContextFrame, q]: a
// token consumed without leaving q's rule is accepted whatever the caller;
// one that fails inside the rule and never left it is rejected whatever the
// caller; one whose bytes run past the end of the rule (into the unknown
// caller) is uncertain and is checked at run time against the sequence's
// real stack. Uncertain tokens are kept as a sub-trie (the trie nodes on
// their paths, preorder) so the run-time check skips a whole dead subtree at
// its first failing byte instead of testing tokens one by one.
//
// Thread-safety: entries are immutable once built; the walk functions use
// the caller's Pda and buffers.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/stack_set.h"
#include "grammar/vocabulary.h"

namespace kvs::grammar {

struct TokenCacheEntry {
  struct Node {
    int32_t node = 0;   // vocabulary trie node
    int32_t end = 0;    // index in `uncertain` one past this node's sub-trie
    uint8_t flags = 0;  // kTokensHere | kWholeSubtree
  };
  static constexpr uint8_t kTokensHere = 1;    // the tokens ending at `node` are uncertain
  static constexpr uint8_t kWholeSubtree = 2;  // every token strictly below `node` is uncertain

  // ids: the accepted tokens, or (rejected_form) the text tokens that are
  // not accepted, uncertain ones included. Ascending.
  bool rejected_form = false;
  std::vector<int32_t> ids;
  std::vector<Node> uncertain;       // preorder sub-trie
  int32_t num_uncertain = 0;         // tokens
  int32_t growth = 0;                // most frames any walk stacked above the state
  bool overflow = false;             // too ambiguous: more than PdaLimits::max_stacks parses
};

TokenCacheEntry ComputeTokenCacheEntry(const Automaton& a, const Vocabulary& vocab, const PdaLimits& limits,
                                       int32_t q);

// Scratch for the run-time walks: one per matcher.
// Scratch for the trie walks. A level is either a full set (levels[d]) or,
// on the fast path, "the single stack of levels[base[d]] with its top
// replaced by simple_top[d]": most bytes inside a rule (string characters,
// digits) just move the top state, and skipping the set copy makes a walk
// several times cheaper.
struct TrieWalkScratch {
  std::vector<StackSet> levels;     // [max token bytes + 1] set after each depth
  std::vector<uint8_t> taint;       // [max token bytes + 1]
  std::vector<int32_t> simple_top;  // [max token bytes + 1] -1: use levels[d]
  std::vector<int32_t> base;        // [max token bytes + 1]
  std::vector<uint8_t> base_follow; // [max token bytes + 1] the base stack is a follow stack
  std::vector<int32_t> frames;      // scratch stack
};

// Sets in mask the uncertain tokens of `entry` that the real stack `start`
// (bottom kRootFrame) accepts. Returns false on stack overflow.
bool CheckUncertainTokens(Pda& pda, const Vocabulary& vocab, const TokenCacheEntry& entry, const StackSet& start,
                          TrieWalkScratch& scratch, std::span<uint32_t> mask);

// Sets in mask every token the real stack `start` accepts, walking the whole
// trie (no cache; used near the depth limit). Returns false on overflow.
bool WalkAllTokens(Pda& pda, const Vocabulary& vocab, const StackSet& start, TrieWalkScratch& scratch,
                   std::span<uint32_t> mask);

}  // namespace kvs::grammar
