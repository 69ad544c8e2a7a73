// PrefixCacheEvents: pages, resets (unknown epoch, a reader too far behind,
// a reader ahead), paging with `more`, the wire form of hashes; and wired to
// a BlockManager, a reader that applies the pages holds exactly the hashes
// the manager publishes -- the same ChainBlockHashes a router computes from
// the token ids and the salt.
#include "engine/cache_events.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <tuple>

#include "engine/block_manager.h"

namespace kvs::engine {
namespace {

BlockHash H(uint64_t i) { return BlockHash{i, ~i}; }

using HashSet = std::set<std::pair<uint64_t, uint64_t>>;

// A reader as a router keeps it: applies pages until current.
struct Reader {
  uint64_t epoch = 0, seq = 0;
  HashSet held;
  int resets = 0;
  void Poll(const PrefixCacheEvents& log, size_t page_size = 1000) {
    for (;;) {
      CacheEventsPage p = log.Since(epoch, seq, page_size);
      if (p.reset) {
        ++resets;
        held.clear();
        for (const auto& h : p.blocks) held.insert({h.lo, h.hi});
      }
      for (const auto& e : p.events) {
        if (e.stored) {
          held.insert({e.hash.lo, e.hash.hi});
        } else {
          held.erase({e.hash.lo, e.hash.hi});
        }
      }
      epoch = p.epoch;
      seq = p.seq;
      if (!p.more) return;
    }
  }
};

TEST(CacheEventsTest, PagesResetsAndPaging) {
  PrefixCacheEvents log(8);
  Reader r;
  r.Poll(log);
  EXPECT_EQ(r.resets, 1);  // a reader that knows no epoch starts from the whole set
  EXPECT_EQ(r.seq, 0u);
  log.Stored(H(1));
  log.Stored(H(2));
  log.Evicted(H(1));
  CacheEventsPage p = log.Since(r.epoch, 0, 2);
  ASSERT_FALSE(p.reset);
  ASSERT_EQ(p.events.size(), 2u);
  EXPECT_TRUE(p.more);
  EXPECT_EQ(p.seq, 2u);
  r.Poll(log, 2);
  EXPECT_EQ(r.resets, 1);
  EXPECT_EQ(r.seq, 3u);
  EXPECT_EQ(r.held, (HashSet{{2, ~uint64_t{2}}}));
  // Fall behind by more than the log keeps: a reset with the held set.
  for (uint64_t i = 10; i < 30; ++i) log.Stored(H(i));
  for (uint64_t i = 10; i < 25; ++i) log.Evicted(H(i));
  r.Poll(log);
  EXPECT_EQ(r.resets, 2);
  EXPECT_EQ(r.held.size(), 6u);  // 2 and 25..29
  EXPECT_EQ(r.held.size(), log.num_held());
  EXPECT_EQ(r.seq, 38u);
  // Ahead of the log (its replica restarted with this epoch: cannot be) or
  // another epoch: a reset.
  EXPECT_TRUE(log.Since(r.epoch, 1000, 10).reset);
  EXPECT_TRUE(log.Since(r.epoch + 1, 38, 10).reset);
  EXPECT_FALSE(log.Since(r.epoch, 38, 10).reset);
  EXPECT_TRUE(log.Since(r.epoch, 38, 10).events.empty());
}

TEST(CacheEventsTest, HexRoundTrip) {
  const BlockHash h{0x0123456789abcdefULL, 0xfedcba9876543210ULL};
  EXPECT_EQ(BlockHashHex(h), "fedcba98765432100123456789abcdef");
  BlockHash back;
  ASSERT_TRUE(ParseBlockHashHex(BlockHashHex(h), &back));
  EXPECT_EQ(back, h);
  EXPECT_FALSE(ParseBlockHashHex("xyz", &back));
  EXPECT_FALSE(ParseBlockHashHex("FEDCBA98765432100123456789ABCDEF", &back));  // lowercase only
}

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

TEST(CacheEventsTest, NamespaceMatchesTheServersDefinition) {
  EXPECT_EQ(PrefixCacheNamespace("", ""), "");
  const std::string a = PrefixCacheNamespace("abc", "");
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, PrefixCacheNamespace("abc", "s"));
  EXPECT_NE(PrefixCacheNamespace("", "s"), "");
}

}  // namespace
}  // namespace kvs::engine
