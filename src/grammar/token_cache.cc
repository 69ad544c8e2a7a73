#include "grammar/token_cache.h"

#include <algorithm>
#include <bit>

namespace kvs::grammar {

namespace {

enum class Verdict { kAccepted, kUncertainHere, kUncertainBelow };

// Walks trie nodes [first, last), a run of whole subtrees in preorder whose
// common parent's set is levels[depth(first) - 1] (taint likewise), calling
// on_node(node, verdict) for nodes whose tokens may be accepted and for
// subtrees left unvisited because all their tokens are uncertain. Returns
// false on stack overflow. taint: some parse went past the follow states
// (or hit the depth limit) on the way, so a byte that fails here may still
// be accepted by the real callers.
template <typename OnNode>
bool WalkNodes(Pda& pda, const Vocabulary& vocab, int32_t first, int32_t last, TrieWalkScratch& s, int32_t* max_len,
               OnNode&& on_node) {
  const Automaton& a = pda.automaton();
  int32_t i = first;
  while (i < last) {
    const int32_t d = vocab.node_depth(i);
    const int32_t p = d - 1;
    const uint8_t byte = vocab.node_byte(i);
    // The parent as a single stack (fast path), if it is one.
    int32_t ptop = -1, pbase = -1;
    bool follow = false;
    if (s.simple_top[p] >= 0) {
      ptop = s.simple_top[p];
      pbase = s.base[p];
      follow = s.base_follow[p];
    } else if (s.levels[p].num_stacks() == 1) {
      s.levels[p].ForEach([&](std::span<const int32_t> f) {
        ptop = f.back();
        follow = f[0] == kFollowFrame;
      });
      pbase = p;
    }
    StackSet& level = s.levels[d];
    s.simple_top[d] = -1;
    if (ptop >= 0) {
      const int32_t t = a.Step(ptop, byte);
      pda.AddWork(1);
      if (t >= 0 && !a.states[t].needs_closure()) {
        // Only the top moved: same stack below, no closure.
        s.simple_top[d] = t;
        s.base[d] = pbase;
        s.base_follow[d] = follow;
        s.taint[d] = s.taint[p];
        if (!vocab.node_tokens(i).empty()) {
          if (!follow) {
            on_node(i, Verdict::kAccepted);
          } else {
            on_node(i, Verdict::kUncertainHere);
          }
        }
        if (pda.over_budget()) return false;
        ++i;
        continue;
      }
      if (t < 0) {
        level.Clear();
      } else {
        s.levels[pbase].ForEach([&](std::span<const int32_t> f) { s.frames.assign(f.begin(), f.end()); });
        s.frames.back() = t;
        pda.AdvanceOne(s.frames, &level);
      }
    } else {
      pda.Advance(s.levels[p], byte, &level);
    }
    if (level.overflow) return false;
    *max_len = std::max(*max_len, level.max_len);
    // Accepted whatever the caller: consumed inside the rule, or the rule
    // ended exactly at the token's end. Uncertain: consumed only by a
    // follow state, or some parse left the follow states' rules (taint).
    const int32_t inside = level.stepped - level.stepped_follow;
    const bool consumed = inside > 0 && (level.NumInside() > 0 || level.popped_context || level.can_end);
    const bool maybe = level.stepped_follow > 0 || level.popped_follow || level.depth_exceeded || s.taint[p];
    if (!vocab.node_tokens(i).empty()) {
      if (consumed) {
        on_node(i, Verdict::kAccepted);
      } else if (maybe) {
        on_node(i, Verdict::kUncertainHere);
      }
    }
    s.taint[d] = s.taint[p] || level.popped_follow || level.depth_exceeded;
    if (level.empty()) {
      if (s.taint[d] && vocab.node_end(i) > i + 1) on_node(i, Verdict::kUncertainBelow);
      i = vocab.node_end(i);
    } else {
      ++i;
    }
  }
  return true;
}

void PrepareScratch(const Vocabulary& vocab, const StackSet& start, TrieWalkScratch& s, int32_t depth) {
  const auto n = static_cast<size_t>(vocab.max_token_bytes()) + 1;
  if (s.levels.size() < n) s.levels.resize(n);
  if (s.taint.size() < n) s.taint.resize(n);
  if (s.simple_top.size() < n) s.simple_top.resize(n, -1);
  if (s.base.size() < n) s.base.resize(n, -1);
  if (s.base_follow.size() < n) s.base_follow.resize(n, 0);
  s.levels[depth] = start;
  s.taint[depth] = 0;
  s.simple_top[depth] = -1;
}

void SetNodeTokens(const Vocabulary& vocab, int32_t node, std::span<uint32_t> mask) {
  for (int32_t id : vocab.node_tokens(node)) MaskSet(mask, id);
}

}  // namespace

TokenCacheEntry ComputeTokenCacheEntry(const Automaton& a, const Vocabulary& vocab, const PdaLimits& limits,
                                       int32_t q) {
  Pda pda(a, limits);
  StackSet start;
  const int32_t frames[2] = {kContextFrame, q};
  start.Append(frames);
  TrieWalkScratch scratch;
  PrepareScratch(vocab, start, scratch, 0);
  TokenCacheEntry entry;
  std::vector<uint32_t> accepted(vocab.mask_words(), 0), uncertain(vocab.mask_words(), 0);
  std::vector<std::pair<int32_t, uint8_t>> marks;  // (node, flags)
  int32_t max_len = 2;
  const bool ok = WalkNodes(pda, vocab, 1, vocab.num_nodes(), scratch, &max_len, [&](int32_t node, Verdict v) {
    switch (v) {
      case Verdict::kAccepted:
        SetNodeTokens(vocab, node, accepted);
        break;
      case Verdict::kUncertainHere:
        SetNodeTokens(vocab, node, uncertain);
        marks.push_back({node, TokenCacheEntry::kTokensHere});
        break;
      case Verdict::kUncertainBelow:
        for (int32_t k = node + 1; k < vocab.node_end(node); ++k) SetNodeTokens(vocab, k, uncertain);
        marks.push_back({node, TokenCacheEntry::kWholeSubtree});
        break;
    }
  });
  entry.overflow = !ok;
  entry.growth = std::max(0, max_len - 2);
  if (!ok) return entry;

  // The uncertain sub-trie: marked nodes plus their ancestors, in preorder.
  std::vector<uint8_t> flags_of;  // parallel to nodes below
  std::vector<int32_t> nodes;
  {
    std::vector<std::pair<int32_t, uint8_t>> all = marks;
    std::vector<int32_t> stack;
    for (auto [node, f] : marks) {
      for (int32_t p = vocab.node_parent(node); p > 0; p = vocab.node_parent(p)) all.push_back({p, 0});
    }
    std::sort(all.begin(), all.end());
    for (size_t i = 0; i < all.size();) {
      size_t j = i;
      uint8_t f = 0;
      for (; j < all.size() && all[j].first == all[i].first; ++j) f |= all[j].second;
      nodes.push_back(all[i].first);
      flags_of.push_back(f);
      i = j;
    }
  }
  entry.uncertain.resize(nodes.size());
  std::vector<int32_t> open;  // indices into entry.uncertain whose subtree is not closed yet
  for (size_t k = 0; k < nodes.size(); ++k) {
    while (!open.empty() && vocab.node_end(nodes[open.back()]) <= nodes[k]) {
      entry.uncertain[open.back()].end = static_cast<int32_t>(k);
      open.pop_back();
    }
    entry.uncertain[k] = {nodes[k], 0, flags_of[k]};
    open.push_back(static_cast<int32_t>(k));
  }
  for (int32_t k : open) entry.uncertain[k].end = static_cast<int32_t>(nodes.size());

  // The certain part, in whichever form is shorter. The rejected form lists
  // every token not certainly accepted (uncertain ones included), so that
  // applying it never lets an uncertain token through unchecked.
  int32_t num_accepted = 0, num_not_accepted = 0;
  for (int32_t w = 0; w < vocab.mask_words(); ++w) {
    entry.num_uncertain += std::popcount(uncertain[w]);
    num_accepted += std::popcount(accepted[w]);
    num_not_accepted += std::popcount(vocab.text_mask()[w] & ~accepted[w]);
  }
  entry.rejected_form = num_not_accepted < num_accepted;
  for (int32_t w = 0; w < vocab.mask_words(); ++w) {
    uint32_t bits = entry.rejected_form ? (vocab.text_mask()[w] & ~accepted[w]) : accepted[w];
    while (bits != 0) {
      entry.ids.push_back(w * 32 + std::countr_zero(bits));
      bits &= bits - 1;
    }
  }
  return entry;
}

bool CheckUncertainTokens(Pda& pda, const Vocabulary& vocab, const TokenCacheEntry& entry, const StackSet& start,
                          TrieWalkScratch& s, std::span<uint32_t> mask) {
  if (entry.uncertain.empty()) return true;
  PrepareScratch(vocab, start, s, 0);
  int32_t max_len = 0;
  const auto& nodes = entry.uncertain;
  size_t k = 0;
  while (k < nodes.size()) {
    const TokenCacheEntry::Node& n = nodes[k];
    const int32_t d = vocab.node_depth(n.node);
    StackSet& level = s.levels[d];
    pda.Advance(s.levels[d - 1], vocab.node_byte(n.node), &level);
    if (level.overflow) return false;
    if (level.stepped == 0) {
      k = static_cast<size_t>(n.end);
      continue;
    }
    if ((n.flags & TokenCacheEntry::kTokensHere) && (!level.empty() || level.can_end)) {
      SetNodeTokens(vocab, n.node, mask);
    }
    if ((n.flags & TokenCacheEntry::kWholeSubtree) && !level.empty()) {
      s.taint[d] = 0;
      s.simple_top[d] = -1;
      const bool ok = WalkNodes(pda, vocab, n.node + 1, vocab.node_end(n.node), s, &max_len,
                                [&](int32_t node, Verdict v) {
                                  if (v == Verdict::kAccepted) SetNodeTokens(vocab, node, mask);
                                });
      if (!ok) return false;
    }
    k = level.empty() ? static_cast<size_t>(n.end) : k + 1;
  }
  return true;
}

bool WalkAllTokens(Pda& pda, const Vocabulary& vocab, const StackSet& start, TrieWalkScratch& s,
                   std::span<uint32_t> mask) {
  PrepareScratch(vocab, start, s, 0);
  int32_t max_len = 0;
  return WalkNodes(pda, vocab, 1, vocab.num_nodes(), s, &max_len, [&](int32_t node, Verdict v) {
    if (v == Verdict::kAccepted) SetNodeTokens(vocab, node, mask);  // "uncertain" here: over the depth limit
  });
}

}  // namespace kvs::grammar
