#include "metrics/prom_parse.h"

#include <cmath>

#include <gtest/gtest.h>

namespace kvs::metrics {
namespace {

TEST(PromParse, ParsesSamplesLabelsTypesAndSkipsJunk) {
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

}  // namespace
}  // namespace kvs::metrics
