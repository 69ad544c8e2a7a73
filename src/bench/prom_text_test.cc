#include "bench/prom_text.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kvs::bench {
namespace {

TEST(PromText, ParsesSamplesLabelsTypesAndSkipsJunk) {
  const char* text =
      "# HELP kvserve:kv_cache_usage_ratio used / total\n"
      "# TYPE kvserve:kv_cache_usage_ratio gauge\n"
      "kvserve:kv_cache_usage_ratio 0.25\n"
      "kvserve:memory_bytes{account=\"kv_pool\"} 1.5e+08\r\n"
      "  \n"
      "x{a=\"quote \\\" and \\\\ and \\n\",b=\"2\",} 3 1700000000000\n"
      "h_bucket{le=\"+Inf\"} +Inf\n"
      "nan_metric NaN\n"
      "this is not a sample\n"
      "bad{unclosed=\"x} 1\n"
      "# EOF\n";
  PromPage p = ParsePrometheusText(text);
  ASSERT_EQ(p.samples.size(), 5u);
  EXPECT_EQ(p.types.at("kvserve:kv_cache_usage_ratio"), "gauge");
  EXPECT_EQ(p.samples[0].name, "kvserve:kv_cache_usage_ratio");
  EXPECT_DOUBLE_EQ(p.samples[0].value, 0.25);
  EXPECT_EQ(p.samples[1].labels.at("account"), "kv_pool");
  EXPECT_DOUBLE_EQ(p.samples[1].value, 1.5e8);
  EXPECT_EQ(p.samples[2].labels.at("a"), "quote \" and \\ and \n");
  EXPECT_EQ(p.samples[2].labels.at("b"), "2");
  EXPECT_DOUBLE_EQ(p.samples[2].value, 3);
  EXPECT_TRUE(std::isinf(p.samples[3].value));
  EXPECT_TRUE(std::isnan(p.samples[4].value));
  EXPECT_EQ(p.skipped_lines, 2);
}

TEST(PromText, ExtractsKvserveFigures) {
  PromPage p = ParsePrometheusText(
      "kvserve:num_requests_running 3\n"
      "kvserve:num_requests_waiting 7\n"
      "kvserve:kv_cache_usage_ratio 0.625\n"
      "kvserve:num_preemptions_total 2\n");
  ServerGauges g = ExtractGauges(p);
  EXPECT_EQ(g.source, "kvserve");
  EXPECT_DOUBLE_EQ(*g.kv_usage, 0.625);
  EXPECT_DOUBLE_EQ(*g.queue, 7);
  EXPECT_DOUBLE_EQ(*g.running, 3);
  EXPECT_DOUBLE_EQ(*g.preemptions, 2);
}

TEST(PromText, ExtractsVllmAcrossLabelSetsAndLlamaCppWithoutKv) {
  // Two engines behind one page: counts add up, the KV fraction is the worst.
  PromPage v = ParsePrometheusText(
      "vllm:num_requests_waiting{model_name=\"m\",engine=\"0\"} 2\n"
      "vllm:num_requests_waiting{model_name=\"m\",engine=\"1\"} 3\n"
      "vllm:kv_cache_usage_perc{model_name=\"m\",engine=\"0\"} 0.4\n"
      "vllm:kv_cache_usage_perc{model_name=\"m\",engine=\"1\"} 0.7\n"
      "vllm:num_preemptions_total{model_name=\"m\"} 5\n");
  ServerGauges g = ExtractGauges(v);
  EXPECT_EQ(g.source, "vllm");
  EXPECT_DOUBLE_EQ(*g.queue, 5);
  EXPECT_DOUBLE_EQ(*g.kv_usage, 0.7);
  EXPECT_DOUBLE_EQ(*g.preemptions, 5);
  EXPECT_FALSE(g.running);

  PromPage l = ParsePrometheusText(
      "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n"
      "llamacpp:requests_deferred 4\n");
  ServerGauges h = ExtractGauges(l);
  EXPECT_EQ(h.source, "llamacpp");
  EXPECT_FALSE(h.kv_usage);
  EXPECT_DOUBLE_EQ(*h.queue, 4);
  EXPECT_DOUBLE_EQ(*h.running, 1);
}

TEST(PromText, PercentFamiliesAreScaledToFractions) {
  MetricNames n;
  n.kv_usage = {"custom:kv_percent"};
  n.kv_usage_percent = {"custom:kv_percent"};
  ServerGauges g = ExtractGauges(ParsePrometheusText("custom:kv_percent 85\n"), n);
  EXPECT_DOUBLE_EQ(*g.kv_usage, 0.85);
}

}  // namespace
}  // namespace kvs::bench
