// Figures, checks and reports of the online benchmark from synthetic
// request records with known numbers.
#include "bench/load_report.h"

#include <regex>

#include <gtest/gtest.h>

#include "bench/bench_test_util.h"
#include "bench/load_html.h"

namespace kvs::bench {
namespace {

RequestRecord Ok(int64_t input, double sent, double ttft, int tokens, double gap, int64_t cached = 0) {
  RequestRecord r;
  r.input_tokens = input;
  r.prompt_tokens = input;
  r.output_tokens = tokens;
  r.completion_tokens = tokens;
  r.cached_tokens = cached;
  r.status = 200;
  r.sent = sent;
  r.scheduled = sent;
  r.first_token = sent + ttft;
  for (int i = 0; i < tokens; ++i) r.chunk_times.push_back(r.first_token + gap * i);
  r.end = r.chunk_times.back();
  return r;
}

RunResult Run(std::string name, int64_t input_len, std::vector<RequestRecord> reqs, double duration) {
  RunResult r;
  r.plan.name = std::move(name);
  r.plan.concurrency = 1;
  r.plan.input_len = input_len;
  r.plan.output_len = 4;
  r.requests = std::move(reqs);
  r.duration = duration;
  return r;
}

TEST(Figures, TokensPerChunkAndSmallSamples) {
  // 12 tokens in 4 chunks per request: 3 tokens per chunk.
  std::vector<RequestRecord> rs;
  for (int i = 0; i < 3; ++i) {
    RequestRecord r = Ok(100, i * 0.5, 0.1, 4, 0.03);
    r.completion_tokens = 12;
    rs.push_back(r);
  }
  std::vector<const RequestRecord*> p;
  for (auto& r : rs) p.push_back(&r);
  const Figures f = ComputeFigures(p, 2.0, {});
  ASSERT_TRUE(f.tokens_per_chunk);
  EXPECT_DOUBLE_EQ(*f.tokens_per_chunk, 3.0);
  EXPECT_NE(SmallSampleNote(f.ttft).find("3 samples: p90 and p99 only repeat the largest value"), std::string::npos);
  Summary s;
  s.count = 50;
  EXPECT_NE(SmallSampleNote(s).find("p99 only repeats"), std::string::npos);
  s.count = 100;
  EXPECT_EQ(SmallSampleNote(s), "");
  // Both warnings reach the text and the HTML report.
  std::vector<RunResult> runs = {::kvs::bench::Run("tiny", 100, rs, 2.0)};
  const BenchReport rep = AnalyzeRuns(runs, {}, {});
  const std::string text = FormatBenchTable(rep, runs);
  EXPECT_NE(text.find("note: 3 samples"), std::string::npos) << text;
  EXPECT_NE(text.find("3.00 tokens per stream chunk"), std::string::npos) << text;
  const std::string html = BenchHtml(rep, runs, nlohmann::json::object());
  EXPECT_NE(html.find("Note: tiny: 3 samples"), std::string::npos);
  EXPECT_NE(html.find("3.00 tokens per stream chunk"), std::string::npos);
}

TEST(Figures, KnownNumbers) {
  // 4 requests over 2 s: TTFT 0.1..0.4, 5 tokens 10 ms apart; one 503.
  std::vector<RequestRecord> rs;
  for (int i = 0; i < 4; ++i) rs.push_back(Ok(100, i * 0.5, 0.1 * (i + 1), 5, 0.01, 25));
  RequestRecord bad;
  bad.input_tokens = 100;
  bad.sent = 0;
  bad.end = 0.01;
  bad.status = 503;
  bad.error = "HTTP 503: busy";
  bad.error_kind = "http_5xx";
  rs.push_back(bad);
  std::vector<const RequestRecord*> p;
  for (auto& r : rs) p.push_back(&r);
  const std::vector<Slo> slos = {*ParseSlo("ttft:250ms")};
  Figures f = ComputeFigures(p, 2.0, slos);
  EXPECT_EQ(f.planned, 5);
  EXPECT_EQ(f.ok, 4);
  EXPECT_EQ(f.failed, 1);
  EXPECT_EQ(f.errors.at("http_503"), 1);
  EXPECT_EQ(f.good, 2);  // TTFT 0.1 and 0.2 meet 250 ms
  EXPECT_DOUBLE_EQ(f.goodput, 1.0);
  EXPECT_DOUBLE_EQ(f.request_throughput, 2.0);
  EXPECT_DOUBLE_EQ(f.output_throughput, 10.0);
  EXPECT_DOUBLE_EQ(f.input_throughput, 200.0);
  EXPECT_NEAR(f.ttft.p50, 0.25, 1e-12);
  EXPECT_NEAR(f.ttft.max, 0.4, 1e-12);
  EXPECT_NEAR(f.tpot.p50, 0.01, 1e-12);  // (e2e - ttft) / (5 - 1)
  EXPECT_EQ(f.itl.count, 16);
  EXPECT_NEAR(f.itl.p99, 0.01, 1e-12);
  EXPECT_NEAR(*f.cached_share, 0.25, 1e-12);
}

std::vector<RunResult> LengthSweep(double ttft_1k, double ttft_2k, double ttft_4k, int64_t cached_2k = 0) {
  return {Run("c=1 in=1024", 1024, {Ok(1024, 0, ttft_1k, 4, 0.01)}, 1),
          Run("c=1 in=2048", 2048, {Ok(2048, 0, ttft_2k, 4, 0.01, cached_2k)}, 1),
          Run("c=1 in=4096", 4096, {Ok(4096, 0, ttft_4k, 4, 0.01)}, 1)};
}

const Check& Find(const BenchReport& r, const std::string& name) {
  for (const Check& c : r.checks) {
    if (c.name == name) return c;
  }
  static Check none;
  ADD_FAILURE() << "no check " << name;
  return none;
}

TEST(Checks, TtftGrowthRelativeToTheWork) {
  // Quadratic-ish growth: x3 per doubling = 1.5 relative: PASS.
  BenchReport ok = AnalyzeRuns(LengthSweep(0.1, 0.3, 0.9), {}, CheckOptions{});
  const Check& a = Find(ok, "ttft_growth");
  EXPECT_EQ(a.status, CheckStatus::kPass) << a.detail;
  EXPECT_NEAR(*a.value, 1.5, 1e-9);
  // An order-of-magnitude cliff: 0.3 s -> 9 s for twice the input = 15: FAIL.
  BenchReport bad = AnalyzeRuns(LengthSweep(0.1, 0.3, 9.0), {}, CheckOptions{});
  const Check& b = Find(bad, "ttft_growth");
  EXPECT_EQ(b.status, CheckStatus::kFail);
  EXPECT_NE(b.detail.find("2048 -> 4096"), std::string::npos) << b.detail;
  EXPECT_FALSE(bad.passed());
  // The 2K prompts were mostly cached: little prefill work there, so the
  // jump to 4K is measured against the uncached tokens (2048 -> 4096 is
  // then x32 the work) and passes; the 1K -> 2K step is then the worst.
  BenchReport cached = AnalyzeRuns(LengthSweep(0.1, 0.02, 0.6, 1920), {}, CheckOptions{});
  EXPECT_EQ(Find(cached, "ttft_growth").status, CheckStatus::kPass) << Find(cached, "ttft_growth").detail;
  // One length only: SKIP.
  BenchReport one = AnalyzeRuns({LengthSweep(0.1, 0.3, 0.9)[0]}, {}, CheckOptions{});
  EXPECT_EQ(Find(one, "ttft_growth").status, CheckStatus::kSkip);
  EXPECT_TRUE(one.passed());
}

TEST(Checks, WatermarkAndPreemptionsFromMetrics) {
  std::vector<RunResult> runs = LengthSweep(0.1, 0.2, 0.4);
  auto point = [](double t, double kv, double pre) {
    MetricsPoint m;
    m.t = t;
    m.g.kv_usage = kv;
    m.g.queue = 2;
    m.g.running = 3;
    m.g.preemptions = pre;
    m.g.source = "kvserve";
    return m;
  };
  // Without metrics both are skipped.
  BenchReport none = AnalyzeRuns(runs, {}, CheckOptions{});
  EXPECT_EQ(Find(none, "kv_watermark").status, CheckStatus::kSkip);
  EXPECT_EQ(Find(none, "preemptions").status, CheckStatus::kSkip);
  runs[0].metrics = {point(0, 0.2, 10), point(30, 0.85, 12)};
  runs[1].metrics = {point(0, 0.3, 12), point(30, 0.5, 14)};
  BenchReport rep = AnalyzeRuns(runs, {}, CheckOptions{});
  const Check& kv = Find(rep, "kv_watermark");
  EXPECT_EQ(kv.status, CheckStatus::kPass) << kv.detail;
  EXPECT_DOUBLE_EQ(*kv.value, 0.85);
  const Check& pre = Find(rep, "preemptions");
  EXPECT_EQ(pre.status, CheckStatus::kPass);
  EXPECT_NEAR(*pre.value, 4.0, 1e-9);  // 4 in 60 s
  CheckOptions strict;
  strict.kv_watermark_max = 0.8;
  strict.preemptions_per_minute_max = 3;
  BenchReport s = AnalyzeRuns(runs, {}, strict);
  EXPECT_EQ(Find(s, "kv_watermark").status, CheckStatus::kFail);
  EXPECT_NE(Find(s, "kv_watermark").detail.find("85.0 %"), std::string::npos);
  EXPECT_EQ(Find(s, "preemptions").status, CheckStatus::kFail);
  EXPECT_DOUBLE_EQ(*s.runs[0].peaks.queue_peak, 2);
  EXPECT_DOUBLE_EQ(*s.runs[0].peaks.preemptions, 2);
}

TEST(Reports, JsonTableAndHtmlAgree) {
  std::vector<RunResult> runs = LengthSweep(0.1, 0.3, 9.0);
  MetricsPoint m;
  m.t = 0.5;
  m.g.kv_usage = 0.4;
  m.g.queue = 1;
  runs[2].metrics = {m};
  runs[2].requests.push_back(Ok(4096, 1, 8.0, 4, 0.02));
  BenchReport rep = AnalyzeRuns(runs, {*ParseSlo("ttft:1s")}, CheckOptions{});
  nlohmann::json j = BenchReportJson(rep, runs, {{"tool", "kvserve bench"}, {"url", "http://x"}});
  EXPECT_EQ(j["tool"], "kvserve bench");
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][2]["requests"].size(), 2u);
  EXPECT_EQ(j["runs"][2]["figures"]["ok"], 2);
  EXPECT_EQ(j["runs"][2]["server_metrics"]["series"].size(), 1u);
  EXPECT_EQ(j["slos"][0], "ttft<=1s");
  EXPECT_EQ(j["passed"], false);
  // Every check line printed is in the JSON with the same status.
  const std::string table = FormatBenchTable(rep, runs);
  for (const auto& c : j["checks"]) {
    const std::string line = c["status"].get<std::string>() + " " + c["name"].get<std::string>() + ":";
    EXPECT_NE(table.find(line), std::string::npos) << line;
  }
  EXPECT_NE(table.find("=== TTFT vs input length"), std::string::npos);
  EXPECT_NE(table.find("  TTFT "), std::string::npos);

  const std::string html = BenchHtml(rep, runs, {{"url", "http://x"}, {"model", "m<1>"}});
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://www.w3.org/2000/svg\" width") == std::string::npos, false);
  EXPECT_EQ(html.find("src=\"http"), std::string::npos);  // nothing fetched
  EXPECT_NE(html.find("m&lt;1&gt;"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"fail\">FAIL</td>"), std::string::npos);
  // Each embedded chart is well-formed XML on its own.
  auto charts = BenchCharts(rep, runs);
  std::set<std::string> names;
  for (auto& [name, svg] : charts) {
    names.insert(name);
    EXPECT_EQ(kvs::bench::testing::XmlProblem(svg), "") << name;
    EXPECT_NE(html.find(svg), std::string::npos) << name;
  }
  for (const char* want : {"ttft_vs_length", "tpot_vs_length", "ttft_cdf", "itl_cdf", "e2e_cdf", "kv_over_time",
                           "queue_over_time"}) {
    EXPECT_TRUE(names.count(want)) << want;
  }
}

}  // namespace
}  // namespace kvs::bench
