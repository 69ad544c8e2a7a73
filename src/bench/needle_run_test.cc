// The needle grid and the start-up gate against a scripted server whose
// "model" recalls a needle only when it sits in the first part of the
// prompt, so recall, effective length and the late-position warning are
// known in advance.
#include "bench/needle_run.h"

#include <regex>

#include <gtest/gtest.h>

#include "bench/bench_test_util.h"
#include "bench/testing/fake_openai_server.h"
#include "bench/needle_report.h"

namespace kvs::bench {
namespace {

using testing::Connect;
using testing::FakeOpenAiServer;
using testing::FakeServerOptions;

// Answers with the pass key when its sentence starts within the first
// `reach` characters of the prompt, else with a wrong number.
std::function<std::string(const std::string&)> Recall(size_t reach) {
  return [reach](const std::string& prompt) -> std::string {
    static const std::regex key("The pass key is ([0-9]+)\\. Remember it\\.");
    std::smatch m;
    if (std::regex_search(prompt, m, key) && static_cast<size_t>(m.position(0)) < reach) return " " + m[1].str() + ".";
    return " 11111.";
  };
}


TEST(NeedleRun, GridScoresEffectiveLengthAndLateWarning) {
  FakeServerOptions so;
  so.ttft_seconds = 0.001;
  // ~6 characters per word-token: lengths up to 400 tokens are within reach
  // everywhere; at 1600 only the first half is.
  so.answer = Recall(1600 * 6 / 2);
  FakeOpenAiServer server(so);
  auto ep = Connect(server);
  auto counter = ep->Counter();
  NeedleSpec spec;
  spec.lengths = {200, 400, 1600};
  spec.depths = {0, 0.25, 0.75, 1};
  spec.trials = 2;
  auto filler = MakeFillerSource();
  NeedleRunOptions ro;
  ro.progress = false;
  ro.parallel = 3;
  std::vector<NeedleResult> rs = RunNeedleGrid(*ep, *counter, spec, *filler, ro);
  ASSERT_EQ(rs.size(), 24u);
  for (const NeedleResult& r : rs) {
    EXPECT_TRUE(r.error.empty()) << r.error;
    EXPECT_EQ(r.expected.size(), 1u);
  }
  NeedleSummary s = SummarizeNeedle(rs, spec.lengths, spec.depths, 0.9);
  ASSERT_TRUE(s.effective_length);
  EXPECT_EQ(*s.effective_length, 400);
  EXPECT_DOUBLE_EQ(s.cells[2][0].recall(), 1.0);  // 1600 tokens, depth 0
  EXPECT_DOUBLE_EQ(s.cells[2][3].recall(), 0.0);  // 1600 tokens, depth 100 %
  ASSERT_EQ(s.late_position_warnings.size(), 1u);
  EXPECT_NE(s.late_position_warnings[0].find("at 1600 tokens"), std::string::npos);
  // Every request was temperature 0, completions, with the answer prefix.
  for (const auto& b : server.bodies()) {
    EXPECT_EQ(b["temperature"], 0);
    EXPECT_TRUE(b["prompt"].get<std::string>().ends_with("What is the pass key? The pass key is")) << b["prompt"].get<std::string>().substr(b["prompt"].get<std::string>().size() - 60);
  }
  // Reports.
  nlohmann::json meta = {{"url", server.url()}, {"model", "fake"}, {"spec", spec.ToJson()}};
  nlohmann::json j = NeedleJson(s, rs, meta);
  EXPECT_EQ(j["summary"]["effective_context_length"], 400);
  EXPECT_EQ(j["cases"].size(), 24u);
  EXPECT_EQ(j["cases"][0]["answer"].get<std::string>().front(), ' ');
  const std::string table = NeedleTable(s);
  EXPECT_NE(table.find("effective context length: 400 tokens"), std::string::npos);
  EXPECT_NE(table.find("WARNING: at 1600 tokens"), std::string::npos);
  const std::string svg = NeedleHeatmapSvg(s, "Needle recall: fake");
  EXPECT_EQ(kvs::bench::testing::XmlProblem(svg), "");
  const std::string html = NeedleHtml(s, rs, meta);
  EXPECT_NE(html.find(svg), std::string::npos);
  EXPECT_NE(html.find("11111"), std::string::npos);  // misses show the wrong answer
}

TEST(NeedleRun, FailedRequestsCountAsMissesWithTheirError) {
  FakeServerOptions so;
  so.ttft_seconds = 0.001;
  so.answer = Recall(1 << 30);
  so.fail = [](int64_t n) { return n % 2 == 0 ? 500 : 0; };
  FakeOpenAiServer server(so);
  auto ep = Connect(server);
  auto counter = ep->Counter();
  NeedleSpec spec;
  spec.lengths = {100};
  spec.depths = {0.5};
  spec.trials = 4;
  spec.api = ApiKind::kChat;
  NeedleRunOptions ro;
  ro.progress = false;
  ro.parallel = 1;
  auto rs = RunNeedleGrid(*ep, *counter, spec, *MakeFillerSource(), ro);
  int errors = 0, hits = 0;
  for (const auto& r : rs) {
    errors += !r.error.empty();
    hits += r.hit;
    if (!r.error.empty()) {
      EXPECT_NE(r.error.find("HTTP 500"), std::string::npos) << r.error;
      EXPECT_FALSE(r.hit);
    }
  }
  EXPECT_EQ(errors, 2);
  EXPECT_EQ(hits, 2);
  EXPECT_TRUE(server.bodies()[0].contains("messages"));
}

TEST(NeedleGate, ParsesAndPassesOrFailsOnRecall) {
  auto g = ParseNeedleGate("4k:90%");
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->length, 4096);
  EXPECT_DOUBLE_EQ(g->threshold, 0.9);
  auto h = ParseNeedleGate("2048:0.75:3");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->trials, 3);
  for (const char* bad : {"4096", "4096:x", "4096:0", "4096:150%", "x:0.9", "10:0.9", "4096:0.9:1:2"}) {
    EXPECT_FALSE(ParseNeedleGate(bad).ok()) << bad;
  }
  NeedleGateSpec spec;
  spec.length = 300;
  spec.threshold = 0.9;
  {
    FakeServerOptions so;
    so.ttft_seconds = 0.001;
    so.answer = Recall(1 << 30);
    FakeOpenAiServer server(so);
    auto r = RunNeedleGate(server.url(), "", spec);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->passed) << r->detail;
    EXPECT_DOUBLE_EQ(r->recall, 1.0);
    EXPECT_EQ(server.generations(), 10);  // 5 depths x 2 trials
  }
  {
    FakeServerOptions so;
    so.ttft_seconds = 0.001;
    so.answer = Recall(300 * 6 / 2);  // only the first half
    FakeOpenAiServer server(so);
    auto r = RunNeedleGate(server.url(), "", spec);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->passed);
    EXPECT_LT(r->recall, 0.9);
    EXPECT_NE(r->detail.find("at 300 tokens"), std::string::npos) << r->detail;
  }
  {
    FakeServerOptions so;
    so.tokenize = false;
    FakeOpenAiServer server(so);
    EXPECT_FALSE(RunNeedleGate(server.url(), "", spec).ok());  // cannot build exact prompts
  }
}

}  // namespace
}  // namespace kvs::bench
