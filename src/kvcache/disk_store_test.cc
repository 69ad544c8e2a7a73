#include "kvcache/disk_store.h"
#include "kvcache/cache_events.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

namespace kvs::kvcache {
namespace {

namespace fs = std::filesystem;

class DiskStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kvs_disk_store_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  DiskStoreConfig Config(int64_t max_bytes = 1 << 20, uint64_t fingerprint = 7) const {
    DiskStoreConfig c;
    c.path = dir_.string();
    c.max_bytes = max_bytes;
    c.fingerprint = fingerprint;
    return c;
  }
  // Block i of a chain of 4-token blocks under `salt`, with a payload that
  // depends on everything (so a wrong block reads as wrong bytes).
  static std::pair<DiskBlockMeta, std::vector<uint8_t>> Block(int i, const std::string& salt = "", size_t bytes = 1000) {
    DiskBlockMeta m;
    BlockHash parent = BlockHashRoot(salt);
    for (int b = 0; b <= i; ++b) {
      std::vector<int32_t> tokens = {b * 10 + 1, b * 10 + 2, b * 10 + 3, b * 10 + 4};
      m.parent = parent;
      m.tokens = tokens;
      m.hash = ChainBlockHash(parent, tokens);
      parent = m.hash;
    }
    m.salt = i == 0 ? salt : "";
    std::vector<uint8_t> payload(bytes);
    std::mt19937 rng(static_cast<uint32_t>(m.hash.lo));
    for (auto& x : payload) x = static_cast<uint8_t>(rng());
    return {m, payload};
  }
  std::string FileOf(const BlockHash& h) const { return (dir_ / (BlockHashHex(h) + ".kvb")).string(); }

  fs::path dir_;
};

TEST_F(DiskStoreTest, WritesReadsAndSurvivesAReopen) {
  auto [m0, p0] = Block(0);
  auto [m1, p1] = Block(1);
  {
    auto s = DiskKvStore::Open(Config());
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_FALSE((*s)->Contains(m0.hash));
    EXPECT_TRUE((*s)->Put(m0, p0));
    EXPECT_TRUE((*s)->Put(m1, p1));
    EXPECT_FALSE((*s)->Put(m1, p1));  // queued or held already
    (*s)->Flush();
    EXPECT_TRUE((*s)->Contains(m0.hash));
    auto got = (*s)->Get(m1, static_cast<int64_t>(p1.size()));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(*got, p1);
    const DiskStoreStats st = (*s)->stats();
    EXPECT_EQ(st.blocks, 2);
    EXPECT_EQ(st.written_blocks, 2);
    EXPECT_EQ(st.read_blocks, 1);
    EXPECT_GT(st.bytes, 2000);
  }
  auto s = DiskKvStore::Open(Config());  // a restart
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)->stats().blocks, 2);
  auto got = (*s)->Get(m0, static_cast<int64_t>(p0.size()));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, p0);
}

TEST_F(DiskStoreTest, AFlippedByteIsDroppedNeverServed) {
  auto [m, p] = Block(2);
  auto s = DiskKvStore::Open(Config());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Put(m, p));
  (*s)->Flush();
  {
    std::fstream f(FileOf(m.hash), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x5a');
  }
  auto got = (*s)->Get(m, static_cast<int64_t>(p.size()));
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << got.status().ToString();
  EXPECT_FALSE((*s)->Contains(m.hash));
  EXPECT_FALSE(fs::exists(FileOf(m.hash)));
  EXPECT_EQ((*s)->stats().dropped_corrupt, 1);
}

TEST_F(DiskStoreTest, AnotherPrefixUnderTheSameHashIsAMiss) {
  auto [m, p] = Block(1, "tenant-a");
  auto s = DiskKvStore::Open(Config());
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Put(m, p));
  (*s)->Flush();
  DiskBlockMeta other = m;
  other.tokens[3] += 1;  // same key, other tokens: what a forced collision looks like
  EXPECT_FALSE((*s)->Get(other, static_cast<int64_t>(p.size())).ok());
  ASSERT_TRUE((*s)->Put(m, p));
  (*s)->Flush();
  other = m;
  other.parent.lo ^= 1;  // another parent
  EXPECT_FALSE((*s)->Get(other, static_cast<int64_t>(p.size())).ok());
  ASSERT_TRUE((*s)->Put(m, p));
  (*s)->Flush();
  EXPECT_FALSE((*s)->Get(m, static_cast<int64_t>(p.size()) + 1).ok());  // another KV size
  ASSERT_TRUE((*s)->Put(m, p));
  (*s)->Flush();
  EXPECT_TRUE((*s)->Get(m, static_cast<int64_t>(p.size())).ok());
  // Block 0 carries its salt: another tenant's block 0 never matches.
  auto [a0, pa] = Block(0, "tenant-a");
  ASSERT_TRUE((*s)->Put(a0, pa));
  (*s)->Flush();
  DiskBlockMeta b0 = a0;
  b0.salt = "tenant-b";
  EXPECT_FALSE((*s)->Get(b0, static_cast<int64_t>(pa.size())).ok());
}

TEST_F(DiskStoreTest, TruncatedForeignAndTemporaryFilesAreDroppedAtOpen) {
  auto [m0, p0] = Block(0);
  auto [m1, p1] = Block(1);
  auto [m2, p2] = Block(2);
  {
    auto s = DiskKvStore::Open(Config());
    ASSERT_TRUE(s.ok());
    (*s)->Put(m0, p0);
    (*s)->Put(m1, p1);
    (*s)->Put(m2, p2);
  }  // the destructor writes the queue
  fs::resize_file(FileOf(m1.hash), fs::file_size(FileOf(m1.hash)) - 100);  // truncated
  std::ofstream(dir_ / "junk.kvb") << "not a block";
  std::ofstream(dir_ / (BlockHashHex(m0.hash) + ".kvb.tmp")) << "half a write";
  std::ofstream(dir_ / "notes.txt") << "someone else's file";
  auto s = DiskKvStore::Open(Config());
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE((*s)->Contains(m0.hash));
  EXPECT_FALSE((*s)->Contains(m1.hash));
  EXPECT_TRUE((*s)->Contains(m2.hash));
  EXPECT_EQ((*s)->stats().dropped_corrupt, 1);
  EXPECT_EQ((*s)->stats().dropped_foreign, 1);
  EXPECT_FALSE(fs::exists(dir_ / (BlockHashHex(m0.hash) + ".kvb.tmp")));
  EXPECT_TRUE(fs::exists(dir_ / "notes.txt"));  // not ours: left alone
  // Another model (fingerprint): every block is foreign.
  (*s).reset();
  auto other = DiskKvStore::Open(Config(1 << 20, 8));
  ASSERT_TRUE(other.ok());
  EXPECT_EQ((*other)->stats().blocks, 0);
  EXPECT_EQ((*other)->stats().dropped_foreign, 2);
}

TEST_F(DiskStoreTest, StaysUnderMaxBytesEvictingTheLeastRecentlyUsed) {
  auto [m0, p0] = Block(0);
  auto s = DiskKvStore::Open(Config(3500));  // three ~1.1 KB files fit
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->Put(m0, p0));
  for (int i = 1; i <= 2; ++i) {
    auto [m, p] = Block(i);
    ASSERT_TRUE((*s)->Put(m, p));
  }
  (*s)->Flush();
  ASSERT_TRUE((*s)->Get(m0, static_cast<int64_t>(p0.size())).ok());  // block 0 is the most recent now
  auto [m3, p3] = Block(3);
  ASSERT_TRUE((*s)->Put(m3, p3));
  (*s)->Flush();
  EXPECT_TRUE((*s)->Contains(m0.hash));
  EXPECT_FALSE((*s)->Contains(Block(1).first.hash));  // the least recently used
  EXPECT_TRUE((*s)->Contains(m3.hash));
  const DiskStoreStats st = (*s)->stats();
  EXPECT_LE(st.bytes, 3500);
  EXPECT_EQ(st.evicted_blocks, 1);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir_)) files += e.path().extension() == ".kvb";
  EXPECT_EQ(files, st.blocks);
}

// The index listener (what the replica's cache-event log reports as its
// kDisk group): every write, eviction and drop, in order, and at the call
// the blocks indexed already (a restart).
TEST_F(DiskStoreTest, TheIndexListenerSeesEveryChangeAndTheIndexAtTheCall) {
  PrefixCacheEvents events;
  auto listen = [&events](DiskKvStore& store) {
    store.SetIndexListener([&events](const BlockHash& h, bool held) {
      if (held) {
        events.Stored(h, CacheGroup::kDisk);
      } else {
        events.Evicted(h, CacheGroup::kDisk);
      }
    });
  };
  {
    auto s = DiskKvStore::Open(Config(3500));  // three ~1.1 KB files fit
    ASSERT_TRUE(s.ok());
    listen(**s);
    for (int i = 0; i <= 3; ++i) {
      auto [m, p] = Block(i);
      ASSERT_TRUE((*s)->Put(m, p));
    }
    (*s)->Flush();
    EXPECT_EQ(events.num_held(CacheGroup::kDisk), 3u) << "block 0 evicted";
    const CacheEventsPage page = events.Since(events.epoch(), 0, 100);
    ASSERT_EQ(page.events.size(), 5u);  // +0 +1 +2 +3 -0 (3's bytes put the files over the bound)
    EXPECT_TRUE(page.events[3].stored);
    EXPECT_EQ(page.events[3].hash, Block(3).first.hash);
    EXPECT_FALSE(page.events[4].stored);
    EXPECT_EQ(page.events[4].hash, Block(0).first.hash);
    // A corrupt file, found by Get, leaves the index and the log.
    auto [m2, p2] = Block(2);
    {
      std::fstream f(FileOf(m2.hash), std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(-3, std::ios::end);
      f.put('\x5a');
    }
    EXPECT_FALSE((*s)->Get(m2, static_cast<int64_t>(p2.size())).ok());
    EXPECT_EQ(events.num_held(CacheGroup::kDisk), 2u);
    (*s)->SetIndexListener(nullptr);
  }
  PrefixCacheEvents after_restart;
  auto s = DiskKvStore::Open(Config(3500));
  ASSERT_TRUE(s.ok());
  (*s)->SetIndexListener([&after_restart](const BlockHash& h, bool held) {
    if (held) after_restart.Stored(h, CacheGroup::kDisk);
  });
  const CacheEventsPage reset = after_restart.Since(0, 0, 100);
  ASSERT_EQ(reset.disk_blocks.size(), 2u) << "blocks 1 and 3, indexed at open, reported at the call";
  EXPECT_TRUE((*s)->Contains(Block(1).first.hash));
  EXPECT_TRUE((*s)->Contains(Block(3).first.hash));
}

// Read-ahead: blocks prefetched on the reader thread are handed to Get
// without a read on the caller's thread; a corrupt one is dropped there as
// in Get; the bound holds.
TEST_F(DiskStoreTest, PrefetchedBlocksAreHandedOverAndCheckedLikeGet) {
  DiskStoreConfig c = Config();
  c.max_prefetch_bytes = 2500;  // two 1,000-byte payloads
  auto s = DiskKvStore::Open(c);
  ASSERT_TRUE(s.ok());
  std::vector<DiskBlockMeta> metas;
  std::vector<std::vector<uint8_t>> payloads;
  for (int i = 0; i < 4; ++i) {
    auto [m, p] = Block(i);
    ASSERT_TRUE((*s)->Put(m, p));
    metas.push_back(m);
    payloads.push_back(p);
  }
  (*s)->Flush();
  {  // block 1 corrupt on disk
    std::fstream f(FileOf(metas[1].hash), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-5, std::ios::end);
    f.put('\x11');
  }
  auto wait_for = [&](auto pred) {
    for (int i = 0; i < 500 && !pred((*s)->stats()); ++i) usleep(2000);
    return pred((*s)->stats());
  };
  (*s)->Prefetch(metas, 1000);  // 0 and 1 fit the bound; 2 and 3 are not queued
  ASSERT_TRUE(wait_for([](const DiskStoreStats& st) { return st.prefetched_blocks + st.dropped_corrupt == 2; }));
  EXPECT_EQ((*s)->stats().prefetched_blocks, 1);
  EXPECT_EQ((*s)->stats().dropped_corrupt, 1);
  EXPECT_FALSE((*s)->Contains(metas[1].hash));
  auto got = (*s)->Get(metas[0], 1000);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, payloads[0]);
  EXPECT_EQ((*s)->stats().prefetch_hits, 1);
  EXPECT_EQ((*s)->stats().read_blocks, 1) << "the reader read it; the Get did not";
  EXPECT_FALSE((*s)->Get(metas[1], 1000).ok());
  // Room again: 2 and 3 are read ahead; a Get that expects another block
  // under 3's hash (another parent) does not get 3's bytes.
  (*s)->Prefetch({metas[2], metas[3]}, 1000);
  ASSERT_TRUE(wait_for([](const DiskStoreStats& st) { return st.prefetched_blocks == 3; }));
  got = (*s)->Get(metas[2], 1000);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, payloads[2]);
  DiskBlockMeta other = metas[3];
  other.parent = metas[0].hash;
  EXPECT_FALSE((*s)->Get(other, 1000).ok());
  const DiskStoreStats st = (*s)->stats();
  EXPECT_EQ(st.prefetch_hits, 2);
  EXPECT_EQ(st.prefetch_unused, 1);
}

TEST_F(DiskStoreTest, AFullQueueDropsInsteadOfWaiting) {
  DiskStoreConfig c = Config();
  c.max_pending_bytes = 1500;
  auto s = DiskKvStore::Open(c);
  ASSERT_TRUE(s.ok());
  int queued = 0;
  for (int i = 0; i < 50; ++i) {
    auto [m, p] = Block(i);
    queued += (*s)->Put(m, p);
  }
  (*s)->Flush();
  const DiskStoreStats st = (*s)->stats();
  EXPECT_EQ(st.written_blocks, queued);
  EXPECT_EQ(st.queue_full, 50 - queued);
  EXPECT_EQ(st.pending_bytes, 0);
}

TEST_F(DiskStoreTest, RefusesAPathItCannotUse) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "a-file") << "x";
  DiskStoreConfig c = Config();
  c.path = (dir_ / "a-file").string();
  EXPECT_FALSE(DiskKvStore::Open(c).ok());
  c = Config(0);
  EXPECT_FALSE(DiskKvStore::Open(c).ok());
}

}  // namespace
}  // namespace kvs::kvcache
