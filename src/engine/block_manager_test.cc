#include "engine/block_manager.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include <xxhash.h>

#include "engine/block_manager_test_util.h"

namespace kvs::engine {
namespace {

using testing::Admit;
using testing::Compute;
using testing::MakeSeq;

TEST(BlockManagerTest, AllocateAppendFree) {
  BlockManager bm(8, 4, true);
  Sequence s = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  Admit(bm, s, 10);
  EXPECT_EQ(s.block_table.size(), 3u);
  EXPECT_EQ(bm.num_used(), 3);
  EXPECT_EQ(bm.num_free(), 5);
  EXPECT_EQ(s.num_computed_tokens, 0);
  EXPECT_TRUE(bm.CanAppend(s, 13));
  bm.Append(s, 13);
  EXPECT_EQ(s.block_table.size(), 4u);
  EXPECT_TRUE(bm.CanAppend(s, 32));
  EXPECT_FALSE(bm.CanAppend(s, 33));
  bm.Free(s);
  EXPECT_TRUE(s.block_table.empty());
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_free(), 8);  // nothing was computed, so nothing is cached
  EXPECT_EQ(bm.CheckInvariants(), "");
}

TEST(BlockManagerTest, DryRunsChangeNothing) {
  BlockManager bm(4, 4, true);
  Sequence a = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Admit(bm, a, 9);
  Compute(bm, a, 8);
  Sequence b = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  for (int i = 0; i < 3; ++i) {
    const PrefixMatch m = bm.MatchPrefix(b);
    EXPECT_EQ(m.block_ids.size(), 2u);
    EXPECT_TRUE(bm.CanAllocate(m, 10));
    EXPECT_FALSE(bm.CanAllocate(m, 10, /*reserve=*/2));
    EXPECT_FALSE(bm.CanAllocate(m, 17));
  }
  EXPECT_EQ(bm.num_used(), 3);
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_EQ(bm.ref_count(a.block_table[0]), 1);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

TEST(BlockManagerTest, HashIsPublishedOnlyAfterTheKvIsWritten) {
  BlockManager bm(16, 4, true);
  Sequence a = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Admit(bm, a, 9);
  Sequence b = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(bm.MatchPrefix(b).block_ids.empty()) << "nothing is computed yet";
  Compute(bm, a, 5);  // one full block written
  EXPECT_EQ(bm.MatchPrefix(b).block_ids.size(), 1u);
  Compute(bm, a, 8);
  const PrefixMatch m = bm.MatchPrefix(b);
  ASSERT_EQ(m.block_ids.size(), 2u);
  EXPECT_EQ(m.block_ids[0], a.block_table[0]);
  EXPECT_EQ(m.block_ids[1], a.block_table[1]);
  EXPECT_EQ(m.num_evictable, 0);  // a still uses them
}

TEST(BlockManagerTest, LookupNeverCoversTheLastToken) {
  BlockManager bm(16, 4, true);
  Sequence a = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Admit(bm, a, 9);
  Compute(bm, a, 8);
  Sequence exact = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8});  // two full blocks, both cached
  EXPECT_EQ(bm.MatchPrefix(exact).block_ids.size(), 1u) << "the block with the last token is recomputed";
  Sequence longer = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 0});
  EXPECT_EQ(bm.MatchPrefix(longer).block_ids.size(), 2u);
  Sequence diverging = MakeSeq({1, 2, 3, 4, 5, 6, 0, 8, 9});
  EXPECT_EQ(bm.MatchPrefix(diverging).block_ids.size(), 1u);
  Sequence one = MakeSeq({1});
  EXPECT_TRUE(bm.MatchPrefix(one).block_ids.empty());
}

TEST(BlockManagerTest, SharedBlocksAreRefCountedAndCachedWhenFreed) {
  BlockManager bm(16, 4, true);
  Sequence a = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Admit(bm, a, 9);
  Compute(bm, a, 8);
  Sequence b = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 10, 11});
  const PrefixMatch m = Admit(bm, b, 10);
  EXPECT_EQ(b.num_computed_tokens, 8);
  EXPECT_EQ(b.block_table.size(), 3u);
  EXPECT_EQ(bm.ref_count(a.block_table[0]), 2);
  EXPECT_EQ(bm.ref_count(a.block_table[1]), 2);
  EXPECT_NE(b.block_table[2], a.block_table[2]);
  EXPECT_EQ(bm.num_used(), 4);
  EXPECT_EQ(bm.num_query_tokens(), 9 + 10);
  EXPECT_EQ(bm.num_hit_tokens(), 8);
  bm.Free(a);
  EXPECT_EQ(bm.num_used(), 3);
  bm.Free(b);
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_cached(), 2);  // the two shared full blocks
  EXPECT_EQ(bm.num_free(), 14);
  EXPECT_EQ(bm.CheckInvariants(), "");
  // A later request still hits the cached blocks, which leave the LRU.
  Sequence c = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 12});
  const PrefixMatch mc = bm.MatchPrefix(c);
  EXPECT_EQ(mc.block_ids.size(), 2u);
  EXPECT_EQ(mc.num_evictable, 2);
  bm.Allocate(c, mc, 9);
  EXPECT_EQ(bm.num_cached(), 0);
  EXPECT_EQ(bm.num_used(), 3);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

TEST(BlockManagerTest, CacheSaltIsolatesTenants) {
  BlockManager bm(16, 4, true);
  Sequence a = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9}, "tenant-a");
  Admit(bm, a, 9);
  Compute(bm, a, 8);
  Sequence other = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9}, "tenant-b");
  EXPECT_TRUE(bm.MatchPrefix(other).block_ids.empty());
  Sequence none = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(bm.MatchPrefix(none).block_ids.empty());
  Sequence same = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9}, "tenant-a");
  EXPECT_EQ(bm.MatchPrefix(same).block_ids.size(), 2u);
}

TEST(BlockManagerTest, EvictsOldestCachedBlockOnlyWhenNoFreeBlockIsLeft) {
  BlockManager bm(4, 2, true);
  Sequence a = MakeSeq({1, 2, 3, 4, 5});
  Admit(bm, a, 5);
  Compute(bm, a, 5);
  const int32_t first = a.block_table[0], second = a.block_table[1];
  bm.Free(a);  // tail first: [3,4] becomes the oldest cached block, [1,2] the newest
  EXPECT_EQ(bm.num_cached(), 2);
  EXPECT_EQ(bm.num_free(), 2);
  Sequence d = MakeSeq({7, 7, 7, 7, 7, 7});
  Admit(bm, d, 6);  // two free blocks, then one eviction
  EXPECT_EQ(bm.num_cached(), 1);
  EXPECT_NE(std::find(d.block_table.begin(), d.block_table.end(), second), d.block_table.end());
  Sequence e = MakeSeq({1, 2, 3, 4, 6});
  const PrefixMatch m = bm.MatchPrefix(e);
  ASSERT_EQ(m.block_ids.size(), 1u) << "[3,4] was evicted, [1,2] survives";
  EXPECT_EQ(m.block_ids[0], first);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

kvcache::BlockHash ConstantHash(const kvcache::BlockHash&, std::span<const int32_t>) { return kvcache::BlockHash{42, 42}; }

TEST(BlockManagerTest, HashCollisionIsAMiss) {
  BlockManager bm(16, 2, true);
  bm.TEST_SetHashFunction(&ConstantHash);
  Sequence a = MakeSeq({1, 2, 3, 4, 5});
  Admit(bm, a, 5);
  Compute(bm, a, 4);
  Sequence b = MakeSeq({9, 9, 9});
  EXPECT_TRUE(bm.MatchPrefix(b).block_ids.empty());
  Sequence c = MakeSeq({3, 4, 1, 2, 5});
  EXPECT_TRUE(bm.MatchPrefix(c).block_ids.empty());
  Sequence d = MakeSeq({1, 2, 3, 4, 5});
  EXPECT_EQ(bm.MatchPrefix(d).block_ids.size(), 1u) << "the second block's hash collides with the first's";
  Sequence salted = MakeSeq({1, 2, 3}, "x");
  EXPECT_TRUE(bm.MatchPrefix(salted).block_ids.empty());
}

// The real chain hash, except that block [7, 7] is made to collide with
// block [1, 2] (same parent): an injected collision.
kvcache::BlockHash CollidingHash(const kvcache::BlockHash& parent, std::span<const int32_t> tokens) {
  static const int32_t kTwin[] = {1, 2};
  if (tokens.size() == 2 && tokens[0] == 7 && tokens[1] == 7) tokens = kTwin;
  return kvcache::ChainBlockHash(parent, tokens);
}

// Two different prefixes whose chain hashes collide at block i-1 = 0: the
// block C published at i = 1 chains from a hash equal to A's block 0, but its
// KV was computed after [7, 7]. B (= A's prefix) must not get it.
TEST(BlockManagerTest, CollidingParentHashNeverServesAnotherPrefixKv) {
  BlockManager bm(16, 2, true);
  bm.TEST_SetHashFunction(&CollidingHash);
  Sequence a = MakeSeq({1, 2, 8, 8, 5});
  Admit(bm, a, 5);
  Compute(bm, a, 4);  // publishes [1,2] and [1,2][8,8]
  Sequence c = MakeSeq({7, 7, 3, 4, 5});
  EXPECT_TRUE(bm.MatchPrefix(c).block_ids.empty()) << "[7,7] collides with [1,2] but its tokens differ";
  Admit(bm, c, 5);
  Compute(bm, c, 4);  // [7,7] stays private (its hash is taken); [7,7][3,4] is published
  const int32_t a0 = a.block_table[0];
  Sequence b = MakeSeq({1, 2, 3, 4, 5});
  const PrefixMatch m = bm.MatchPrefix(b);
  ASSERT_EQ(m.block_ids.size(), 1u) << "block 1 of the match holds KV computed after [7, 7], not [1, 2]";
  EXPECT_EQ(m.block_ids[0], a0);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

// [7, 7] and [5, 5] both hash as [1, 2].
kvcache::BlockHash TwoCollisionsHash(const kvcache::BlockHash& parent, std::span<const int32_t> tokens) {
  static const int32_t kTwin[] = {1, 2};
  if (tokens.size() == 2 && tokens[0] == tokens[1] && (tokens[0] == 7 || tokens[0] == 5)) tokens = kTwin;
  return kvcache::ChainBlockHash(parent, tokens);
}

// A block computed after a private duplicate of its parent is not
// published: a hit on the parent's hash reaches the published copy, which
// that block's KV was not computed after, so no hit could verify it.
TEST(BlockManagerTest, BlockAfterAPrivateDuplicateIsNotPublished) {
  BlockManager bm(4, 2, true);
  bm.TEST_SetHashFunction(&TwoCollisionsHash);
  Sequence a = MakeSeq({1, 2, 8, 8, 5});
  Admit(bm, a, 5);
  Compute(bm, a, 4);  // a0 publishes hash X
  const int32_t a0 = a.block_table[0];
  bm.Free(a);
  Sequence c = MakeSeq({7, 7, 3, 4, 5});
  Admit(bm, c, 5);
  Compute(bm, c, 4);  // c0 is private (X is taken), so c1 = X.[3,4] stays private too
  const int32_t c1 = c.block_table[1];
  EXPECT_FALSE(bm.pool(KvGroup::kFull).block(c.block_table[0]).hash.has_value());
  EXPECT_FALSE(bm.pool(KvGroup::kFull).block(c1).hash.has_value());
  bm.Free(c);
  Sequence g = MakeSeq({1, 2, 3, 4, 5});
  const PrefixMatch m = bm.MatchPrefix(g);
  ASSERT_EQ(m.block_ids.size(), 1u) << "block " << c1 << " holds KV computed after [7, 7], not [1, 2]";
  EXPECT_EQ(m.block_ids[0], a0);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

// A chained pool (the full group's): when a block's content goes, the
// blocks published against it go too, down the chain, with their events.
// (BlockManager releases a sequence's tail first, so a parent normally
// outlives its children in the LRU; here the pool is driven directly.)
TEST(BlockPoolTest, EvictingAParentUnpublishesItsChain) {
  kvcache::PrefixCacheEvents log(64);
  BlockPool pool(4);
  pool.set_events(&log, kvcache::CacheGroup::kFull);
  std::vector<int32_t> dropped;
  pool.set_chained([&](int32_t id) { dropped.push_back(id); });
  const kvcache::BlockHash h0{1, 0}, h1{2, 0}, h2{3, 0}, other{4, 0};
  const std::vector<int32_t> tokens = {1, 2};
  const int32_t p = pool.Take(), c = pool.Take(), gc = pool.Take(), side = pool.Take();
  pool.Publish(p, h0, -1, 0, tokens, "");
  pool.Publish(c, h1, p, pool.block(p).generation, tokens, "");
  pool.Publish(gc, h2, c, pool.block(c).generation, tokens, "");
  pool.Publish(side, other, -1, 0, tokens, "");
  // The parent first into the LRU, so it is the first evicted.
  for (const int32_t id : {p, side, c, gc}) pool.Release(id);
  EXPECT_EQ(pool.num_cached(), 4);
  EXPECT_EQ(log.num_held(), 4u);
  ASSERT_EQ(pool.next_evicted(), p);
  const int32_t taken = pool.Take();
  EXPECT_EQ(taken, p);
  EXPECT_EQ(dropped, (std::vector<int32_t>{c, gc}));
  EXPECT_EQ(pool.Find(h1), -1);
  EXPECT_EQ(pool.Find(h2), -1);
  EXPECT_EQ(pool.Find(other), side);
  EXPECT_EQ(pool.num_cached(), 1);  // side
  EXPECT_EQ(pool.num_free(), 2);    // c and gc
  EXPECT_EQ(log.num_held(), 1u);
  EXPECT_EQ(pool.CheckInvariants(), "");
  // A used dependent keeps its KV and loses its hash; it is freed, not
  // cached, when released.
  pool.Release(taken);
  const int32_t q = pool.Take(), r = pool.Take();
  pool.Publish(q, h0, -1, 0, tokens, "");
  pool.Publish(r, h1, q, pool.block(q).generation, tokens, "");
  pool.Release(q);  // r stays used
  dropped.clear();
  while (pool.num_free() > 0) pool.Take();  // use up the free blocks
  ASSERT_EQ(pool.next_evicted(), side);
  pool.Take();  // evicts side: nothing depends on it
  EXPECT_TRUE(dropped.empty());
  ASSERT_EQ(pool.next_evicted(), q);
  pool.Take();  // evicts q
  EXPECT_EQ(dropped, (std::vector<int32_t>{r}));
  EXPECT_EQ(pool.block(r).ref_count, 1);
  EXPECT_FALSE(pool.block(r).hash.has_value());
  EXPECT_EQ(pool.CheckInvariants(), "");
  const int32_t free_before = pool.num_free();
  pool.Release(r);
  EXPECT_EQ(pool.num_free(), free_before + 1);
}

// The chain hash follows the byte layout documented in block_hash.h, and the
// block manager uses exactly that chain (the gateway relies on both).
TEST(BlockHashTest, FollowsTheDocumentedLayout) {
  const std::string salt = "tenant-7";
  const XXH128_hash_t root = XXH3_128bits_withSeed(salt.data(), salt.size(), 0x6b7673657276ULL);
  EXPECT_EQ(kvcache::BlockHashRoot(salt), (kvcache::BlockHash{root.low64, root.high64}));
  const std::vector<int32_t> tokens = {1, -2, 300000, 4, 5, 6, 7};
  std::vector<unsigned char> bytes;
  auto put = [&](uint64_t v, int n) {
    for (int i = 0; i < n; ++i) bytes.push_back(static_cast<unsigned char>(v >> (8 * i)));
  };
  put(root.low64, 8);
  put(root.high64, 8);
  for (int i = 0; i < 3; ++i) put(static_cast<uint32_t>(tokens[static_cast<size_t>(i)]), 4);
  const XXH128_hash_t h0 = XXH3_128bits_withSeed(bytes.data(), bytes.size(), 0);
  const std::vector<kvcache::BlockHash> chain = kvcache::ChainBlockHashes(salt, tokens, 3);
  ASSERT_EQ(chain.size(), 2u);  // full blocks only
  EXPECT_EQ(chain[0], (kvcache::BlockHash{h0.low64, h0.high64}));
  EXPECT_EQ(chain[1], kvcache::ChainBlockHash(chain[0], std::span<const int32_t>(tokens).subspan(3, 3)));
  EXPECT_NE(kvcache::ChainBlockHashes("", tokens, 3)[0], chain[0]) << "the salt roots the chain";

  BlockManager bm(8, 3, true);
  Sequence s = MakeSeq(tokens, salt);
  bm.MatchPrefix(s);
  EXPECT_EQ(s.block_hashes, chain);
}

TEST(BlockManagerTest, DisabledPrefixCachingNeverShares) {
  BlockManager bm(8, 4, false);
  Sequence a = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  Admit(bm, a, 9);
  Compute(bm, a, 8);
  Sequence b = MakeSeq({1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_TRUE(bm.MatchPrefix(b).block_ids.empty());
  bm.Free(a);
  EXPECT_EQ(bm.num_cached(), 0);
  EXPECT_EQ(bm.num_free(), 8);
}

// Random admissions, chunked computation, appends and frees, with a shadow KV
// (what was written at each slot) that every prefix hit must agree with.
// Freed blocks come back for release oldest first, once, and only after the
// cutoff; cached (prefix) blocks and blocks never used are never returned.
TEST(BlockManagerTest, IdleFreeBlocksAreTakenOldestFirstOnce) {
  BlockManager bm(16, 4, true);
  EXPECT_EQ(bm.num_dirty_free(), 0);
  EXPECT_FALSE(bm.OldestDirtyFree().has_value());
  Sequence a = MakeSeq({1, 2, 3, 4, 5, 6});  // one full block (cached when freed) + a partial one
  Sequence b = MakeSeq({7, 8, 9});
  Admit(bm, a, 6);
  Admit(bm, b, 3);
  Compute(bm, a, 6);
  Compute(bm, b, 3);
  const int32_t a_tail = a.block_table[1], b_block = b.block_table[0];
  bm.Free(a);  // block 0 is cached, block 1 free
  const Clock::time_point between = Clock::now();
  bm.Free(b);
  EXPECT_EQ(bm.num_dirty_free(), 2);
  ASSERT_TRUE(bm.OldestDirtyFree().has_value());
  EXPECT_LE(*bm.OldestDirtyFree(), between);
  EXPECT_TRUE(bm.TakeIdleFree(Clock::now() - std::chrono::hours(1)).empty());  // nothing that old
  EXPECT_EQ(bm.TakeIdleFree(between), std::vector<int32_t>{a_tail});           // only what was freed before
  EXPECT_EQ(bm.TakeIdleFree(Clock::now() + std::chrono::seconds(1)), std::vector<int32_t>{b_block});
  EXPECT_TRUE(bm.TakeIdleFree(Clock::now() + std::chrono::seconds(1)).empty());
  EXPECT_EQ(bm.num_dirty_free(), 0);
  EXPECT_EQ(bm.CheckInvariants(), "");
  // Reused and freed again, a released block is dirty again.
  Sequence c = MakeSeq({9, 9});
  Admit(bm, c, 2);
  bm.Free(c);
  EXPECT_EQ(bm.num_dirty_free(), 1);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

TEST(BlockManagerTest, RandomOperationsKeepInvariantsAndHitCorrectKv) {
  constexpr int32_t kBlocks = 64, kBs = 4;
  BlockManager bm(kBlocks, kBs, true);
  std::mt19937_64 rng(7);
  std::vector<std::vector<int32_t>> kv(kBlocks, std::vector<int32_t>(kBs, -1));
  std::vector<std::unique_ptr<Sequence>> live;
  const std::vector<std::vector<int32_t>> prefixes = {{1, 2, 3, 4, 5, 6, 7, 8}, {1, 2, 3, 4, 9, 9, 9, 9}, {5, 5}};
  int64_t hits = 0;
  for (int op = 0; op < 20000; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 3 && live.size() < 12) {
      auto seq = testing::RandomPrefixedSeq(rng, prefixes, op);
      const PrefixMatch m = bm.MatchPrefix(*seq);
      const int32_t cached = m.num_tokens(kBs);
      const int32_t n = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(seq->num_tokens() - cached));
      if (!bm.CanAllocate(m, cached + n)) continue;
      for (size_t b = 0; b < m.block_ids.size(); ++b) {
        for (int32_t j = 0; j < kBs; ++j) {
          ASSERT_EQ(kv[static_cast<size_t>(m.block_ids[b])][static_cast<size_t>(j)],
                    seq->token_ids[b * kBs + static_cast<size_t>(j)])
              << "prefix hit on a block holding other tokens";
        }
      }
      hits += cached;
      bm.Allocate(*seq, m, cached + n);
      for (int32_t p = cached; p < cached + n; ++p) {
        kv[static_cast<size_t>(seq->block_table[static_cast<size_t>(p / kBs)])][static_cast<size_t>(p % kBs)] =
            seq->token_ids[static_cast<size_t>(p)];
      }
      Compute(bm, *seq, cached + n);
      live.push_back(std::move(seq));
    } else if (kind < 8 && !live.empty()) {
      Sequence& s = *live[rng() % live.size()];
      if (s.num_computed_tokens == s.num_tokens()) s.token_ids.push_back(static_cast<int32_t>(rng() % 3));
      const int32_t n = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(s.num_uncomputed_tokens()));
      const int32_t target = s.num_computed_tokens + n;
      if (!bm.CanAppend(s, target)) continue;
      bm.Append(s, target);
      for (int32_t p = s.num_computed_tokens; p < target; ++p) {
        kv[static_cast<size_t>(s.block_table[static_cast<size_t>(p / kBs)])][static_cast<size_t>(p % kBs)] =
            s.token_ids[static_cast<size_t>(p)];
      }
      Compute(bm, s, target);
    } else if (kind == 8 && rng() % 8 == 0) {
      // Release every dirty free block: only free, unreferenced blocks come back.
      const int32_t dirty = bm.num_dirty_free();
      const std::vector<int32_t> ids = bm.TakeIdleFree(Clock::now() + std::chrono::seconds(1));
      ASSERT_EQ(static_cast<int32_t>(ids.size()), dirty);
      for (int32_t id : ids) {
        ASSERT_EQ(bm.ref_count(id), 0);
        kv[static_cast<size_t>(id)].assign(kBs, -1);  // its memory reads as zeros now
      }
      ASSERT_EQ(bm.num_dirty_free(), 0);
    } else if (!live.empty()) {
      const size_t i = rng() % live.size();
      bm.Free(*live[i]);
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    }
    ASSERT_EQ(bm.CheckInvariants(), "") << "after op " << op;
    std::map<int32_t, int32_t> refs;
    for (const auto& s : live) {
      for (int32_t b : s->block_table) ++refs[b];
    }
    for (int32_t b = 0; b < kBlocks; ++b) ASSERT_EQ(bm.ref_count(b), refs[b]) << "block " << b << " op " << op;
  }
  EXPECT_GT(hits, 1000);
  for (auto& s : live) bm.Free(*s);
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.num_free() + bm.num_cached(), kBlocks);
}

}  // namespace
}  // namespace kvs::engine
