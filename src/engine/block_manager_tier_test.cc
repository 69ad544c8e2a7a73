// The BlockManager over a KV tier (kv_tier.h): what a prefix lookup finds
// past the RAM pool, what Allocate restores, and what publishing hands the
// tier. The tier here is a map in memory that records block contents as
// "bytes" (which pool block held which hash), so a restore can be checked.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "engine/block_manager.h"
#include "engine/block_manager_test_util.h"
#include "engine/kv_tier.h"

namespace kvs::engine {
namespace {

using testing::Admit;
using testing::Compute;
using testing::MakeSeq;

class MapTier : public KvTier {
 public:
  bool Holds(const kvcache::BlockHash& h) const override { return held.count(Key(h)) != 0; }
  bool Restore(const kvcache::DiskBlockMeta& meta, int32_t block_id) override {
    const auto it = held.find(Key(meta.hash));
    // What the disk store checks: the stored parent, tokens and salt.
    if (it == held.end() || lose.count(Key(meta.hash)) != 0 || !(it->second.parent == meta.parent) ||
        it->second.tokens != meta.tokens || it->second.salt != meta.salt) {
      return false;
    }
    restored_into[block_id] = Key(meta.hash);
    return true;
  }
  void Published(const kvcache::DiskBlockMeta& meta, int32_t block_id) override {
    (void)block_id;
    held[Key(meta.hash)] = meta;
  }
  void Prefetch(std::vector<kvcache::DiskBlockMeta> metas) override {
    for (const auto& m : metas) prefetched.push_back(Key(m.hash));
  }
  static std::pair<uint64_t, uint64_t> Key(const kvcache::BlockHash& h) { return {h.lo, h.hi}; }

  std::vector<std::pair<uint64_t, uint64_t>> prefetched;

  std::map<std::pair<uint64_t, uint64_t>, kvcache::DiskBlockMeta> held;
  std::set<std::pair<uint64_t, uint64_t>> lose;  // blocks whose Restore fails (a corrupt file)
  std::map<int32_t, std::pair<uint64_t, uint64_t>> restored_into;
};

std::vector<int32_t> Tokens(int n, int base = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(base + i);
  return t;
}

// A pool of 4 blocks of 4 tokens: a 13-token prompt computed, then another
// prompt that takes every block, evicting the first one's.
TEST(BlockManagerTierTest, EvictedBlocksAreRestoredFromTheTier) {
  BlockManager bm(4, 4, true);
  MapTier tier;
  bm.set_tier(&tier);
  Sequence a = MakeSeq(Tokens(13));
  Admit(bm, a, 13);
  Compute(bm, a, 13);
  EXPECT_EQ(tier.held.size(), 3u);  // its full blocks, published
  bm.Free(a);
  Sequence b = MakeSeq(Tokens(16, 100));
  Admit(bm, b, 16);
  Compute(bm, b, 16);
  bm.Free(b);
  ASSERT_EQ(bm.num_cached(), 4);  // b's blocks; a's were evicted

  Sequence a2 = MakeSeq(Tokens(13));
  // Queued: the three blocks a restore would read are announced, in order.
  bm.PrefetchTier(a2);
  ASSERT_EQ(tier.prefetched.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tier.prefetched[static_cast<size_t>(i)], MapTier::Key(a2.block_hashes[static_cast<size_t>(i)]));
  const PrefixMatch m = bm.MatchPrefix(a2);
  EXPECT_TRUE(m.block_ids.empty());
  EXPECT_EQ(m.num_tier_blocks, 3);
  EXPECT_EQ(m.num_tokens_with_tier(4), 12);
  ASSERT_TRUE(bm.CanAllocate(m, 13));
  bm.Allocate(a2, m, 13);
  EXPECT_EQ(a2.num_computed_tokens, 12);
  EXPECT_EQ(bm.num_tier_hit_tokens(), 12);
  EXPECT_EQ(bm.num_hit_tokens(), 0);  // RAM hits only
  ASSERT_EQ(tier.restored_into.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(tier.restored_into.at(a2.block_table[static_cast<size_t>(i)]), MapTier::Key(a2.block_hashes[static_cast<size_t>(i)]));
  // Restored blocks are published in RAM: the next lookup hits them there.
  bm.Free(a2);
  Sequence a3 = MakeSeq(Tokens(13));
  bm.PrefetchTier(a3);
  EXPECT_EQ(tier.prefetched.size(), 3u) << "a RAM hit announces nothing";
  const PrefixMatch m3 = bm.MatchPrefix(a3);
  EXPECT_EQ(m3.block_ids.size(), 3u);
  EXPECT_EQ(m3.num_tier_blocks, 0);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

TEST(BlockManagerTierTest, ALostBlockEndsTheRestoreAndIsComputed) {
  BlockManager bm(8, 4, true);
  MapTier tier;
  bm.set_tier(&tier);
  Sequence a = MakeSeq(Tokens(17));
  Admit(bm, a, 17);
  Compute(bm, a, 17);
  bm.Free(a);
  // Forget RAM: a new manager over the same tier (a restart).
  BlockManager bm2(8, 4, true);
  bm2.set_tier(&tier);
  Sequence b = MakeSeq(Tokens(17));
  tier.lose.insert(MapTier::Key(kvcache::ChainBlockHashes("", b.token_ids, 4)[2]));
  const PrefixMatch m = bm2.MatchPrefix(b);
  EXPECT_EQ(m.num_tier_blocks, 4);  // the index says all four
  bm2.Allocate(b, m, 17);
  EXPECT_EQ(b.num_computed_tokens, 8);  // blocks 0 and 1; block 2 failed, so 3 is not tried
  EXPECT_EQ(bm2.num_tier_hit_tokens(), 8);
  EXPECT_EQ(b.block_table.size(), 5u);  // positions for the rest are allocated
  EXPECT_EQ(bm2.CheckInvariants(), "");
}

TEST(BlockManagerTierTest, TheTierIsNamespacedByTheSalt) {
  BlockManager bm(8, 4, true);
  MapTier tier;
  bm.set_tier(&tier);
  Sequence a = MakeSeq(Tokens(9), "tenant-a");
  Admit(bm, a, 9);
  Compute(bm, a, 9);
  bm.Free(a);
  BlockManager fresh(8, 4, true);
  fresh.set_tier(&tier);
  Sequence b = MakeSeq(Tokens(9), "tenant-b");
  EXPECT_EQ(fresh.MatchPrefix(b).num_tier_blocks, 0);
  Sequence a2 = MakeSeq(Tokens(9), "tenant-a");
  EXPECT_EQ(fresh.MatchPrefix(a2).num_tier_blocks, 2);
}

TEST(BlockManagerTierTest, NeverTheLastTokenAndNoTierWithoutCaching) {
  MapTier tier;
  {
    BlockManager bm(8, 4, true);
    bm.set_tier(&tier);
    Sequence a = MakeSeq(Tokens(8));
    Admit(bm, a, 8);
    Compute(bm, a, 8);
    bm.Free(a);
  }
  BlockManager bm(8, 4, true);
  bm.set_tier(&tier);
  Sequence b = MakeSeq(Tokens(8));
  EXPECT_EQ(bm.MatchPrefix(b).num_tier_blocks, 1);  // block 1 would cover the last token
  BlockManager off(8, 4, false);
  off.set_tier(&tier);
  Sequence c = MakeSeq(Tokens(8));
  EXPECT_EQ(off.MatchPrefix(c).num_tier_blocks, 0);
}

}  // namespace
}  // namespace kvs::engine
