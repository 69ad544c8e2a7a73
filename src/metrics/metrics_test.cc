#include "metrics/metrics.h"

#include <cmath>
#include <limits>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace kvs::metrics {
namespace {

TEST(MetricsTest, ExpositionOfEachType) {
  Registry r;
  r.Counter0("kvserve:prompt_tokens_total", "Prompt tokens.").Inc(5);
  auto& status = r.AddCounter("kvserve:http_requests_total", "HTTP requests.", {"path", "status"});
  status.With({"/v1/completions", "200"}).Inc();
  status.With({"/v1/completions", "200"}).Inc();
  status.With({"/v1/completions", "400"}).Inc();
  r.Gauge0("kvserve:kv_cache_usage_ratio", "Usage.").Set(0.25);
  auto& h = r.Histogram0("kvserve:time_to_first_token_seconds", "TTFT.", {0.125, 1});
  h.Observe(0.0625);
  h.Observe(0.125);  // upper bounds are inclusive
  h.Observe(0.5);
  h.Observe(7);
  EXPECT_EQ(r.Render(),
            "# HELP kvserve:prompt_tokens_total Prompt tokens.\n"
            "# TYPE kvserve:prompt_tokens_total counter\n"
            "kvserve:prompt_tokens_total 5\n"
            "# HELP kvserve:http_requests_total HTTP requests.\n"
            "# TYPE kvserve:http_requests_total counter\n"
            "kvserve:http_requests_total{path=\"/v1/completions\",status=\"200\"} 2\n"
            "kvserve:http_requests_total{path=\"/v1/completions\",status=\"400\"} 1\n"
            "# HELP kvserve:kv_cache_usage_ratio Usage.\n"
            "# TYPE kvserve:kv_cache_usage_ratio gauge\n"
            "kvserve:kv_cache_usage_ratio 0.25\n"
            "# HELP kvserve:time_to_first_token_seconds TTFT.\n"
            "# TYPE kvserve:time_to_first_token_seconds histogram\n"
            "kvserve:time_to_first_token_seconds_bucket{le=\"0.125\"} 2\n"
            "kvserve:time_to_first_token_seconds_bucket{le=\"1\"} 3\n"
            "kvserve:time_to_first_token_seconds_bucket{le=\"+Inf\"} 4\n"
            "kvserve:time_to_first_token_seconds_sum 7.6875\n"
            "kvserve:time_to_first_token_seconds_count 4\n");
}

TEST(MetricsTest, LabelledHistogramPutsLeLast) {
  Registry r;
  r.AddHistogram("x_seconds", "h", {1}, {"kind"}).With({"a"}).Observe(2);
  const std::string text = r.Render();
  EXPECT_NE(text.find("x_seconds_bucket{kind=\"a\",le=\"1\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_bucket{kind=\"a\",le=\"+Inf\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("x_seconds_count{kind=\"a\"} 1\n"), std::string::npos) << text;
}

// A hidden label value drops every series carrying it, in every family that
// has the label; updates through old references stay harmless and invisible;
// showing it again brings the series back with their values.
TEST(MetricsTest, HiddenLabelValuesLeaveTheExposition) {
  Registry r;
  auto& healthy = r.AddGauge("up_ratio", "g", {"pool", "replica"});
  auto& errors = r.AddCounter("errors_total", "c", {"pool", "replica", "kind"});
  auto& plain = r.AddCounter("requests_total", "c", {"pool"});
  Gauge& gone = healthy.With({"a", "10.0.0.1"});
  gone.Set(1);
  healthy.With({"a", "10.0.0.2"}).Set(1);
  errors.With({"a", "10.0.0.1", "connect"}).Inc(3);
  plain.With({"a"}).Inc();
  r.SetHidden("replica", "10.0.0.1", true);
  gone.Set(0);  // a late update
  std::string text = r.Render();
  EXPECT_EQ(text.find("10.0.0.1"), std::string::npos) << text;
  EXPECT_NE(text.find("up_ratio{pool=\"a\",replica=\"10.0.0.2\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("requests_total{pool=\"a\"} 1\n"), std::string::npos) << text;
  r.SetHidden("replica", "10.0.0.1", false);
  text = r.Render();
  EXPECT_NE(text.find("up_ratio{pool=\"a\",replica=\"10.0.0.1\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("errors_total{pool=\"a\",replica=\"10.0.0.1\",kind=\"connect\"} 3\n"), std::string::npos)
      << text;
}

TEST(MetricsTest, EscapingAndValueFormatting) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(FormatMetricValue(3), "3");
  EXPECT_EQ(FormatMetricValue(-2), "-2");
  EXPECT_EQ(FormatMetricValue(0.1), "0.1");
  EXPECT_EQ(FormatMetricValue(1e20), "1e+20");
  EXPECT_EQ(FormatMetricValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatMetricValue(std::nan("")), "NaN");
  Registry r;
  r.AddGauge("g", "line one\nback\\slash", {"l"}).With({"q\"uote"}).Set(1);
  EXPECT_EQ(r.Render(), "# HELP g line one\\nback\\\\slash\n# TYPE g gauge\ng{l=\"q\\\"uote\"} 1\n");
}

TEST(MetricsTest, NamesAreValidated) {
  EXPECT_TRUE(IsValidMetricName("kvserve:num_requests_running"));
  EXPECT_TRUE(IsValidMetricName("_x1"));
  EXPECT_FALSE(IsValidMetricName("1x"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName(""));
}

TEST(MetricsTest, CounterSetMaxIsMonotonic) {
  Counter c;
  c.SetMax(10);
  c.SetMax(4);
  EXPECT_EQ(c.Value(), 10);
  c.Inc(-3);  // ignored
  EXPECT_EQ(c.Value(), 10);
}

TEST(MetricsTest, GaugeSetMaxKeepsThePeakAcrossThreads) {
  Gauge g;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&g, t] {
      for (int i = 0; i < 2000; ++i) g.SetMax((i * 7 + t * 13) % 1000);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(g.Value(), 999);
  g.SetMax(5);
  EXPECT_EQ(g.Value(), 999);
}

TEST(MetricsTest, ConcurrentUpdatesAreAllCounted) {
  Registry r;
  auto& fam = r.AddCounter("c_total", "c", {"t"});
  auto& g = r.Gauge0("g", "g");
  auto& h = r.Histogram0("h", "h", ExponentialBuckets(0.001, 2, 10));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        fam.With({std::to_string(t % 2)}).Inc();
        g.Inc();
        g.Dec(0.5);
        h.Observe(0.001 * (i % 7));
        if (i % 1000 == 0) (void)r.Render();  // rendering while others write
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(fam.With({"0"}).Value() + fam.With({"1"}).Value(), 80000);
  EXPECT_DOUBLE_EQ(g.Value(), 40000);
  const auto s = h.Read();
  EXPECT_EQ(s.count, 80000u);
  EXPECT_EQ(s.cumulative.back(), 80000u);
}

// Every exposition line is a comment, or `name{labels} value` with a valid
// name, well-formed labels and a parseable value.
TEST(MetricsTest, ExpositionLinesAreWellFormed) {
  Registry r;
  r.AddCounter("kvserve:a_total", "a", {"x", "y"}).With({"1", "two words"}).Inc(2.5);
  r.AddHistogram("kvserve:b_seconds", "b", ExponentialBuckets(0.01, 4, 6), {"z"}).With({"\\"}).Observe(0.3);
  r.Gauge0("kvserve:c", "c").Set(-1e-9);
  const std::regex sample(R"(^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\+Inf|-Inf|NaN|[-+0-9.eE]+)$)");
  std::stringstream ss(r.Render());
  int samples = 0;
  for (std::string line; std::getline(ss, line);) {
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
    EXPECT_TRUE(std::regex_match(line, sample)) << line;
    ++samples;
  }
  EXPECT_EQ(samples, 1 + (6 + 1 + 2) + 1);
}

TEST(MetricsTest, HistogramQuantileInterpolatesAsPrometheus) {
  Histogram h({1, 2, 4});
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, h.Read(), nullptr)));
  for (int i = 0; i < 10; ++i) h.Observe(0.5);  // bucket (0, 1]
  const Histogram::Snapshot first = h.Read();
  for (int i = 0; i < 10; ++i) h.Observe(3);    // bucket (2, 4]
  const Histogram::Snapshot second = h.Read();
  // Since start: 20 observations; the median's rank 10 ends bucket (0, 1].
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, second, nullptr), 1.0);
  // 0.75 -> rank 15, halfway through (2, 4].
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.75, second, nullptr), 3.0);
  // Between the snapshots only the 3s count: the median is mid-bucket.
  EXPECT_DOUBLE_EQ(HistogramQuantile(0.5, second, &first), 3.0);
  h.Observe(100);  // +Inf answers the highest finite bound
  EXPECT_DOUBLE_EQ(HistogramQuantile(1.0, h.Read(), &second), 4.0);
  EXPECT_TRUE(std::isnan(HistogramQuantile(0.5, second, &second)));
}

}  // namespace
}  // namespace kvs::metrics
