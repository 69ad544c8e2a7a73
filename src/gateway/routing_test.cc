// Routing policies: cache-aware scoring (affinity while it pays, load when
// it does not, limits, the routing record when the replica's index is stale,
// a hot prefix spread over replicas), PrefixIndex paging and malformed pages,
// a sliding-window replica's window blocks (pages from the server's own
// encoder), round robin.
#include "gateway/routing.h"

#include <gtest/gtest.h>

#include <map>

#include "gateway/router.h"
#include "kvcache/cache_events.h"
#include "kvcache/cache_events_json.h"

namespace kvs::gateway {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

PoolConfig ThreePools(const std::string& routing) {
  PoolConfig p;
  p.name = "main";
  p.max_context = 4096;
  p.routing = routing;
  p.replicas = {{"http://127.0.0.1:1", 1}, {"http://127.0.0.1:2", 1}, {"http://127.0.0.1:3", 1}};
  return p;
}

std::vector<int32_t> Prompt(int32_t prefix_id, int32_t prefix_len, int32_t tail_len, int32_t tail_id = 0) {
  std::vector<int32_t> t;
  for (int32_t i = 0; i < prefix_len; ++i) t.push_back(prefix_id * 10000 + i);
  for (int32_t i = 0; i < tail_len; ++i) t.push_back(500000 + tail_id * 1000 + i);
  return t;
}

// A replica's /v1/cache/blocks page holding these prompts' full blocks.
nlohmann::json PageHolding(const std::vector<std::vector<int32_t>>& prompts, uint64_t seq = 1) {
  nlohmann::json blocks = nlohmann::json::array();
  for (const auto& p : prompts) {
    for (const auto& h : kvcache::ChainBlockHashes("", p, 16)) blocks.push_back(kvcache::BlockHashHex(h));
  }
  return {{"object", "cache.blocks"}, {"block_size", 16}, {"epoch", "abc"}, {"seq", seq}, {"reset", true},
          {"more", false}, {"blocks", blocks}, {"events", nlohmann::json::array()}};
}

struct Env {
  explicit Env(const std::string& routing) : router({ThreePools(routing)}, nullptr, 0.2) {
    for (Replica* r : router.AllReplicas()) r->OnProbe(true, false, 2);
  }
  Pool& pool() { return *router.pools()[0]; }
  Replica* rep(int i) { return pool().replicas[static_cast<size_t>(i)]; }
  Replica* Pick(const std::vector<int32_t>& prompt, RouteInput* out = nullptr) {
    prompts = {prompt};
    RouteInput in;
    in.prompt_tokens = static_cast<int64_t>(prompt.size());
    in.cost = in.prompt_tokens + 16;
    in.prompt_ids = &prompts;
    Replica* r = router.policy(pool()).Pick(pool(), in, {});
    if (out) *out = in;
    return r;
  }
  Router router;
  std::vector<std::vector<int32_t>> prompts;
};

TEST(CacheAwareTest, SharedPrefixLandsWhereItIsCachedWhileThatPays) {
  Env e("cache_aware");
  ASSERT_STREQ(e.router.policy(e.pool()).name(), "cache_aware");
  const auto sys = Prompt(7, 2048, 0);
  bool more = false;
  ASSERT_TRUE(e.rep(1)->prefix_index().Apply(PageHolding({sys}), Clock::now(), &more));
  // Replica 1 holds the 2K system prompt: it wins over idle replicas even
  // with 1,500 tokens outstanding (it saves 2,048 of prefill).
  e.rep(1)->AddOutstanding(1500, 1);
  RouteInput in;
  EXPECT_EQ(e.Pick(Prompt(7, 2048, 100, 1), &in), e.rep(1));
  EXPECT_TRUE(in.prediction.made);
  EXPECT_EQ(in.prediction.cached_tokens, 2048);
  EXPECT_EQ(in.prediction.source, PrefixIndex::Source::kReplica);
  // Bounded load: once its backlog exceeds what the cache saves, another one.
  e.rep(1)->AddOutstanding(1000, 1);
  Replica* other = e.Pick(Prompt(7, 2048, 100, 2), &in);
  EXPECT_NE(other, e.rep(1));
  EXPECT_EQ(in.prediction.cached_tokens, 0);
  EXPECT_EQ(in.prediction.best_cached_tokens, 2048);  // counted as routed away
  other->AddOutstanding(in.cost, 1);
  // Over the KV watermark: skipped whatever it holds.
  e.rep(1)->AddOutstanding(-2500, -2);
  e.rep(1)->SetScraped(0, 1, 0.95);
  Replica* skipped = e.Pick(Prompt(7, 2048, 100, 3), &in);
  EXPECT_NE(skipped, e.rep(1));
  skipped->AddOutstanding(in.cost, 1);
  e.rep(1)->SetScraped(0, 1, 0.5);
  EXPECT_EQ(e.Pick(Prompt(7, 2048, 100, 4)), e.rep(1));
  // A prompt whose only full block ends at its last token predicts nothing
  // (the replica always computes the last token).
  e.Pick(Prompt(7, 16, 0), &in);
  EXPECT_EQ(in.prediction.cached_tokens, 0);
  e.Pick(Prompt(7, 17, 0), &in);
  EXPECT_EQ(in.prediction.cached_tokens, 16);
}

TEST(CacheAwareTest, RoutingRecordBridgesAStaleOrMissingIndex) {
  Env e("cache_aware");
  // No replica index at all (never polled): the second request of a
  // conversation follows the first through the gateway's own record.
  RouteInput in;
  Replica* first = e.Pick(Prompt(3, 512, 10), &in);
  EXPECT_EQ(in.prediction.cached_tokens, 0);
  first->AddOutstanding(300, 1);  // still running, yet cheaper than 512 tokens of prefill elsewhere
  EXPECT_EQ(e.Pick(Prompt(3, 512, 40, 1), &in), first);
  EXPECT_EQ(in.prediction.source, PrefixIndex::Source::kRouted);
  EXPECT_EQ(in.prediction.cached_tokens, 512);
  // A fresh replica index that does not hold the prefix overrides an old
  // routing record (the replica evicted it), but not a recent one.
  bool more = false;
  ASSERT_TRUE(first->prefix_index().Apply(PageHolding({}), Clock::now(), &more));
  EXPECT_EQ(first->prefix_index().Longest({}, Clock::now(), 1s, 1s).blocks, 0);
  const auto h = kvcache::ChainBlockHashes("", Prompt(3, 512, 0), 16);
  EXPECT_EQ(first->prefix_index().Longest(h, Clock::now(), 2s, 300s).blocks, 32);  // just routed: bridged
  ASSERT_TRUE(first->prefix_index().Apply(PageHolding({}, 2), Clock::now() + 3s, &more));
  EXPECT_EQ(first->prefix_index().Longest(h, Clock::now() + 3s, 2s, 300s).blocks, 0);  // older: the replica's word
  // Stale replica index (no poll for longer than stale_after): the record counts for its ttl.
  first->prefix_index().MarkFailed();
  EXPECT_EQ(first->prefix_index().Longest(h, Clock::now() + 3s, 5s, 300s).blocks, 32);
  EXPECT_EQ(first->prefix_index().Longest(h, Clock::now() + 301s, 5s, 300s).blocks, 0);  // aged out
}

TEST(CacheAwareTest, HotPrefixDoesNotPileOntoOneReplica) {
  Env e("cache_aware");
  const auto hot = Prompt(1, 1024, 0);
  bool more = false;
  ASSERT_TRUE(e.rep(0)->prefix_index().Apply(PageHolding({hot}), Clock::now(), &more));
  // 60 requests sharing the hot prefix arrive while none finishes; each
  // reserves its prompt + 256 output tokens.
  std::map<Replica*, int> n;
  for (int i = 0; i < 60; ++i) {
    Replica* r = e.Pick(Prompt(1, 1024, 32, i));
    ASSERT_NE(r, nullptr);
    r->AddOutstanding(1024 + 32 + 256, 1);
    ++n[r];
  }
  // Every replica takes a share; the cached one a larger one, bounded by
  // what the cache saves (about one prefill's worth of extra backlog).
  ASSERT_EQ(n.size(), 3u);
  for (int i = 1; i < 3; ++i) EXPECT_GE(n[e.rep(i)], 15) << i;
  EXPECT_LE(e.rep(0)->outstanding_tokens() - std::min(e.rep(1)->outstanding_tokens(), e.rep(2)->outstanding_tokens()),
            1024 + 1312);
}

TEST(CacheAwareTest, QueueLimitAndAllOverLimits) {
  Env e("cache_aware");
  e.pool().config.max_queue = 4;
  e.rep(0)->SetScraped(4, 8, 0.1);
  e.rep(1)->SetScraped(5, 8, 0.1);
  EXPECT_EQ(e.Pick(Prompt(1, 64, 1)), e.rep(2));
  e.rep(2)->SetScraped(9, 8, 0.1);
  // Every replica over a limit: still the cheapest, not a refusal.
  EXPECT_NE(e.Pick(Prompt(1, 64, 1)), nullptr);
}

TEST(PrefixIndexTest, EventsAfterResetAndMalformedPagesChangeNothing) {
  PrefixIndex idx;
  EXPECT_EQ(idx.NextQuery(), "epoch=0&since=0");
  EXPECT_FALSE(idx.Fresh(Clock::now(), 10s));
  const auto a = kvcache::ChainBlockHashes("", Prompt(1, 32, 0), 16);
  bool more = false;
  ASSERT_TRUE(idx.Apply(PageHolding({Prompt(1, 32, 0)}, 5), Clock::now(), &more));
  EXPECT_EQ(idx.NextQuery(), "epoch=abc&since=5");
  EXPECT_EQ(idx.num_replica_blocks(), 2u);
  EXPECT_TRUE(idx.Fresh(Clock::now(), 10s));
  nlohmann::json ev = {{"epoch", "abc"}, {"seq", 7}, {"block_size", 16}, {"reset", false}, {"more", true},
                       {"events", {"-" + kvcache::BlockHashHex(a[1]), "+" + kvcache::BlockHashHex(a[1])}}};
  ASSERT_TRUE(idx.Apply(ev, Clock::now(), &more));
  EXPECT_TRUE(more);
  EXPECT_EQ(idx.Longest(a, Clock::now(), 10s, 10s).blocks, 2);
  ev["events"] = {"-" + kvcache::BlockHashHex(a[1]), "?zz"};
  EXPECT_FALSE(idx.Apply(ev, Clock::now(), &more));
  EXPECT_FALSE(idx.Fresh(Clock::now(), 10s));  // a bad page makes the index stale...
  EXPECT_EQ(idx.num_replica_blocks(), 2u);     // ...and changes nothing
  EXPECT_FALSE(idx.Apply(nlohmann::json::parse("[1,2]"), Clock::now(), &more));
  EXPECT_EQ(idx.resyncs(), 1u);
}

// A sliding-window replica (window 40, blocks of 16): its page, encoded by
// the server's own encoder (kvcache::CacheBlocksJson), holds `full` of the
// prompt's full blocks and `window` of their window blocks. A hit of L
// blocks needs window blocks [max(0, 16 L - 39) / 16, L).
nlohmann::json WindowPage(const std::vector<kvcache::BlockHash>& h, const std::vector<int>& full,
                          const std::vector<int>& window, uint64_t seq = 1) {
  kvcache::CacheEventsPage p;
  p.epoch = 0xabc;
  p.seq = seq;
  p.reset = true;
  for (int i : full) p.blocks.push_back(h[static_cast<size_t>(i)]);
  for (int i : window) p.window_blocks.push_back(h[static_cast<size_t>(i)]);
  return kvcache::CacheBlocksJson(p, 16, 40);
}

TEST(PrefixIndexTest, WindowBlocksLimitTheMatchLikeTheEngine) {
  const auto h = kvcache::ChainBlockHashes("", Prompt(3, 160, 5), 16);
  ASSERT_EQ(h.size(), 10u);
  PrefixIndex idx;
  bool more = false;
  const auto now = Clock::now();
  // All ten full blocks; window blocks 6 and 7 gone. L = 10 needs 7-9, 9 needs
  // 6-8, 8 needs 5-7, 7 needs 4-6: the longest hit is 6 (needs 3-5).
  const nlohmann::json page = WindowPage(h, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {0, 1, 2, 3, 4, 5, 8, 9});
  EXPECT_EQ(page["window"], 40);
  ASSERT_TRUE(idx.Apply(page, now, &more));
  EXPECT_EQ(idx.Longest(h, now, 10s, 10s).blocks, 6);
  EXPECT_EQ(idx.Longest(std::span(h.data(), 5), now, 10s, 10s).blocks, 5) << "a shorter prompt needs 2-4 only";
  // Events of both groups (the encoder splits them into two lists).
  kvcache::CacheEventsPage ev;
  ev.epoch = 0xabc;
  ev.seq = 4;
  ev.events = {{true, h[6], kvcache::CacheGroup::kWindow},
               {true, h[7], kvcache::CacheGroup::kWindow},
               {false, h[9], kvcache::CacheGroup::kWindow}};
  const nlohmann::json events_page = kvcache::CacheBlocksJson(ev, 16, 40);
  EXPECT_EQ(events_page["events"].size(), 0u);
  EXPECT_EQ(events_page["window_events"].size(), 3u);
  ASSERT_TRUE(idx.Apply(events_page, now, &more));
  EXPECT_EQ(idx.Longest(h, now, 10s, 10s).blocks, 9) << "10 needs window block 9";
  ev.seq = 5;
  ev.events = {{false, h[3], kvcache::CacheGroup::kFull}};
  ASSERT_TRUE(idx.Apply(kvcache::CacheBlocksJson(ev, 16, 40), now, &more));
  EXPECT_EQ(idx.Longest(h, now, 10s, 10s).blocks, 3) << "full blocks are contiguous from 0; 3 needs 0-2";

  // Malformed window parts change nothing.
  nlohmann::json bad = WindowPage(h, {0, 1}, {0, 1}, 9);
  bad.erase("window_blocks");
  EXPECT_FALSE(idx.Apply(bad, now, &more)) << "a reset with a window must carry its window set";
  bad = events_page;
  bad["window_events"] = {"+" + kvcache::BlockHashHex(h[0]), "*zz"};
  EXPECT_FALSE(idx.Apply(bad, now, &more));
  bad = events_page;
  bad["window"] = -1;
  EXPECT_FALSE(idx.Apply(bad, now, &more));
  EXPECT_EQ(idx.Longest(h, Clock::now(), 10s, 10s).blocks, 0) << "stale after a bad page";
  ev.seq = 6;
  ev.events.clear();
  ASSERT_TRUE(idx.Apply(kvcache::CacheBlocksJson(ev, 16, 40), now, &more));
  EXPECT_EQ(idx.Longest(h, now, 10s, 10s).blocks, 3);

  // A page without a window (an older replica, a model without sliding
  // layers): the full blocks alone, exactly as before.
  nlohmann::json old = WindowPage(h, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {}, 10);
  old.erase("window");
  old.erase("window_blocks");
  old.erase("window_events");
  ASSERT_TRUE(idx.Apply(old, now, &more));
  EXPECT_EQ(idx.Longest(h, now, 10s, 10s).blocks, 10);
  kvcache::CacheEventsPage plain;
  plain.epoch = 0xabc;
  plain.reset = true;
  const nlohmann::json plain_page = kvcache::CacheBlocksJson(plain, 16, 0);
  EXPECT_FALSE(plain_page.contains("window"));
  EXPECT_FALSE(plain_page.contains("window_events"));
}

TEST(CacheAwareTest, RoutesToTheReplicaWhoseWindowBlocksMakeTheHit) {
  Env e("cache_aware");
  const auto prompt = Prompt(5, 320, 50, 1);
  const auto h = kvcache::ChainBlockHashes("", prompt, 16);
  std::vector<int> all, most;
  for (int i = 0; i < 20; ++i) all.push_back(i);
  for (int i = 0; i < 12; ++i) most.push_back(i);
  bool more = false;
  // Replica 0 holds all 20 full blocks but only the first 12 window blocks:
  // a hit there is 12 blocks (13 would need 11-12). Replica 2 holds 16
  // blocks of each group: 16.
  std::vector<int> sixteen(all.begin(), all.begin() + 16);
  ASSERT_TRUE(e.rep(0)->prefix_index().Apply(WindowPage(h, all, most), Clock::now(), &more));
  ASSERT_TRUE(e.rep(2)->prefix_index().Apply(WindowPage(h, sixteen, sixteen), Clock::now(), &more));
  RouteInput in;
  EXPECT_EQ(e.Pick(prompt, &in), e.rep(2));
  EXPECT_EQ(in.prediction.cached_tokens, 16 * 16);
  EXPECT_EQ(in.prediction.best_cached_tokens, 16 * 16);
}

// A replica with a disk tier: its page's disk set extends a hit past the
// RAM blocks (the engine restores them), a restored token costs
// kDiskRestoreCost of a computed one, so RAM wins a tie with disk and disk
// beats computing.
nlohmann::json DiskPage(const std::vector<kvcache::BlockHash>& h, int ram, int disk, uint64_t seq = 1) {
  kvcache::CacheEventsPage p;
  p.epoch = 0xd15c;
  p.seq = seq;
  p.reset = true;
  for (int i = 0; i < ram; ++i) p.blocks.push_back(h[static_cast<size_t>(i)]);
  for (int i = 0; i < disk; ++i) p.disk_blocks.push_back(h[static_cast<size_t>(i)]);
  return kvcache::CacheBlocksJson(p, 16, 0, /*disk=*/true);
}

TEST(PrefixIndexTest, DiskBlocksExtendTheHitPastTheRamBlocks) {
  const auto h = kvcache::ChainBlockHashes("", Prompt(4, 160, 5), 16);
  ASSERT_EQ(h.size(), 10u);
  PrefixIndex idx;
  bool more = false;
  const auto now = Clock::now();
  ASSERT_TRUE(idx.Apply(DiskPage(h, 3, 8), now, &more));
  PrefixIndex::Match m = idx.Longest(h, now, 10s, 10s);
  EXPECT_EQ(m.blocks, 8);
  EXPECT_EQ(m.disk_blocks, 5);
  EXPECT_EQ(m.source, PrefixIndex::Source::kReplica);
  EXPECT_EQ(idx.num_disk_blocks(), 8u);
  // Events: block 8 written to disk, block 1 evicted from RAM (the RAM hit
  // is then block 0; the disk goes on from there).
  kvcache::CacheEventsPage ev;
  ev.epoch = 0xd15c;
  ev.seq = 3;
  ev.events = {{true, h[8], kvcache::CacheGroup::kDisk}, {false, h[1], kvcache::CacheGroup::kFull}};
  const nlohmann::json page = kvcache::CacheBlocksJson(ev, 16, 0, true);
  EXPECT_EQ(page["disk_events"].size(), 1u);
  ASSERT_TRUE(idx.Apply(page, now, &more));
  m = idx.Longest(h, now, 10s, 10s);
  EXPECT_EQ(m.blocks, 9);
  EXPECT_EQ(m.disk_blocks, 8);
  // A gap on disk ends the hit, as in the engine.
  ev.seq = 4;
  ev.events = {{false, h[4], kvcache::CacheGroup::kDisk}};
  ASSERT_TRUE(idx.Apply(kvcache::CacheBlocksJson(ev, 16, 0, true), now, &more));
  EXPECT_EQ(idx.Longest(h, now, 10s, 10s).blocks, 4);
  // Malformed disk parts change nothing; a page of a replica without a disk
  // tier (no "disk" key) forgets the disk set.
  nlohmann::json bad = DiskPage(h, 1, 2, 9);
  bad.erase("disk_blocks");
  EXPECT_FALSE(idx.Apply(bad, now, &more)) << "a reset with a disk tier must carry its disk set";
  bad = page;
  bad["disk_events"] = {"+zz"};
  EXPECT_FALSE(idx.Apply(bad, now, &more));
  nlohmann::json plain = DiskPage(h, 2, 9, 10);
  plain.erase("disk");
  ASSERT_TRUE(idx.Apply(plain, now, &more));
  m = idx.Longest(h, now, 10s, 10s);
  EXPECT_EQ(m.blocks, 2);
  EXPECT_EQ(m.disk_blocks, 0);
  EXPECT_EQ(idx.num_disk_blocks(), 0u);
}

TEST(CacheAwareTest, DiskHeldPrefixBeatsComputingAndRamBeatsDisk) {
  Env e("cache_aware");
  const auto prompt = Prompt(6, 320, 40, 2);
  const auto h = kvcache::ChainBlockHashes("", prompt, 16);
  bool more = false;
  // Replica 1 holds the prefix's 20 blocks on disk only; the others nothing.
  ASSERT_TRUE(e.rep(1)->prefix_index().Apply(DiskPage(h, 0, 20), Clock::now(), &more));
  RouteInput in;
  EXPECT_EQ(e.Pick(prompt, &in), e.rep(1));
  EXPECT_EQ(in.prediction.cached_tokens, 320);
  EXPECT_EQ(in.prediction.disk_tokens, 320);
  // Another gateway (no routing record): replica 1 holds the prefix on
  // disk, replica 2 in RAM: RAM wins.
  Env f("cache_aware");
  ASSERT_TRUE(f.rep(1)->prefix_index().Apply(DiskPage(h, 0, 20), Clock::now(), &more));
  ASSERT_TRUE(f.rep(2)->prefix_index().Apply(DiskPage(h, 20, 0), Clock::now(), &more));
  EXPECT_EQ(f.Pick(prompt, &in), f.rep(2));
  EXPECT_EQ(in.prediction.cached_tokens, 320);
  EXPECT_EQ(in.prediction.disk_tokens, 0);
}

TEST(RoundRobinTest, TakesTurns) {
  Env e("round_robin");
  std::map<Replica*, int> n;
  for (int i = 0; i < 9; ++i) ++n[e.Pick(Prompt(1, 64, 1))];
  for (int i = 0; i < 3; ++i) EXPECT_EQ(n[e.rep(i)], 3);
  EXPECT_STREQ(MakeRoutingPolicy(ThreePools("least_load"), 1)->name(), "least_load");
}

}  // namespace
}  // namespace kvs::gateway
