#include "bench/stats.h"

#include <gtest/gtest.h>

namespace kvs::bench {
namespace {

TEST(Percentile, LinearInterpolationLikeNumpy) {
  // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = 1, 1.75, 2.5, 3.7, 4
  std::vector<double> v = {1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile(v, 25), 1.75);
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_NEAR(Percentile(v, 90), 3.7, 1e-12);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(one, 99), 7);
}

TEST(Summarize, OrderIndependentFigures) {
  Summary s = Summarize({5, 1, 4, 2, 3});
  EXPECT_EQ(s.count, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.p50, 3);
  EXPECT_NEAR(s.p90, 4.6, 1e-12);
  EXPECT_NEAR(s.p99, 4.96, 1e-12);
  EXPECT_EQ(Summarize({}).count, 0);
}

TEST(Cdf, EndsAtOneAndMergesTies) {
  auto c = Cdf({3, 1, 2, 2});
  ASSERT_EQ(c.size(), 3u);
  EXPECT_DOUBLE_EQ(c[0].first, 1);
  EXPECT_DOUBLE_EQ(c[0].second, 0.25);
  EXPECT_DOUBLE_EQ(c[1].first, 2);
  EXPECT_DOUBLE_EQ(c[1].second, 0.75);
  EXPECT_DOUBLE_EQ(c[2].second, 1.0);
  std::vector<double> many;
  for (int i = 0; i < 10000; ++i) many.push_back(i);
  auto d = Cdf(many, 50);
  EXPECT_LE(d.size(), 50u);
  EXPECT_DOUBLE_EQ(d.front().first, 0);
  EXPECT_DOUBLE_EQ(d.back().first, 9999);
  EXPECT_DOUBLE_EQ(d.back().second, 1);
  for (size_t i = 1; i < d.size(); ++i) EXPECT_GT(d[i].first, d[i - 1].first);
}

TEST(Slo, ParsesUnitsAndPromptBounds) {
  auto a = ParseSlo("ttft:2s@4096");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->metric, SloMetric::kTtft);
  EXPECT_DOUBLE_EQ(a->limit_seconds, 2);
  EXPECT_EQ(*a->max_prompt_tokens, 4096);
  auto b = ParseSlo("tpot:50");  // plain numbers are ms (vLLM's --goodput)
  ASSERT_TRUE(b.ok());
  EXPECT_DOUBLE_EQ(b->limit_seconds, 0.05);
  EXPECT_FALSE(b->max_prompt_tokens);
  auto c = ParseSlo("e2e<=1.5s@<=4k");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->metric, SloMetric::kE2e);
  EXPECT_EQ(*c->max_prompt_tokens, 4096);
  auto d = ParseSlo("itl:250us");
  ASSERT_TRUE(d.ok());
  EXPECT_DOUBLE_EQ(d->limit_seconds, 250e-6);
  EXPECT_EQ(a->ToString(), "ttft<=2s@4096");
  for (const char* bad : {"ttft", "foo:1s", "ttft:-1s", "ttft:abc", "ttft:1s@", "ttft:1s@x", "ttft:0"}) {
    auto r = ParseSlo(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find(bad), std::string::npos);
    }
  }
}

TEST(Slo, GoodRequestsMeetEveryApplicableSlo) {
  std::vector<Slo> slos = {*ParseSlo("ttft:1s@1024"), *ParseSlo("ttft:4s"), *ParseSlo("tpot:100ms")};
  SloInput r;
  r.ok = true;
  r.prompt_tokens = 512;
  r.ttft = 0.5;
  r.tpot = 0.05;
  EXPECT_TRUE(MeetsSlos(r, slos));
  r.ttft = 1.5;  // over the short-prompt bound
  EXPECT_FALSE(MeetsSlos(r, slos));
  r.prompt_tokens = 2048;  // that bound no longer applies; 4 s does
  EXPECT_TRUE(MeetsSlos(r, slos));
  r.tpot = 0.2;
  EXPECT_FALSE(MeetsSlos(r, slos));
  r.tpot.reset();  // not measured: no violation
  EXPECT_TRUE(MeetsSlos(r, slos));
  r.ok = false;
  EXPECT_FALSE(MeetsSlos(r, slos));
}

TEST(FormatSeconds, ThreeSignificantDigits) {
  EXPECT_EQ(FormatSeconds(1.234), "1.23 s");
  EXPECT_EQ(FormatSeconds(0.0456), "45.6 ms");
  EXPECT_EQ(FormatSeconds(0.000789), "789 us");
  EXPECT_EQ(FormatSeconds(250), "250 s");
}

TEST(Stats, WilsonIntervalKnownValues) {
  // Values from the closed form (checked by hand with Python's math).
  const ProportionInterval a = WilsonInterval(9, 10);
  EXPECT_NEAR(a.lo, 0.59584, 1e-5);
  EXPECT_NEAR(a.hi, 0.98212, 1e-5);
  const ProportionInterval b = WilsonInterval(0, 1);
  EXPECT_DOUBLE_EQ(b.lo, 0);
  EXPECT_NEAR(b.hi, 0.79346, 1e-5);
  const ProportionInterval c = WilsonInterval(20, 20);
  EXPECT_NEAR(c.lo, 0.83887, 1e-5);
  EXPECT_DOUBLE_EQ(c.hi, 1);
  const ProportionInterval none = WilsonInterval(0, 0);
  EXPECT_EQ(none.lo, 0);
  EXPECT_EQ(none.hi, 1);
}

}  // namespace
}  // namespace kvs::bench
