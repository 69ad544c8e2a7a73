// BlockManager with a sliding-window KV group: window blocks leave a
// sequence as they leave every query's window, admission needs both groups,
// and a prefix hit needs the verified window blocks its first chunk reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "engine/block_manager.h"
#include "engine/block_manager_test_util.h"

namespace kvs::engine {
namespace window_test {

using testing::Admit;
using testing::Compute;
using testing::MakeSeq;

int32_t HeldWindowBlocks(const Sequence& s) {
  int32_t n = 0;
  for (int32_t b : s.window_block_table) n += b >= 0;
  return n;
}

TEST(BlockManagerWindowTest, WindowBlocksAreFreedAsTheSequenceAdvances) {
  constexpr int32_t kBs = 4, kWindow = 6;
  BlockManager bm(64, kBs, true, WindowGroupConfig{16, kWindow});
  ASSERT_TRUE(bm.has_window());
  std::vector<int32_t> tokens(100);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(i % 7);
  Sequence s = MakeSeq(tokens);
  Admit(bm, s, 9);
  EXPECT_EQ(s.window_block_table.size(), 3u);
  EXPECT_EQ(bm.pool(KvGroup::kWindow).num_used(), 3);
  Compute(bm, s, 9);
  // A query at 9 sees (3, 9]: block 0 (positions 0-3) is out of the window.
  EXPECT_EQ(s.num_window_dropped, 1);
  EXPECT_EQ(s.window_block_table[0], -1);
  EXPECT_EQ(bm.pool(KvGroup::kWindow).num_used(), 2);
  for (int32_t c = 9; c < 99; ++c) {
    ASSERT_TRUE(bm.CanAppend(s, c + 1));
    bm.Append(s, c + 1);
    Compute(bm, s, c + 1);
    const int32_t first = std::max(0, c + 1 - kWindow + 1) / kBs;
    ASSERT_EQ(s.num_window_dropped, first);
    for (int32_t i = 0; i < static_cast<int32_t>(s.window_block_table.size()); ++i) {
      ASSERT_EQ(s.window_block_table[static_cast<size_t>(i)] < 0, i < first) << "entry " << i << " at " << c + 1;
    }
    // Held: the window (6 positions) plus the block the next token goes to.
    ASSERT_LE(HeldWindowBlocks(s), (kWindow + kBs - 1) / kBs + 1);
    ASSERT_EQ(bm.pool(KvGroup::kWindow).num_used(), HeldWindowBlocks(s));
    ASSERT_EQ(bm.num_used(), (c + 1 + kBs - 1) / kBs) << "the global layers keep every block";
    ASSERT_EQ(bm.CheckInvariants(), "");
  }
  bm.Free(s);
  EXPECT_EQ(bm.pool(KvGroup::kWindow).num_used(), 0);
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

TEST(BlockManagerWindowTest, AdmissionNeedsBothGroups) {
  BlockManager bm(64, 4, false, WindowGroupConfig{3, 6});
  Sequence a = MakeSeq(std::vector<int32_t>(40, 1));
  const PrefixMatch m = bm.MatchPrefix(a);
  EXPECT_TRUE(bm.CanAllocate(m, 12));
  EXPECT_FALSE(bm.CanAllocate(m, 13)) << "4 window blocks, only 3 exist";
  bm.Allocate(a, m, 12);
  EXPECT_FALSE(bm.CanAppend(a, 13));
  Compute(bm, a, 12);  // a query at 12 sees (6, 12]: block 0 leaves the window
  EXPECT_EQ(bm.pool(KvGroup::kWindow).num_available(), 1);
  EXPECT_TRUE(bm.CanAppend(a, 16));
  EXPECT_FALSE(bm.CanAppend(a, 17));
  bm.Append(a, 16);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

// A (20 tokens, one chunk) leaves its window blocks 0-2 cached as they leave
// the window and 3-4 when it ends. A hit needs exactly 3 and 4.
// MaxAdmissibleTokens is what admission accepts: the window group limits
// only while it has fewer blocks available than one sequence's worst case.
TEST(BlockManagerWindowTest, MaxAdmissibleTokensFollowsTheTighterGroup) {
  constexpr int32_t kBs = 4, kWindow = 6, kChunk = 64;
  // One sequence holds at most ceil((6 - 1 + 64) / 4) + 1 = 19 window blocks.
  ASSERT_EQ(WindowBlocksPerSequence(kWindow, kChunk, kBs), 19);
  BlockManager bm(40, kBs, false, WindowGroupConfig{24, kWindow});
  // 24 window blocks available >= 19: the full group (40 blocks) decides.
  EXPECT_EQ(bm.MaxAdmissibleTokens(kChunk), 40 * kBs);

  // Another sequence holds 10 blocks of each group: 30 full, 14 window left.
  Sequence other = MakeSeq(std::vector<int32_t>(40, 2));
  Admit(bm, other, 40);
  ASSERT_EQ(bm.pool(KvGroup::kWindow).num_available(), 14);
  EXPECT_EQ(bm.MaxAdmissibleTokens(kChunk), 14 * kBs) << "the window group is the tight one";
  // A cold prompt of exactly that length (one chunk) is admitted; one more
  // token is not. The full group alone would take 30 * 4 = 120.
  const int64_t limit = bm.MaxAdmissibleTokens(kChunk);
  Sequence fits = MakeSeq(std::vector<int32_t>(static_cast<size_t>(limit), 3));
  EXPECT_TRUE(bm.CanAllocate(bm.MatchPrefix(fits), static_cast<int32_t>(limit)));
  Sequence longer = MakeSeq(std::vector<int32_t>(static_cast<size_t>(limit) + 1, 3));
  EXPECT_FALSE(bm.CanAllocate(bm.MatchPrefix(longer), static_cast<int32_t>(limit) + 1));

  // Once the window group has its per-sequence bound again, the full group
  // limits: a sequence past its window gave its early window blocks back.
  other.num_computed_tokens = 40;
  bm.CommitComputed(other);
  ASSERT_GE(bm.pool(KvGroup::kWindow).num_available(), 19);
  EXPECT_EQ(bm.MaxAdmissibleTokens(kChunk), 30 * kBs);
  bm.Free(other);
  EXPECT_EQ(bm.MaxAdmissibleTokens(kChunk), 40 * kBs);
  EXPECT_EQ(bm.CheckInvariants(), "");

  // Without a window group: the full group's available blocks.
  BlockManager plain(40, kBs, false);
  EXPECT_EQ(plain.MaxAdmissibleTokens(kChunk), 40 * kBs);
}

TEST(BlockManagerWindowTest, PrefixHitNeedsTheWindowBlocksItReads) {
  constexpr int32_t kBs = 4;
  BlockManager bm(64, kBs, true, WindowGroupConfig{6, 6});
  std::vector<int32_t> prompt(21);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i + 1);
  Sequence a = MakeSeq(prompt);
  Admit(bm, a, 20);
  Compute(bm, a, 20);
  EXPECT_EQ(a.num_window_dropped, 3);
  const std::vector<int32_t> a_window = a.window_block_table;
  bm.Free(a);
  EXPECT_EQ(bm.pool(KvGroup::kWindow).num_cached(), 5);

  Sequence b = MakeSeq(prompt);
  PrefixMatch m = bm.MatchPrefix(b);
  ASSERT_EQ(m.block_ids.size(), 5u);
  EXPECT_EQ(m.window_block_ids, (std::vector<int32_t>{-1, -1, -1, a_window[3], a_window[4]}));
  EXPECT_EQ(m.num_window_evictable, 2);

  // Another prompt takes the free window block and evicts the oldest cached
  // ones (0, 1, 2: freed first). The hit does not need them.
  Sequence x = MakeSeq(std::vector<int32_t>(30, 99));
  Admit(bm, x, 16);
  EXPECT_EQ(bm.pool(KvGroup::kWindow).num_cached(), 2);
  m = bm.MatchPrefix(b);
  ASSERT_EQ(m.block_ids.size(), 5u);
  // One more evicts block 4's: no shorter prefix has all its window blocks either.
  bm.Append(x, 17);
  EXPECT_EQ(bm.pool(KvGroup::kWindow).num_cached(), 1);
  m = bm.MatchPrefix(b);
  EXPECT_TRUE(m.block_ids.empty());
  EXPECT_TRUE(m.window_block_ids.empty());
  bm.Free(x);

  // Allocating a hit references only the window blocks in the window.
  Sequence c = MakeSeq(prompt);
  Admit(bm, c, 20);
  Compute(bm, c, 20);
  bm.Free(c);
  Sequence d = MakeSeq(prompt);
  const PrefixMatch hit = Admit(bm, d, 21);
  ASSERT_EQ(hit.block_ids.size(), 5u);
  EXPECT_EQ(d.num_computed_tokens, 20);
  EXPECT_EQ(d.num_window_dropped, 3);
  EXPECT_EQ(d.window_block_table.size(), 6u);
  EXPECT_EQ(HeldWindowBlocks(d), 3);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

// The real chain hash, except that block [7, 7] collides with [1, 2].
kvcache::BlockHash CollidingHash(const kvcache::BlockHash& parent, std::span<const int32_t> tokens) {
  static const int32_t kTwin[] = {1, 2};
  if (tokens.size() == 2 && tokens[0] == 7 && tokens[1] == 7) tokens = kTwin;
  return kvcache::ChainBlockHash(parent, tokens);
}

// A = [7 7 | 3 4 | 5] and B = [1 2 | 3 4 | 5] collide at both blocks. A's
// window block 1 (tokens [3 4], KV after [7 7]) stays cached while A's full
// blocks are reused by B, so its twin is B's block 1 by id but not by
// generation: it must never serve B's prefix. B's commit replaces it, and D
// (= B's prompt) hits B's blocks.
// Cache events with a window group: a window block is reported held while
// a hit can use it, and gone when its twin full block is evicted, even if
// the window block itself stays in use and later a new full block publishes
// the same hash (then MatchPrefix misses: the twin's generation changed).
TEST(BlockManagerWindowTest, EventsReportAWindowBlockGoneWithItsTwin) {
  constexpr int32_t kBs = 4, kWindow = 6;
  kvcache::PrefixCacheEvents log;
  BlockManager bm(8, kBs, true, WindowGroupConfig{5, kWindow});
  bm.set_events(&log);
  auto held = [&](const std::vector<int32_t>& tokens, int32_t i, kvcache::CacheGroup g) {
    const kvcache::BlockHash h = kvcache::ChainBlockHashes("", tokens, kBs)[static_cast<size_t>(i)];
    const kvcache::CacheEventsPage p = log.Since(0, 0, 0);  // a reset: the held sets
    const std::vector<kvcache::BlockHash>& set = g == kvcache::CacheGroup::kWindow ? p.window_blocks : p.blocks;
    return std::find(set.begin(), set.end(), h) != set.end();
  };
  std::vector<int32_t> prompt(12);
  for (int32_t i = 0; i < 12; ++i) prompt[static_cast<size_t>(i)] = i;
  // A computes 12 tokens: full and window blocks 0-2 published; window 0 leaves.
  Sequence a = MakeSeq(prompt);
  Admit(bm, a, 12);
  Compute(bm, a, 12);
  bm.Free(a);
  EXPECT_TRUE(held(prompt, 0, kvcache::CacheGroup::kWindow));
  // E takes 3 window blocks: 2 free and the oldest cached one, A's window 0.
  Sequence e = MakeSeq(std::vector<int32_t>(12, 90));
  Admit(bm, e, 12);
  bm.Free(e);
  EXPECT_FALSE(held(prompt, 0, kvcache::CacheGroup::kWindow));
  EXPECT_TRUE(held(prompt, 0, kvcache::CacheGroup::kFull));
  // B shares blocks 0-1 but misses (window 0 is gone) and recomputes them:
  // its private block 0's window block is published with twin A's block 0.
  std::vector<int32_t> b_tokens(prompt.begin(), prompt.begin() + 8);
  b_tokens.insert(b_tokens.end(), {70, 71});
  Sequence b = MakeSeq(b_tokens);
  EXPECT_TRUE(bm.MatchPrefix(b).block_ids.empty());
  Admit(bm, b, 8);
  Compute(bm, b, 8);
  EXPECT_TRUE(held(prompt, 0, kvcache::CacheGroup::kWindow));
  // D grows to 6 full blocks (a window's worth of window blocks at a time):
  // the 3 free ones, then A's 2, 1 and 0, the twin of B's window block 0.
  Sequence d = MakeSeq(std::vector<int32_t>(24, 91));
  Admit(bm, d, 8);
  Compute(bm, d, 8);
  for (int32_t n = 12; n <= 24; n += 4) {
    ASSERT_TRUE(bm.CanAppend(d, n));
    bm.Append(d, n);
    Compute(bm, d, n);
  }
  EXPECT_FALSE(held(prompt, 0, kvcache::CacheGroup::kFull));
  EXPECT_FALSE(held(prompt, 0, kvcache::CacheGroup::kWindow)) << "its twin is gone; B still holds the window block";
  bm.Free(d);
  // T publishes block 0 again; B's window block, still in use, keeps the
  // hash in the window group's index, but no hit can verify it.
  std::vector<int32_t> t_tokens(prompt.begin(), prompt.begin() + 4);
  t_tokens.insert(t_tokens.end(), {50, 51, 52, 53, 54});
  Sequence t = MakeSeq(t_tokens);
  Admit(bm, t, 9);
  Compute(bm, t, 9);
  bm.Free(t);
  EXPECT_TRUE(held(prompt, 0, kvcache::CacheGroup::kFull));
  EXPECT_FALSE(held(prompt, 0, kvcache::CacheGroup::kWindow));
  EXPECT_GE(bm.pool(KvGroup::kWindow).Find(kvcache::ChainBlockHashes("", prompt, kBs)[0]), 0);
  std::vector<int32_t> probe_tokens(prompt.begin(), prompt.begin() + 4);
  probe_tokens.insert(probe_tokens.end(), {60, 61, 62, 63, 64});
  Sequence probe = MakeSeq(probe_tokens);
  EXPECT_TRUE(bm.MatchPrefix(probe).block_ids.empty()) << "what the events say: no hit";
  bm.Free(b);
  EXPECT_EQ(bm.CheckInvariants(), "");
}

TEST(BlockManagerWindowTest, WindowBlockOfACollidingPrefixIsNeverAHit) {
  BlockManager bm(3, 2, true, WindowGroupConfig{8, 3});
  bm.TEST_SetHashFunction(&CollidingHash);
  Sequence a = MakeSeq({7, 7, 3, 4, 5});
  Admit(bm, a, 5);
  Compute(bm, a, 4);
  const int32_t a_window1 = a.window_block_table[1];
  bm.Free(a);
  Sequence b = MakeSeq({1, 2, 3, 4, 5});
  EXPECT_TRUE(bm.MatchPrefix(b).block_ids.empty()) << "block 0 holds [7 7]";
  Admit(bm, b, 5);  // evicts A's full blocks
  Compute(bm, b, 4);
  const int32_t b_window1 = b.window_block_table[1];
  ASSERT_NE(b_window1, a_window1);
  bm.Free(b);
  Sequence d = MakeSeq({1, 2, 3, 4, 5});
  const PrefixMatch m = bm.MatchPrefix(d);
  ASSERT_EQ(m.block_ids.size(), 2u);
  EXPECT_EQ(m.window_block_ids, (std::vector<int32_t>{-1, b_window1}));
  EXPECT_EQ(bm.CheckInvariants(), "");
}

// Random admissions, chunks, frees and releases over both groups. Each slot
// of each group holds a hash of the whole history up to its position; every
// read a chunk would make in the window ([start - W + 1, start)) and every
// prefix hit must find exactly its own history there.
TEST(BlockManagerWindowTest, RandomOperationsKeepInvariantsAndReadOnlyTheirOwnHistory) {
  constexpr int32_t kBlocks = 64, kWindowBlocks = 24, kBs = 4, kWindow = 7;
  BlockManager bm(kBlocks, kBs, true, WindowGroupConfig{kWindowBlocks, kWindow});
  std::mt19937_64 rng(11);
  auto history = [](const Sequence& s, int32_t p) {
    uint64_t h = std::hash<std::string>{}(s.cache_salt);
    for (int32_t i = 0; i <= p; ++i) h = h * 1000003 + static_cast<uint64_t>(s.token_ids[static_cast<size_t>(i)]) + 1;
    return h;
  };
  std::vector<std::vector<uint64_t>> kv(kBlocks, std::vector<uint64_t>(kBs, 0));
  std::vector<std::vector<uint64_t>> wkv(kWindowBlocks, std::vector<uint64_t>(kBs, 0));
  // Checks what a chunk starting at `start` reads, then writes [start, end).
  auto run_chunk = [&](const Sequence& s, int32_t start, int32_t end) {
    for (int32_t p = std::max(0, start - kWindow + 1); p < start; ++p) {
      const int32_t w = s.window_block_table[static_cast<size_t>(p / kBs)];
      ASSERT_GE(w, 0) << "position " << p << " is in the window of " << start;
      ASSERT_EQ(wkv[static_cast<size_t>(w)][static_cast<size_t>(p % kBs)], history(s, p));
    }
    for (int32_t p = 0; p < start; ++p) {
      ASSERT_EQ(kv[static_cast<size_t>(s.block_table[static_cast<size_t>(p / kBs)])][static_cast<size_t>(p % kBs)],
                history(s, p));
    }
    for (int32_t p = start; p < end; ++p) {
      const auto slot = static_cast<size_t>(p % kBs);
      kv[static_cast<size_t>(s.block_table[static_cast<size_t>(p / kBs)])][slot] = history(s, p);
      wkv[static_cast<size_t>(s.window_block_table[static_cast<size_t>(p / kBs)])][static_cast<size_t>(p % kBs)] =
          history(s, p);
    }
  };
  std::vector<std::unique_ptr<Sequence>> live;
  const std::vector<std::vector<int32_t>> prefixes = {
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {1, 2, 3, 4, 9, 9, 9, 9}, {5, 5}};
  int64_t hits = 0;
  for (int op = 0; op < 20000; ++op) {
    const int kind = static_cast<int>(rng() % 10);
    if (kind < 3 && live.size() < 8) {
      auto seq = testing::RandomPrefixedSeq(rng, prefixes, op);
      const PrefixMatch m = bm.MatchPrefix(*seq);
      const int32_t cached = m.num_tokens(kBs);
      const int32_t left = std::min(seq->num_tokens() - cached, 9);
      const int32_t n = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(left));
      if (!bm.CanAllocate(m, cached + n)) continue;
      hits += cached;
      bm.Allocate(*seq, m, cached + n);
      ASSERT_EQ(seq->num_computed_tokens, cached);
      run_chunk(*seq, cached, cached + n);
      if (HasFatalFailure()) return;
      Compute(bm, *seq, cached + n);
      live.push_back(std::move(seq));
    } else if (kind < 8 && !live.empty()) {
      Sequence& s = *live[rng() % live.size()];
      if (s.num_computed_tokens == s.num_tokens()) s.token_ids.push_back(static_cast<int32_t>(rng() % 3));
      const int32_t n = 1 + static_cast<int32_t>(rng() % static_cast<uint64_t>(std::min(s.num_uncomputed_tokens(), 9)));
      const int32_t target = s.num_computed_tokens + n;
      if (!bm.CanAppend(s, target)) continue;
      bm.Append(s, target);
      run_chunk(s, s.num_computed_tokens, target);
      if (HasFatalFailure()) return;
      Compute(bm, s, target);
    } else if (kind == 8 && rng() % 8 == 0) {
      for (KvGroup g : {KvGroup::kFull, KvGroup::kWindow}) {
        for (int32_t id : bm.TakeIdleFree(Clock::now() + std::chrono::seconds(1), g)) {
          ASSERT_EQ(bm.ref_count(id, g), 0);
          (g == KvGroup::kFull ? kv : wkv)[static_cast<size_t>(id)].assign(kBs, 0);
        }
      }
    } else if (!live.empty()) {
      const size_t i = rng() % live.size();
      bm.Free(*live[i]);
      live.erase(live.begin() + static_cast<ptrdiff_t>(i));
    }
    ASSERT_EQ(bm.CheckInvariants(), "") << "after op " << op;
    std::map<int32_t, int32_t> refs, wrefs;
    for (const auto& s : live) {
      for (int32_t b : s->block_table) ++refs[b];
      for (int32_t b : s->window_block_table) wrefs[b] += b >= 0;
      ASSERT_EQ(s->num_window_dropped, bm.FirstWindowBlock(s->num_computed_tokens));
      ASSERT_LE(HeldWindowBlocks(*s), NumBlocksFor(s->num_computed_tokens, kBs) - s->num_window_dropped + 3);
    }
    for (int32_t b = 0; b < kBlocks; ++b) ASSERT_EQ(bm.ref_count(b), refs[b]) << "block " << b << " op " << op;
    for (int32_t b = 0; b < kWindowBlocks; ++b) {
      ASSERT_EQ(bm.ref_count(b, KvGroup::kWindow), wrefs[b]) << "window block " << b << " op " << op;
    }
  }
  EXPECT_GT(hits, 500);
  for (auto& s : live) bm.Free(*s);
  EXPECT_EQ(bm.num_used(), 0);
  EXPECT_EQ(bm.pool(KvGroup::kWindow).num_used(), 0);
}

}  // namespace window_test
}  // namespace kvs::engine
