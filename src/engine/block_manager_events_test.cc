// PrefixCacheEvents wired to a BlockManager: a reader that applies the pages
// holds exactly the hashes the manager publishes -- the same
// ChainBlockHashes a router computes from the token ids and the salt; with a
// window group, the two held sets predict exactly what MatchPrefix hits.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/block_manager.h"
#include "kvcache/cache_events.h"
#include "kvcache/cache_events_test_util.h"

namespace kvs::engine {
namespace {

using kvcache::BlockHash;
using kvcache::CacheGroup;
using kvcache::ChainBlockHashes;
using kvcache::PrefixCacheEvents;
using Reader = kvcache::testing::CacheEventsReader;
using HashSet = Reader::HashSet;

TEST(CacheEventsTest, ReaderMirrorsTheBlockManagersPublishedHashes) {
  constexpr int32_t kBlock = 4;
  PrefixCacheEvents log(16);  // small: readers fall behind and resync
  BlockManager bm(12, kBlock, true);
  bm.set_events(&log);
  Reader fast, slow;
  std::mt19937 rng(7);
  HashSet predicted_ever;
  for (int round = 0; round < 40; ++round) {
    // Prompts sharing prefixes: a few system prompts, random tails.
    std::vector<int32_t> tokens;
    const int32_t sys = static_cast<int32_t>(rng() % 3);
    for (int i = 0; i < 8; ++i) tokens.push_back(100 * sys + i);
    const size_t tail = rng() % 9;
    for (size_t i = 0; i < tail; ++i) tokens.push_back(static_cast<int32_t>(1000 + rng() % 5));
    const std::string salt = rng() % 4 == 0 ? "tenant-b" : "";
    Sequence s(round, "r", tokens, SamplingParams{});
    s.cache_salt = salt;
    PrefixMatch m = bm.MatchPrefix(s);
    const auto n = static_cast<int32_t>(tokens.size());
    if (!bm.CanAllocate(m, n)) continue;
    bm.Allocate(s, m, n);
    s.num_computed_tokens = n;
    bm.CommitComputed(s);
    bm.Free(s);
    for (const BlockHash& h : ChainBlockHashes(salt, tokens, kBlock)) predicted_ever.insert({h.lo, h.hi});
    fast.Poll(log);
    if (round % 7 == 0) slow.Poll(log, 3);
    EXPECT_EQ(fast.held.size(), log.num_held());
  }
  slow.Poll(log, 3);
  EXPECT_EQ(fast.held, slow.held);
  EXPECT_GT(slow.resets, 1);
  // Every hash held is one the router's own computation predicts, and the
  // held set is what the manager can still hit: every cached block.
  for (const auto& h : fast.held) EXPECT_TRUE(predicted_ever.count(h)) << h.first;
  EXPECT_EQ(static_cast<int32_t>(fast.held.size()), bm.num_cached());
  EXPECT_EQ(bm.CheckInvariants(), "");
}

// What a router predicts from the two held sets (the rule of
// BlockManager::MatchWindow, as the gateway's PrefixIndex applies it): the
// longest L of leading full hashes held whose window blocks [first(L), L)
// are held too. Never the block holding the last token.
int32_t PredictedHit(const Reader& r, const std::string& salt, const std::vector<int32_t>& tokens, int32_t bs,
                     int32_t window) {
  const std::vector<BlockHash> h = ChainBlockHashes(salt, tokens, bs);
  const auto max_blocks = static_cast<int32_t>((tokens.size() - 1) / static_cast<size_t>(bs));
  int32_t full = 0;
  while (full < max_blocks && r.held.count({h[static_cast<size_t>(full)].lo, h[static_cast<size_t>(full)].hi})) ++full;
  for (int32_t len = full; len > 0; --len) {
    const int32_t first = std::max(0, len * bs - window + 1) / bs;
    bool all = true;
    for (int32_t i = first; i < len; ++i) {
      all = all && r.window_held.count({h[static_cast<size_t>(i)].lo, h[static_cast<size_t>(i)].hi});
    }
    if (all) return len;
  }
  return 0;
}

// With a window group, sequences computed in chunks (window blocks leave
// mid-sequence), some held across rounds, and both pools small enough to
// evict (window blocks alone, and full blocks under cached window twins):
// after every round the reader's prediction is exactly MatchPrefix's hit for
// every prompt seen so far, and its full set is exactly the published full
// hashes. (Before chained unpublishing, a full block whose parent was
// evicted, or that followed a private duplicate, stayed held though no hit
// reached it: the reader over-predicted.)
TEST(CacheEventsTest, ReaderPredictsTheBlockManagersHitsWithAWindowGroup) {
  constexpr int32_t kBlock = 4, kWindow = 6, kChunk = 8;
  PrefixCacheEvents log(32);
  BlockManager bm(14, kBlock, true, WindowGroupConfig{10, kWindow});
  bm.set_events(&log);
  Reader reader;
  std::mt19937 rng(11);
  std::vector<std::pair<std::string, std::vector<int32_t>>> seen;
  std::vector<std::unique_ptr<Sequence>> live;
  int hits = 0, window_cut = 0;
  for (int round = 0; round < 300; ++round) {
    std::vector<int32_t> tokens;
    const int32_t sys = static_cast<int32_t>(rng() % 3);
    const size_t prefix = 4 + rng() % 13;
    for (size_t i = 0; i < prefix; ++i) tokens.push_back(100 * sys + static_cast<int32_t>(i));
    const size_t tail = 1 + rng() % 6;
    for (size_t i = 0; i < tail; ++i) tokens.push_back(static_cast<int32_t>(1000 + rng() % 3));
    const std::string salt = rng() % 5 == 0 ? "tenant-b" : "";
    // Sometimes two copies admitted in the same step: the second one's
    // blocks are private duplicates whose window twins are the first's.
    const int copies = rng() % 3 == 0 ? 2 : 1;
    std::vector<std::pair<std::unique_ptr<Sequence>, int32_t>> step;  // sequence, target
    const auto n = static_cast<int32_t>(tokens.size());
    for (int c = 0; c < copies; ++c) {
      auto s = std::make_unique<Sequence>(round * 2 + c, "r", tokens, SamplingParams{});
      s->cache_salt = salt;
      PrefixMatch m = bm.MatchPrefix(*s);
      const int32_t target = std::min(n, m.num_tokens(kBlock) + kChunk);
      if (!bm.CanAllocate(m, target)) continue;
      bm.Allocate(*s, m, target);
      step.emplace_back(std::move(s), target);
    }
    if (!step.empty()) seen.emplace_back(salt, tokens);
    // Chunk by chunk, every copy in turn; a copy may stop part-way (it stays
    // live holding window blocks) or when its next chunk does not fit.
    for (bool running = !step.empty(); running;) {
      running = false;
      for (auto& [s, target] : step) {
        if (s->num_computed_tokens == target && target > 0) continue;  // stopped
        s->num_computed_tokens = target;
        bm.CommitComputed(*s);
      }
      for (auto& [s, target] : step) {
        if (target == n || rng() % 4 == 0) continue;
        const int32_t next = std::min(n, target + kChunk);
        if (!bm.CanAppend(*s, next)) continue;
        bm.Append(*s, next);
        target = next;
        running = true;
      }
    }
    for (auto& [s, target] : step) live.push_back(std::move(s));
    // Keep up to two sequences holding blocks between rounds.
    while (live.size() > rng() % 3) {
      bm.Free(*live.front());
      live.erase(live.begin());
    }
    ASSERT_EQ(bm.CheckInvariants(), "");
    reader.Poll(log, 1 + rng() % 8);
    ASSERT_EQ(reader.held.size(), log.num_held());
    ASSERT_EQ(static_cast<int32_t>(reader.held.size()), bm.num_cached() + [&] {
      int32_t used_published = 0;
      for (int32_t id = 0; id < bm.num_blocks(); ++id) {
        const auto& b = bm.pool(KvGroup::kFull).block(id);
        used_published += b.ref_count > 0 && b.hash.has_value();
      }
      return used_published;
    }());
    for (const auto& [probe_salt, probe_tokens] : seen) {
      Sequence probe(-1, "p", probe_tokens, SamplingParams{});
      probe.cache_salt = probe_salt;
      const auto actual = static_cast<int32_t>(bm.MatchPrefix(probe).block_ids.size());
      const int32_t predicted = PredictedHit(reader, probe_salt, probe_tokens, kBlock, kWindow);
      ASSERT_EQ(predicted, actual) << "round " << round << ", a prompt of " << probe_tokens.size();
      hits += actual > 0;
      Reader full_only = reader;
      full_only.window_held = full_only.held;  // what a reader ignoring the window group assumes
      window_cut += PredictedHit(full_only, probe_salt, probe_tokens, kBlock, kWindow) > actual;
    }
  }
  // Both kinds of prefix occurred: hits, and full blocks whose window
  // blocks were gone (which a reader of the full group alone overcounts).
  EXPECT_GT(hits, 100);
  EXPECT_GT(window_cut, 10);
  EXPECT_GT(log.num_held(CacheGroup::kWindow), 0u);
}

}  // namespace
}  // namespace kvs::engine
