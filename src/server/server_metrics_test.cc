#include "server/server_metrics.h"

#include <gtest/gtest.h>

namespace kvs::server {
namespace {

TEST(ServerMetricsTest, ErrorClasses) {
  EXPECT_EQ(ServerMetrics::ErrorClass(200, "stop"), "");
  EXPECT_EQ(ServerMetrics::ErrorClass(200, "length"), "");
  EXPECT_EQ(ServerMetrics::ErrorClass(200, "error"), "server_error");  // in-band error of a stream
  EXPECT_EQ(ServerMetrics::ErrorClass(200, "timeout"), "timeout");
  EXPECT_EQ(ServerMetrics::ErrorClass(200, "cancelled"), "client_disconnected");
  EXPECT_EQ(ServerMetrics::ErrorClass(400, ""), "invalid_request");
  EXPECT_EQ(ServerMetrics::ErrorClass(404, ""), "invalid_request");
  EXPECT_EQ(ServerMetrics::ErrorClass(413, ""), "invalid_request");
  EXPECT_EQ(ServerMetrics::ErrorClass(401, ""), "authentication");
  EXPECT_EQ(ServerMetrics::ErrorClass(429, ""), "capacity");
  EXPECT_EQ(ServerMetrics::ErrorClass(499, "cancelled"), "client_disconnected");
  EXPECT_EQ(ServerMetrics::ErrorClass(500, "error"), "server_error");
  EXPECT_EQ(ServerMetrics::ErrorClass(503, ""), "unavailable");
  EXPECT_EQ(ServerMetrics::ErrorClass(503, "shutdown"), "shutdown");
  EXPECT_EQ(ServerMetrics::ErrorClass(504, "timeout"), "timeout");
}

TEST(ServerMetricsTest, PromptLengthClassesAreUpperBounds) {
  EXPECT_EQ(ServerMetrics::PromptLengthBucket(1), "256");
  EXPECT_EQ(ServerMetrics::PromptLengthBucket(256), "256");
  EXPECT_EQ(ServerMetrics::PromptLengthBucket(257), "1024");
  EXPECT_EQ(ServerMetrics::PromptLengthBucket(65536), "65536");
  EXPECT_EQ(ServerMetrics::PromptLengthBucket(65537), "+Inf");
}

TEST(ServerMetricsTest, PerRequestObservationsAndPeak) {
  ServerMetrics m;
  m.ObserveFirstToken(300, 0.5);
  m.ObserveDecode(11, 1.0);  // 10 gaps of 0.1 s
  m.ObserveDecode(1, 0.0);   // one token: no time per output token
  EXPECT_EQ(m.ttft_by_length.With({"1024"}).Read().count, 1u);
  EXPECT_EQ(m.ttft_by_length.With({"256"}).Read().count, 0u);
  EXPECT_EQ(m.ttft.Read().count, 1u);
  const auto tpot = m.time_per_output_token.Read();
  EXPECT_EQ(tpot.count, 1u);
  EXPECT_DOUBLE_EQ(tpot.sum, 0.1);
  EXPECT_EQ(m.generation_length.Read().count, 2u);

  BackendStats s;
  s.engine.num_blocks_total = 100;
  s.engine.num_blocks_used = 10;
  s.engine.num_blocks_used_peak = 90;
  s.engine.prefix_query_tokens = 400;
  s.engine.prefix_hit_tokens = 100;
  s.engine.forward_seconds = 2.5;
  m.Refresh(&s);
  EXPECT_DOUBLE_EQ(m.kv_usage_peak_ratio.Value(), 0.9);
  EXPECT_DOUBLE_EQ(m.prefix_hit_ratio.Value(), 0.25);
  EXPECT_DOUBLE_EQ(m.forward_seconds.Value(), 2.5);
  // A new engine (reload) starts its peak at 0: the process's peak stays.
  s.engine.num_blocks_used_peak = 5;
  s.engine.num_blocks_used = 5;
  m.Refresh(&s);
  EXPECT_DOUBLE_EQ(m.kv_usage_peak_ratio.Value(), 0.9);
  m.CountError(429, "");
  m.CountError(200, "stop");
  EXPECT_EQ(m.errors.With({"capacity"}).Value(), 1);
  EXPECT_NE(m.Render().find("kvserve:request_errors_total{class=\"capacity\"} 1\n"), std::string::npos);
}

}  // namespace
}  // namespace kvs::server
