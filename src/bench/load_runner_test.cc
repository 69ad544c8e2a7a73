// The load runner and endpoint discovery against a scripted server over
// loopback (FakeOpenAiServer): arrival processes, timings, usage, errors of
// every kind, multi-turn history, metrics sampling.
#include "bench/load_runner.h"

#include <gtest/gtest.h>

#include "bench/bench_test_util.h"
#include "bench/testing/fake_openai_server.h"
#include "bench/load_report.h"

namespace kvs::bench {
namespace {

using testing::Connect;
using testing::FakeOpenAiServer;
using testing::FakeServerOptions;


PreparedRun Prepare(Endpoint& ep, const WorkloadSpec& spec, size_t run = 0) {
  auto plans = ExpandRuns(spec);
  EXPECT_TRUE(plans.ok()) << plans.status().ToString();
  auto counter = ep.Counter();
  EXPECT_TRUE(counter);
  auto p = PreparePrompts((*plans)[run], *counter);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return std::move(*p);
}

LoadOptions Quiet() {
  LoadOptions o;
  o.progress = false;
  o.metrics_interval_seconds = 0.02;
  return o;
}

TEST(Endpoint, DiscoversModelContextTokenizerAndMetrics) {
  FakeServerOptions so;
  so.model = "m1";
  so.context = 2048;
  FakeOpenAiServer server(so);
  auto ep = Connect(server, "/v1");  // an OpenAI base URL works too
  EXPECT_EQ(ep->info().model, "m1");
  EXPECT_EQ(*ep->info().context, 2048);
  EXPECT_EQ(ep->info().tokenize, TokenizeFlavor::kVllm);
  EXPECT_TRUE(ep->info().has_metrics);
  auto counter = ep->Counter();
  EXPECT_EQ(*counter->CountPrompt("one two three"), 4);
  EXPECT_EQ(*counter->CountChat({{"user", "one two"}}), 8);

  EndpointOptions bad;
  bad.url = server.url();
  bad.model = "other";
  auto ep2 = Endpoint::Create(bad);
  auto info = (*ep2)->Discover();
  ASSERT_FALSE(info.ok());
  EXPECT_NE(info.status().message().find("m1"), std::string::npos);  // names what is served

  FakeServerOptions plain;
  plain.tokenize = false;
  plain.metrics = false;
  FakeOpenAiServer bare(plain);
  auto ep3 = Connect(bare);
  EXPECT_EQ(ep3->info().tokenize, TokenizeFlavor::kNone);
  EXPECT_FALSE(ep3->info().has_metrics);
  EXPECT_EQ(ep3->Counter(), nullptr);

  EndpointOptions down;
  down.url = "http://127.0.0.1:1";
  EXPECT_FALSE((*Endpoint::Create(down))->Discover().ok());
  down.url = "ftp://x";
  EXPECT_FALSE(Endpoint::Create(down).ok());
}

TEST(LoadRunner, ClosedLoopKeepsConcurrencyAndRecordsTimings) {
  FakeServerOptions so;
  so.ttft_seconds = 0.02;
  so.itl_seconds = 0.003;
  FakeOpenAiServer server(so);
  auto ep = Connect(server);
  WorkloadSpec spec;
  spec.concurrency = {3};
  spec.num_requests = 9;
  spec.input_len = 40;
  spec.output_len = 5;
  PreparedRun run = Prepare(*ep, spec);
  for (const PreparedPrompt& p : run.prompts) EXPECT_TRUE(p.exact);
  RunResult r = RunLoad(*ep, run, Quiet());
  ASSERT_EQ(r.requests.size(), 9u);
  EXPECT_EQ(server.generations(), 9);
  EXPECT_LE(server.peak_in_flight(), 3);
  EXPECT_GE(server.peak_in_flight(), 2);
  for (const RequestRecord& q : r.requests) {
    ASSERT_TRUE(q.ok()) << q.error;
    EXPECT_EQ(q.prompt_tokens, 40);     // usage: the server counted the exact length
    EXPECT_EQ(q.completion_tokens, 5);
    EXPECT_EQ(q.cached_tokens, 10);
    EXPECT_EQ(q.chunk_times.size(), 5u);
    EXPECT_GE(*q.Ttft(), 0.02 * 0.9);   // the scripted delay is a lower bound
    EXPECT_GE(*q.E2e(), *q.Ttft());
    EXPECT_EQ(q.Itls().size(), 4u);
    EXPECT_TRUE(q.Tpot().has_value());
    EXPECT_EQ(q.answer, " tok0 tok1 tok2 tok3 tok4");
  }
  EXPECT_GT(r.duration, 0);
  EXPECT_FALSE(r.metrics.empty());
  const auto body = server.bodies()[0];
  EXPECT_EQ(body["max_tokens"], 5);
  EXPECT_EQ(body["stream"], true);
  EXPECT_EQ(body["stream_options"]["include_usage"], true);
  EXPECT_EQ(body["ignore_eos"], true);
  EXPECT_EQ(body["temperature"], 0);
  EXPECT_EQ(body["model"], "fake-model");
}

TEST(LoadRunner, PoissonNeverSendsEarlyAndErrorsAreClassified) {
  FakeServerOptions so;
  so.ttft_seconds = 0.005;
  so.fail = [](int64_t n) { return n == 1 ? 500 : n == 2 ? 429 : n == 3 ? -1 : 0; };
  FakeOpenAiServer server(so);
  auto ep = Connect(server);
  WorkloadSpec spec;
  spec.rates = {50};
  spec.num_requests = 8;
  spec.input_len = 20;
  spec.output_len = 3;
  PreparedRun run = Prepare(*ep, spec);
  RunResult r = RunLoad(*ep, run, Quiet());
  int ok = 0;
  std::map<std::string, int> kinds;
  for (const RequestRecord& q : r.requests) {
    EXPECT_GE(q.sent, q.scheduled - 1e-3);  // never before its arrival time
    if (q.ok()) {
      ++ok;
    } else {
      ++kinds[q.error_kind];
      EXPECT_FALSE(q.Ttft().has_value());
    }
  }
  EXPECT_EQ(ok, 5);
  EXPECT_EQ(kinds["http_5xx"], 1);
  EXPECT_EQ(kinds["http_4xx"], 1);
  EXPECT_EQ(kinds["stream"], 1);
  // Arrival order: server-side numbering follows the schedule.
  for (size_t i = 1; i < r.requests.size(); ++i) EXPECT_GE(r.requests[i].scheduled, r.requests[i - 1].scheduled);
  // The figures and the server_errors check see them.
  BenchReport rep = AnalyzeRuns({r}, {}, CheckOptions{});
  EXPECT_EQ(rep.runs[0].all.failed, 3);
  EXPECT_EQ(rep.runs[0].all.errors.at("http_500"), 1);
  EXPECT_EQ(rep.runs[0].all.errors.at("http_429"), 1);
  EXPECT_EQ(rep.runs[0].all.errors.at("stream"), 1);
  const Check* found = nullptr;
  for (const Check& c : rep.checks) found = c.name == "server_errors" ? &c : found;
  ASSERT_NE(found, nullptr);
  const Check& errs = *found;
  EXPECT_EQ(errs.status, CheckStatus::kFail);
  EXPECT_NE(errs.detail.find("HTTP 500 x1"), std::string::npos) << errs.detail;
  EXPECT_NE(errs.detail.find("stream x1"), std::string::npos) << errs.detail;
  EXPECT_EQ(errs.detail.find("429"), std::string::npos);  // overload refusals are not server errors
}

TEST(LoadRunner, MultiTurnSendsTheGrowingHistory) {
  FakeServerOptions so;
  so.ttft_seconds = 0.002;
  FakeOpenAiServer server(so);
  auto ep = Connect(server);
  WorkloadSpec spec;
  spec.api = ApiKind::kChat;
  spec.multi_turn = {2, 3, 30};
  spec.concurrency = {2};
  spec.input_len = 12;
  spec.output_len = 4;
  PreparedRun run = Prepare(*ep, spec);
  ASSERT_FALSE(run.system_prompt.empty());
  RunResult r = RunLoad(*ep, run, Quiet());
  for (const RequestRecord& q : r.requests) ASSERT_TRUE(q.ok()) << q.error;
  const auto bodies = server.bodies();
  ASSERT_EQ(bodies.size(), 6u);
  std::map<std::string, std::vector<size_t>> by_conv;  // first user message -> message counts
  for (const auto& b : bodies) {
    const auto& ms = b["messages"];
    ASSERT_GE(ms.size(), 2u);
    EXPECT_EQ(ms[0]["role"], "system");
    EXPECT_EQ(ms[0]["content"], run.system_prompt);  // the shared prefix
    by_conv[ms[1]["content"].get<std::string>()].push_back(ms.size());
    if (ms.size() > 2) {
      EXPECT_EQ(ms[2]["content"], " tok0 tok1 tok2 tok3");  // the previous answer
    }
  }
  ASSERT_EQ(by_conv.size(), 2u);
  for (auto& [first, sizes] : by_conv) EXPECT_EQ(sizes, (std::vector<size_t>{2, 4, 6}));
  // Prompt tokens grow turn by turn; buckets follow the server's counts.
  EXPECT_LT(r.requests[0].prompt_tokens, r.requests[2].prompt_tokens);
}

TEST(LoadRunner, DurationStopsSendingNewRequests) {
  FakeServerOptions so;
  so.ttft_seconds = 0.05;
  FakeOpenAiServer server(so);
  auto ep = Connect(server);
  WorkloadSpec spec;
  spec.concurrency = {1};
  spec.num_requests = 200;
  spec.duration_seconds = 0.2;
  spec.input_len = 8;
  spec.output_len = 1;
  PreparedRun run = Prepare(*ep, spec);
  RunResult r = RunLoad(*ep, run, Quiet());
  int sent = 0;
  for (const RequestRecord& q : r.requests) sent += q.sent >= 0;
  EXPECT_LT(sent, 200);
  EXPECT_GE(sent, 1);
  BenchReport rep = AnalyzeRuns({r}, {}, CheckOptions{});
  EXPECT_EQ(rep.runs[0].all.planned, 200);
  EXPECT_EQ(rep.runs[0].all.sent, sent);
}

}  // namespace
}  // namespace kvs::bench
