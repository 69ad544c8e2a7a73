#include "bench/svg.h"

#include <cmath>

#include <gtest/gtest.h>

#include "bench/bench_test_util.h"

namespace kvs::bench::svg {
namespace {

using kvs::bench::testing::XmlProblem;

int Count(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

TEST(XmlCheck, CatchesMalformedMarkup) {
  EXPECT_EQ(XmlProblem("<a><b x=\"1\"/>t &amp; &#38;</a>"), "");
  EXPECT_NE(XmlProblem("<a><b></a>"), "");
  EXPECT_NE(XmlProblem("<a x=1/>"), "");
  EXPECT_NE(XmlProblem("<a>1 < 2</a>"), "");
  EXPECT_NE(XmlProblem("<a>R&D</a>"), "");
  EXPECT_NE(XmlProblem("<a/><b/>"), "");
}

TEST(Svg, EscapesTextAndDropsControlCharacters) {
  EXPECT_EQ(Escape("a<b & \"c\" 'd'>\x01\te"), "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;\te");
}

TEST(Svg, NiceTicks) {
  auto t = NiceTicks(0, 97, false);
  ASSERT_FALSE(t.empty());
  EXPECT_DOUBLE_EQ(t.front(), 0);
  EXPECT_DOUBLE_EQ(t[1] - t[0], 20);
  EXPECT_LE(t.back(), 97);
  auto l = NiceTicks(0.002, 30, true);
  EXPECT_DOUBLE_EQ(l.front(), 0.01);
  EXPECT_DOUBLE_EQ(l.back(), 10);
  EXPECT_EQ(l.size(), 4u);  // 0.01, 0.1, 1, 10
  auto f = NiceTicks(1, 40, true);  // under three decades: 1-2-5 steps
  EXPECT_EQ(f, (std::vector<double>{1, 2, 5, 10, 20}));
}

TEST(Svg, LineChartIsWellFormedAndDrawsEverySeries) {
  LineChart c;
  c.title = "TTFT vs input length <p50 & p90>";
  c.x = {"prompt tokens", true, {}, {}, {}, {}};
  c.y = {"seconds", true, {}, {}, {}, {}};
  c.series.push_back({"p50", {{512, 0.01}, {1024, 0.02}, {2048, 0.05}}, "", true, true, false, false});
  c.series.push_back({"p90", {{512, 0.02}, {1024, NAN}, {2048, 0.09}}, "", true, true, false, true});
  c.series.push_back({"cdf", {{0.01, 0.5}, {0.02, 1.0}}, "#123456", true, false, true, false});
  c.y_rules.push_back({0.08, "SLO 80 ms"});
  const std::string s = RenderLineChart(c);
  EXPECT_EQ(XmlProblem(s), "") << s;
  EXPECT_NE(s.find("&lt;p50 &amp; p90&gt;"), std::string::npos);
  EXPECT_EQ(Count(s, "<path "), 3);
  EXPECT_EQ(Count(s, "<circle "), 5);  // the NaN point is dropped; "cdf" has no markers
  EXPECT_NE(s.find(" H"), std::string::npos);  // the step series
  EXPECT_NE(s.find("SLO 80 ms"), std::string::npos);
  EXPECT_EQ(s.find("nan"), std::string::npos);
  EXPECT_EQ(s.find("inf"), std::string::npos);
}

TEST(Svg, XRulesMarkPositionsInsideTheAxis) {
  LineChart c;
  c.title = "KV over time";
  c.x = {"seconds", false, {}, {}, {}, {}};
  c.y = {"use", false, 0.0, 1.0, {}, {}};
  c.series.push_back({"kv", {{0, 0.1}, {5, 0.4}}, "", true, false, false, false});
  c.x_rules = {{0, "run 1"}, {8, "run <2>"}};  // beyond the data: the axis grows to it
  const std::string s = RenderLineChart(c);
  EXPECT_EQ(XmlProblem(s), "") << s;
  EXPECT_NE(s.find(">run 1<"), std::string::npos);
  EXPECT_NE(s.find(">run &lt;2&gt;<"), std::string::npos);
  EXPECT_EQ(Count(s, "stroke-dasharray=\"2 3\""), 2);
}

TEST(Svg, EmptyChartSaysNoData) {
  LineChart c;
  c.title = "empty";
  c.series.push_back({"x", {}, "", true, true, false, false});
  const std::string s = RenderLineChart(c);
  EXPECT_EQ(XmlProblem(s), "");
  EXPECT_NE(s.find("no data"), std::string::npos);
}

TEST(Svg, HeatmapColoursAndCells) {
  EXPECT_EQ(HeatColor(0), "#d73027");
  EXPECT_EQ(HeatColor(1), "#1a9850");
  Heatmap m;
  m.title = "recall";
  m.rows = {"1024", "2048"};
  m.cols = {"0%", "50%", "100%"};
  m.values = {{1.0, 0.5, std::nullopt}, {0.0, 1.0, 0.9}};
  m.caption = "exact match";
  const std::string s = RenderHeatmap(m);
  EXPECT_EQ(XmlProblem(s), "") << s;
  EXPECT_EQ(Count(s, "<rect "), 1 + 6);  // background + cells
  EXPECT_NE(s.find(">100%<"), std::string::npos);
  EXPECT_NE(s.find(">50%<"), std::string::npos);
  EXPECT_NE(s.find(">-<"), std::string::npos);
  EXPECT_NE(s.find("#d0d0d0"), std::string::npos);  // the unmeasured cell
}

}  // namespace
}  // namespace kvs::bench::svg
