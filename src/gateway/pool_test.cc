// Pools and routing: length-based pool choice, least outstanding tokens with
// weights and tie-breaks, health transitions, metrics scraping.
#include "gateway/pool.h"

#include <gtest/gtest.h>

#include "gateway/health.h"
#include "gateway/router.h"
#include "gateway/routing.h"

namespace kvs::gateway {
namespace {

std::vector<PoolConfig> TwoPools() {
  PoolConfig s{"short", 4096, 512, 2, 30, 600, 2, "", {{"http://127.0.0.1:1", 1}, {"http://127.0.0.1:2", 1}}};
  PoolConfig l{"long", 32768, 512, 2, 120, 600, 2, "", {{"http://127.0.0.1:3", 1}}};
  return {l, s};  // given out of order on purpose
}

void AllUp(Router& r) {
  for (Replica* rep : r.AllReplicas()) rep->OnProbe(true, false, 2);
}

TEST(RouterTest, SmallestPoolThatHoldsTheRequestFirst) {
  Router r(TwoPools(), std::make_unique<LeastOutstandingTokens>());
  ASSERT_EQ(r.pools().size(), 2u);
  EXPECT_EQ(r.pools()[0]->name(), "short");
  auto p = r.PoolsFor(1000);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0]->name(), "short");
  p = r.PoolsFor(5000);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0]->name(), "long");
  EXPECT_TRUE(r.PoolsFor(40000).empty());
  EXPECT_EQ(r.largest_context(), 32768);
}

TEST(RouterTest, LeastOutstandingTokensWithWeightsAndTieBreaks) {
  Router r(TwoPools(), std::make_unique<LeastOutstandingTokens>());
  AllUp(r);
  Pool& s = *r.pools()[0];
  Replica* a = s.replicas[0];
  Replica* b = s.replicas[1];
  a->AddOutstanding(1000, 1);
  EXPECT_EQ(r.policy().Pick(s, {}, {}), b);
  b->AddOutstanding(3000, 1);
  EXPECT_EQ(r.policy().Pick(s, {}, {}), a);
  b->set_weight(4);  // 3000 / 4 < 1000
  EXPECT_EQ(r.policy().Pick(s, {}, {}), b);
  // Tie on load: the shorter scraped queue, then the lower KV use.
  b->set_weight(1);
  b->AddOutstanding(-2000, 0);
  a->SetScraped(3, 1, 0.1);
  b->SetScraped(1, 1, 0.8);
  EXPECT_EQ(r.policy().Pick(s, {}, {}), b);
  b->SetScraped(3, 1, 0.8);
  EXPECT_EQ(r.policy().Pick(s, {}, {}), a);
  // A replica at the pool's max_kv_usage (0.9) is skipped while another is below it.
  b->SetScraped(0, 1, 0.9);
  EXPECT_EQ(r.policy().Pick(s, {}, {}), a);
  b->SetScraped(3, 1, 0.8);
  // Tried replicas are skipped; none left: nullptr.
  EXPECT_EQ(r.policy().Pick(s, {}, {a}), b);
  EXPECT_EQ(r.policy().Pick(s, {}, {a, b}), nullptr);
}

TEST(RouterTest, SlowStartRampsAJoiningReplicasWeight) {
  std::vector<PoolConfig> pools = TwoPools();
  pools[1].slow_start_seconds = 100;  // "short"
  Router r(pools, std::make_unique<LeastOutstandingTokens>());
  Pool& s = *r.pools()[0];
  Replica* a = s.replicas[0];
  Replica* b = s.replicas[1];
  a->OnProbe(true, false, 2);
  b->OnProbe(true, false, 2);
  const auto now = std::chrono::steady_clock::now();
  const auto ramp = std::chrono::seconds(100);
  EXPECT_NEAR(b->EffectiveWeight(now, ramp), 0.1, 0.01);  // just joined: 10 %
  EXPECT_NEAR(b->EffectiveWeight(now + std::chrono::seconds(50), ramp), 0.5, 0.01);
  EXPECT_DOUBLE_EQ(b->EffectiveWeight(now + std::chrono::seconds(200), ramp), 1.0);
  EXPECT_DOUBLE_EQ(b->EffectiveWeight(now, {}), 1.0);  // off
  // a has been ready for the whole ramp, b just joined: b's 200
  // outstanding at 10 % weigh as 2,000 against a's 1,000.
  a->TEST_SetReadySince(now - std::chrono::seconds(200));
  a->AddOutstanding(1000, 1);
  b->AddOutstanding(200, 1);
  EXPECT_EQ(r.policy().Pick(s, {}, {}), a);
  b->TEST_SetReadySince(now - std::chrono::seconds(200));  // ramped up: 200 < 1,000
  EXPECT_EQ(r.policy().Pick(s, {}, {}), b);
}

TEST(RouterTest, ExactTiesSpreadOverReplicas) {
  Router r(TwoPools(), std::make_unique<LeastOutstandingTokens>());
  AllUp(r);
  Pool& s = *r.pools()[0];
  std::map<Replica*, int> n;
  for (int i = 0; i < 10; ++i) ++n[r.policy().Pick(s, {}, {})];
  EXPECT_EQ(n[s.replicas[0]], 5);
  EXPECT_EQ(n[s.replicas[1]], 5);
}

TEST(ReplicaTest, HealthTransitions) {
  Replica r("p", *http::Url::Parse("http://127.0.0.1:1"), 1);
  EXPECT_FALSE(r.available());  // never probed
  EXPECT_EQ(r.OnProbe(true, false, 2), 0);
  EXPECT_TRUE(r.available());
  // Passive: 3 consecutive failures eject; a success in between resets.
  EXPECT_FALSE(r.OnFailure(3));
  EXPECT_FALSE(r.OnFailure(3));
  r.OnSuccess();
  EXPECT_FALSE(r.OnFailure(3));
  EXPECT_FALSE(r.OnFailure(3));
  EXPECT_TRUE(r.OnFailure(3));
  EXPECT_FALSE(r.available());
  // Re-admission after 2 good probes in a row.
  EXPECT_EQ(r.OnProbe(true, false, 2), 0);
  EXPECT_FALSE(r.available());
  EXPECT_EQ(r.OnProbe(true, false, 2), 1);
  EXPECT_TRUE(r.available());
  // A failed probe ejects at once.
  EXPECT_EQ(r.OnProbe(false, false, 2), -1);
  EXPECT_FALSE(r.available());
  EXPECT_EQ(r.OnProbe(true, false, 2), 0);
  EXPECT_EQ(r.OnProbe(false, false, 2), 0);  // the streak is broken
  EXPECT_EQ(r.OnProbe(true, false, 2), 0);
  EXPECT_EQ(r.OnProbe(true, false, 2), 1);
  // Draining: healthy but gets no new work.
  EXPECT_EQ(r.OnProbe(false, true, 2), 0);
  EXPECT_EQ(r.health(), Replica::Health::kHealthy);
  EXPECT_FALSE(r.available());
  EXPECT_EQ(r.OnProbe(true, false, 2), 0);
  EXPECT_TRUE(r.available());
}

TEST(HealthTest, ParsesReplicaMetrics) {
  const char* text =
      "# HELP kvserve:num_requests_waiting x\n# TYPE kvserve:num_requests_waiting gauge\n"
      "kvserve:num_requests_waiting 4\nkvserve:num_requests_running 2\nkvserve:kv_cache_usage_ratio 0.25\n"
      "kvserve:http_requests_total{path=\"/ready\",status=\"200\"} 7\n";
  ScrapedStats s = ParseReplicaMetrics(text);
  EXPECT_EQ(s.waiting, 4);
  EXPECT_EQ(s.running, 2);
  EXPECT_EQ(s.kv_usage, 0.25);
}

}  // namespace
}  // namespace kvs::gateway
