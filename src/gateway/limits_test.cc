// LocalRateLimiter at explicit times: the token window (reservation, then
// correction), the request bucket, concurrency, the global bucket.
#include "gateway/limits.h"

#include <gtest/gtest.h>

namespace kvs::gateway {
namespace {

AdmitRequest Req(int64_t tokens, TenantLimits l, std::string tenant = "acme") {
  static int n = 0;
  AdmitRequest r;
  r.tenant = std::move(tenant);
  r.limits = l;
  r.tokens = tokens;
  r.lease_id = "lease-" + std::to_string(++n);
  return r;
}

TEST(LocalRateLimiterTest, TokensPerMinuteNeverOverrunsAndIsCorrectedByUsage) {
  LocalRateLimiter lim;
  TenantLimits l;
  l.tokens_per_minute = 2000;
  std::vector<Lease> leases;
  int admitted = 0;
  double t = 1000.0;
  for (int i = 0; i < 20; ++i, t += 0.1) {
    AdmitResult r = lim.AdmitAt(Req(300, l), t);
    if (r.admitted) {
      ++admitted;
      leases.push_back(r.lease);
    } else {
      EXPECT_EQ(r.reason, LimitReason::kTokens);
      EXPECT_GT(r.retry_after_seconds, 55);  // the first charges leave the window ~61 s after them
      EXPECT_LE(r.retry_after_seconds, 61);
    }
  }
  EXPECT_EQ(admitted, 6);  // 6 x 300 = 1800; a 7th would make 2100
  EXPECT_EQ(lim.TokensInWindow("acme", t), 1800);
  // Real usage was 100 each: the budget comes back at once.
  for (const Lease& le : leases) lim.Release(le, 100);
  EXPECT_EQ(lim.TokensInWindow("acme", t), 600);
  EXPECT_TRUE(lim.AdmitAt(Req(1400, l), t).admitted);
  EXPECT_FALSE(lim.AdmitAt(Req(1, l), t).admitted);
  // 61 s later the window is empty.
  EXPECT_TRUE(lim.AdmitAt(Req(2000, l), t + 61.5).admitted);
  // Other tenants have their own budget.
  EXPECT_TRUE(lim.AdmitAt(Req(2000, l, "other"), t).admitted);
}

TEST(LocalRateLimiterTest, ARequestLargerThanTheBudgetIsTooLarge) {
  LocalRateLimiter lim;
  TenantLimits l;
  l.tokens_per_minute = 100;
  AdmitResult r = lim.AdmitAt(Req(101, l), 0);
  EXPECT_FALSE(r.admitted);
  EXPECT_EQ(r.reason, LimitReason::kTooLarge);
}

TEST(LocalRateLimiterTest, RequestsPerSecondBucket) {
  LocalRateLimiter lim;
  TenantLimits l;
  l.requests_per_second = 2;  // burst defaults to 2
  EXPECT_TRUE(lim.AdmitAt(Req(1, l), 10.0).admitted);
  EXPECT_TRUE(lim.AdmitAt(Req(1, l), 10.0).admitted);
  AdmitResult r = lim.AdmitAt(Req(1, l), 10.0);
  EXPECT_FALSE(r.admitted);
  EXPECT_EQ(r.reason, LimitReason::kRequests);
  EXPECT_NEAR(r.retry_after_seconds, 0.5, 1e-9);
  EXPECT_FALSE(lim.AdmitAt(Req(1, l), 10.4).admitted);
  EXPECT_TRUE(lim.AdmitAt(Req(1, l), 10.5).admitted);
}

TEST(LocalRateLimiterTest, ConcurrencyAndRefusalsChargeNothing) {
  LocalRateLimiter lim;
  TenantLimits l;
  l.max_concurrent = 1;
  l.tokens_per_minute = 1000;
  AdmitResult a = lim.AdmitAt(Req(100, l), 5);
  ASSERT_TRUE(a.admitted);
  AdmitResult b = lim.AdmitAt(Req(100, l), 5);
  EXPECT_FALSE(b.admitted);
  EXPECT_EQ(b.reason, LimitReason::kConcurrency);
  EXPECT_EQ(lim.TokensInWindow("acme", 5), 100);  // the refused one charged nothing
  lim.Release(a.lease, 100);
  EXPECT_TRUE(lim.AdmitAt(Req(100, l), 5).admitted);
}

TEST(LocalRateLimiterTest, GlobalBucketCoversAllTenants) {
  LocalRateLimiter lim;
  AdmitRequest r1 = Req(1, {}, "a"), r2 = Req(1, {}, "b");
  r1.global_rps = r2.global_rps = 1;
  EXPECT_TRUE(lim.AdmitAt(r1, 1.0).admitted);
  AdmitResult r = lim.AdmitAt(r2, 1.0);
  EXPECT_FALSE(r.admitted);
  EXPECT_EQ(r.reason, LimitReason::kGlobalRequests);
  EXPECT_TRUE(lim.AdmitAt(r2, 2.0).admitted);
}

}  // namespace
}  // namespace kvs::gateway
