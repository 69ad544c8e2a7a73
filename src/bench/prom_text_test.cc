#include "bench/prom_text.h"

#include <gtest/gtest.h>

namespace kvs::bench {
namespace {

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
