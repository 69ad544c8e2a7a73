#include "metrics/status_frame.h"

#include <cmath>
#include <thread>

#include <gtest/gtest.h>

namespace kvs::metrics {
namespace {

TEST(StatusFrame, DocumentHasTheHeaderFactsAndSeries) {
  Registry registry;
  ProcessMetrics process(registry, "demo");
  StatusFrame frame("demo", &process, {{"Rate", "rate"}, {"Gauge", "int"}}, /*capacity=*/3);
  const nlohmann::json empty = frame.Document("ready", {{"Model", "m"}});
  EXPECT_EQ(empty["title"], "demo");
  EXPECT_EQ(empty["state"], "ready");
  EXPECT_EQ(empty["version"], BuildVersion());
  EXPECT_EQ(empty["revision"], BuildRevision());
  EXPECT_TRUE(empty["uptime_seconds"].is_number());
  ASSERT_EQ(empty["facts"].size(), 2u);
  EXPECT_EQ(empty["facts"][0], nlohmann::json::array({"Model", "m"}));
  EXPECT_EQ(empty["facts"][1][0], "Version");
  ASSERT_EQ(empty["series"].size(), 2u);
  EXPECT_EQ(empty["series"][1]["label"], "Gauge");
  EXPECT_EQ(empty["series"][1]["format"], "int");
  EXPECT_TRUE(empty["series"][1]["points"].empty());
}

TEST(StatusFrame, SamplesRatesQuantilesAndKeepsTheLastOnes) {
  Registry registry;
  ProcessMetrics process(registry, "demo");
  StatusFrame frame("demo", &process, {{"Rate", "rate"}, {"p50", "seconds"}, {"Gauge", "int"}}, /*capacity=*/3);
  Histogram h({0.1, 1, 10});
  double counter = 0;
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    counter += 10;
    if (i == 3) h.Observe(0.5);
    const Histogram::Snapshot snap = h.Read();
    frame.Sample([&](StatusFrame::Interval& in) {
      return std::vector<double>{in.Rate("c", counter), in.Quantile("h", 0.5, snap), double(i)};
    });
  }
  EXPECT_EQ(frame.size(), 3u);
  const nlohmann::json doc = frame.Document("ready", {});
  const nlohmann::json& rate = doc["series"][0]["points"];
  ASSERT_EQ(rate.size(), 3u);
  for (const auto& p : rate) {
    EXPECT_GT(p[1].get<double>(), 0) << "10 per interval, over a few ms";
    EXPECT_GT(p[0].get<double>(), 1e9) << "unix seconds";
  }
  const nlohmann::json& p50 = doc["series"][1]["points"];
  EXPECT_TRUE(p50[0][1].is_null()) << "no observation in the interval: a gap";
  EXPECT_GT(p50[1][1].get<double>(), 0.1);
  EXPECT_LE(p50[1][1].get<double>(), 1);
  EXPECT_TRUE(p50[2][1].is_null());
  EXPECT_EQ(doc["series"][2]["points"][0][1], 2.0);
  EXPECT_EQ(doc["series"][2]["points"][2][1], 4.0);
}

TEST(StatusFrame, SchemaObjects) {
  EXPECT_EQ(StatusFrame::Stat("Queue", 3, "int", "x:queue"),
            (nlohmann::json{{"label", "Queue"}, {"value", 3.0}, {"format", "int"}, {"metric", "x:queue"}}));
  EXPECT_EQ(StatusFrame::Breakdown("Memory", "bytes", nlohmann::json::array()),
            (nlohmann::json{{"title", "Memory"}, {"format", "bytes"}, {"parts", nlohmann::json::array()}}));
  const nlohmann::json t = StatusFrame::Table("T", {"a", "b"}, nlohmann::json::array({nlohmann::json::array({1, 2})}));
  EXPECT_EQ(t["columns"], nlohmann::json::array({"a", "b"}));
  EXPECT_EQ(t["rows"][0][1], 2);
}

// A status-class card sums the responses of that class, named after the
// series it mirrors.
TEST(StatusFrameTest, StatusClassStatSumsOneClass) {
  Registry r;
  auto& f = r.AddCounter("x_requests_total", "r", {"path", "status"});
  f.With({"/a", "200"}).Inc(5);
  f.With({"/a", "404"}).Inc(2);
  f.With({"/b", "400"}).Inc();
  f.With({"/b", "503"}).Inc(3);
  const auto four = StatusFrame::StatusClassStat("Refused (4xx)", f, "x_requests_total", '4');
  EXPECT_EQ(four["value"], 3);
  EXPECT_EQ(four["metric"], "sum(x_requests_total{status=~\"4..\"})");
  EXPECT_EQ(StatusFrame::StatusClassStat("Failed (5xx)", f, "x_requests_total", '5')["value"], 3);
  f.With({"/ready", "503"}).Inc(4);  // a loading server's probes
  const auto api = StatusFrame::StatusClassStat("API failed (5xx)", f, "x_requests_total", '5', "/b");
  EXPECT_EQ(api["value"], 3);
  EXPECT_EQ(api["metric"], "sum(x_requests_total{path=~\"/b.+\",status=~\"5..\"})");
  EXPECT_EQ(StatusFrame::StatusClassStat("Failed (5xx)", f, "x_requests_total", '5')["value"], 7);
  auto& none = r.AddCounter("y_total", "no status label", {"path"});
  none.With({"/a"}).Inc();
  EXPECT_EQ(StatusFrame::StatusClassStat("Failed (5xx)", none, "y_total", '5')["value"], 0);
}

}  // namespace
}  // namespace kvs::metrics
