// PrefixCacheEvents: pages, resets (unknown epoch, a reader too far behind,
// a reader ahead), paging with `more`, the wire form of hashes, the cache
// namespace. Wired to a BlockManager: engine/block_manager_events_test.cc.
#include "kvcache/cache_events.h"

#include <gtest/gtest.h>

#include <string>

#include "kvcache/cache_events_json.h"
#include "kvcache/cache_events_test_util.h"

namespace kvs::kvcache {
namespace {

using testing::CacheEventsReader;
using HashSet = CacheEventsReader::HashSet;

BlockHash H(uint64_t i) { return BlockHash{i, ~i}; }

TEST(CacheEventsTest, PagesResetsAndPaging) {
  PrefixCacheEvents log(8);
  CacheEventsReader r;
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

TEST(CacheEventsTest, WindowGroupIsASecondSetInTheSameLog) {
  PrefixCacheEvents log(8);
  CacheEventsReader r;
  r.Poll(log);
  log.Stored(H(1));
  log.Stored(H(1), CacheGroup::kWindow);
  log.Stored(H(2), CacheGroup::kWindow);
  log.Evicted(H(2), CacheGroup::kWindow);
  log.Evicted(H(2), CacheGroup::kWindow);  // twin gone, then the block: a no-op
  EXPECT_EQ(log.num_held(), 1u);
  EXPECT_EQ(log.num_held(CacheGroup::kWindow), 1u);
  CacheEventsPage p = log.Since(r.epoch, r.seq, 3);
  ASSERT_EQ(p.events.size(), 3u);  // one sequence of numbers, both groups, in order
  EXPECT_EQ(p.events[0].group, CacheGroup::kFull);
  EXPECT_EQ(p.events[1].group, CacheGroup::kWindow);
  EXPECT_TRUE(p.more);
  r.Poll(log, 2);
  EXPECT_EQ(r.held, (HashSet{{H(1).lo, H(1).hi}}));
  EXPECT_EQ(r.window_held, (HashSet{{H(1).lo, H(1).hi}}));
  // A reset carries both sets.
  const CacheEventsPage reset = log.Since(0, 0, 10);
  ASSERT_TRUE(reset.reset);
  EXPECT_EQ(reset.blocks.size(), 1u);
  ASSERT_EQ(reset.window_blocks.size(), 1u);
  EXPECT_EQ(reset.window_blocks[0], H(1));
}

TEST(CacheEventsTest, DiskGroupIsAThirdSetAndHasItsOwnWireLists) {
  PrefixCacheEvents log(8);
  CacheEventsReader r;
  r.Poll(log);
  log.Stored(H(1));
  log.Stored(H(1), CacheGroup::kDisk);
  log.Stored(H(2), CacheGroup::kDisk);
  log.Evicted(H(1));  // out of RAM, still on disk
  EXPECT_EQ(log.num_held(), 0u);
  EXPECT_EQ(log.num_held(CacheGroup::kDisk), 2u);
  r.Poll(log, 3);
  EXPECT_TRUE(r.held.empty());
  EXPECT_EQ(r.disk_held, (HashSet{{H(1).lo, H(1).hi}, {H(2).lo, H(2).hi}}));
  const CacheEventsPage reset = log.Since(0, 0, 10);
  ASSERT_TRUE(reset.reset);
  EXPECT_TRUE(reset.blocks.empty());
  EXPECT_EQ(reset.disk_blocks.size(), 2u);
  // The wire form: disk lists only for a replica with a disk tier.
  const nlohmann::json with = CacheBlocksJson(reset, 16, 0, /*disk=*/true);
  EXPECT_EQ(with["disk"], true);
  EXPECT_EQ(with["disk_blocks"].size(), 2u);
  const nlohmann::json without = CacheBlocksJson(reset, 16, 0);
  EXPECT_FALSE(without.contains("disk"));
  EXPECT_FALSE(without.contains("disk_blocks"));
  const nlohmann::json events = CacheBlocksJson(log.Since(r.epoch, 0, 10), 16, 0, true);
  ASSERT_EQ(events["events"].size(), 2u);       // +1, -1
  ASSERT_EQ(events["disk_events"].size(), 2u);  // +1, +2
  EXPECT_EQ(events["disk_events"][1], "+" + BlockHashHex(H(2)));
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

TEST(CacheEventsTest, NamespaceMatchesTheServersDefinition) {
  EXPECT_EQ(PrefixCacheNamespace("", ""), "");
  const std::string a = PrefixCacheNamespace("abc", "");
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, PrefixCacheNamespace("abc", "s"));
  EXPECT_NE(PrefixCacheNamespace("", "s"), "");
}

}  // namespace
}  // namespace kvs::kvcache
