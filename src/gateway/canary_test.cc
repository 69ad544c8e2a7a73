// Canary: sticky buckets (a raised weight only adds keys), the split's
// share, automatic rollback over the window (margin, minimum attempts,
// errors ageing out), and routing restricted to a version.
#include "gateway/canary.h"

#include <gtest/gtest.h>

#include <string>

#include "gateway/pool.h"
#include "gateway/router.h"

namespace kvs::gateway {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

PoolConfig CanaryPool(double weight, double margin = 0.1) {
  PoolConfig p;
  p.name = "main";
  p.max_context = 4096;
  p.canary_version = "v2";
  p.canary_weight = weight;
  p.canary_max_error_rate_margin = margin;
  p.canary_window_seconds = 10;
  p.canary_min_requests = 10;
  p.replicas = {{"http://127.0.0.1:1", 1, "v1", 0}, {"http://127.0.0.1:2", 1, "v2", 0}};
  return p;
}

TEST(CanaryTest, StickyBucketsAndShare) {
  Canary c(CanaryPool(5));
  int in5 = 0;
  std::vector<std::string> at5;
  for (int i = 0; i < 2000; ++i) {
    const std::string k = "t:tenant-" + std::to_string(i);
    EXPECT_EQ(c.ForCanary(k), c.ForCanary(k));  // the same key, the same answer
    if (c.ForCanary(k)) {
      ++in5;
      at5.push_back(k);
    }
  }
  EXPECT_NEAR(in5, 100, 40);  // ~5 %
  c.set_weight(20);
  for (const auto& k : at5) EXPECT_TRUE(c.ForCanary(k)) << k;  // raising the weight keeps who was on the canary
  c.set_weight(0);
  for (const auto& k : at5) EXPECT_FALSE(c.ForCanary(k));
  EXPECT_FALSE(Canary(PoolConfig{}).ForCanary("t:x"));  // no canary_version: never
}

TEST(CanaryTest, AutomaticRollbackOverTheWindow) {
  Canary c(CanaryPool(50, 0.1));
  const auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(c.Record(false, i % 10 != 0, t0));  // stable: 10 % errors
  // Canary at 20 % errors: over 10 % + 0.1 margin? No (0.2 <= 0.2).
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(c.Record(true, i % 5 != 0, t0));
  EXPECT_EQ(c.weight(), 50);
  // Old outcomes age out of the window; the canary's fresh failures count.
  const auto t1 = t0 + 11s;
  for (int i = 0; i < 9; ++i) EXPECT_FALSE(c.Record(true, false, t1)) << i;  // fewer than min_requests
  EXPECT_EQ(c.Window(t1).canary_attempts, 9);
  EXPECT_TRUE(c.Record(true, false, t1));  // 10 of 10 failed vs no stable errors
  EXPECT_EQ(c.weight(), 0);
  EXPECT_FALSE(c.Record(true, false, t1));  // once
  // Margin 0: judged never.
  Canary off(CanaryPool(50, 0));
  for (int i = 0; i < 50; ++i) EXPECT_FALSE(off.Record(true, false, t0));
  EXPECT_EQ(off.weight(), 50);
}

TEST(CanaryTest, RoutingHonoursTheVersionAndFallsBack) {
  Router r({CanaryPool(50)});
  for (Replica* rep : r.AllReplicas()) rep->OnProbe(true, false, 2);
  Pool& p = *r.pools()[0];
  RouteInput in;
  in.canary_version = "v2";
  in.version_filter = 1;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.policy(p).Pick(p, in, {})->version(), "v2");
  in.version_filter = -1;
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.policy(p).Pick(p, in, {})->version(), "v1");
  // The stable replica tried already: nothing of that version is left.
  EXPECT_EQ(r.policy(p).Pick(p, in, {p.replicas[0]}), nullptr);
  in.version_filter = 0;
  EXPECT_EQ(r.policy(p).Pick(p, in, {p.replicas[0]}), p.replicas[1]);
}

}  // namespace
}  // namespace kvs::gateway
