#include "bench/workload.h"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

namespace kvs::bench {
namespace {

TEST(Workload, ParsersAcceptTheDocumentedForms) {
  auto mix = ParseMix("256:0.8, 4k:0.2");
  ASSERT_TRUE(mix.ok()) << mix.status().ToString();
  EXPECT_EQ(mix->size(), 2u);
  EXPECT_EQ((*mix)[1].first, 4096);
  EXPECT_DOUBLE_EQ((*mix)[0].second, 0.8);
  EXPECT_FALSE(ParseMix("256").ok());
  EXPECT_FALSE(ParseMix("256:0").ok());
  EXPECT_FALSE(ParseMix("x:1").ok());

  auto l = ParseLengths("512:4096");
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(*l, (std::vector<int64_t>{512, 1024, 2048, 4096}));
  EXPECT_EQ(*ParseLengths("500:1500"), (std::vector<int64_t>{500, 1000, 1500}));
  EXPECT_EQ(*ParseLengths("100,2k"), (std::vector<int64_t>{100, 2048}));
  EXPECT_FALSE(ParseLengths("4096:512").ok());
  EXPECT_EQ(*ParseLengths("1024:max", 4000), (std::vector<int64_t>{1024, 2048, 4000}));
  EXPECT_FALSE(ParseLengths("1024:max").ok());  // the context is unknown
  EXPECT_FALSE(ParseLengths("0,1").ok());

  auto m = ParseMultiTurn("4:3:512");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->conversations, 4);
  EXPECT_EQ(m->turns, 3);
  EXPECT_EQ(m->system_tokens, 512);
  EXPECT_FALSE(ParseMultiTurn("4").ok());
  EXPECT_FALSE(ParseMultiTurn("0:3").ok());
}

TEST(Workload, SweepsExpandToOneRunPerCombination) {
  WorkloadSpec s;
  s.concurrency = {1, 4};
  s.input_lengths = {128, 256, 512};
  s.num_requests = 5;
  auto runs = ExpandRuns(s);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 6u);
  EXPECT_EQ((*runs)[0].name, "c=1 in=128 out=128");
  EXPECT_EQ((*runs)[5].name, "c=4 in=512 out=128");
  for (const RunPlan& r : *runs) {
    EXPECT_EQ(r.requests.size(), 5u);
    for (const PlannedRequest& q : r.requests) {
      EXPECT_EQ(q.input_tokens, r.input_len);
      EXPECT_EQ(q.arrival, 0);
    }
  }
}

TEST(Workload, PoissonArrivalsHaveTheRequestedRate) {
  WorkloadSpec s;
  s.rates = {20};
  s.num_requests = 4000;
  auto runs = ExpandRuns(s);
  ASSERT_TRUE(runs.ok());
  const auto& q = (*runs)[0].requests;
  ASSERT_EQ(q.size(), 4000u);
  EXPECT_EQ(q[0].arrival, 0);
  double sum = 0, sumsq = 0;
  for (size_t i = 1; i < q.size(); ++i) {
    const double gap = q[i].arrival - q[i - 1].arrival;
    ASSERT_GE(gap, 0);
    sum += gap;
    sumsq += gap * gap;
  }
  const double n = static_cast<double>(q.size() - 1);
  const double mean = sum / n, sd = std::sqrt(sumsq / n - mean * mean);
  // Exponential gaps: mean = sd = 1/rate (50 ms); 4,000 samples put the
  // estimates within a few percent.
  EXPECT_NEAR(mean, 0.05, 0.005);
  EXPECT_NEAR(sd, 0.05, 0.006);
  // Duration without a count: the arrivals inside it, about rate x duration.
  s.num_requests = 0;
  s.duration_seconds = 30;
  auto timed = ExpandRuns(s);
  ASSERT_TRUE(timed.ok());
  const auto& d = (*timed)[0].requests;  // (not of a temporary: it would dangle)
  EXPECT_NEAR(static_cast<double>(d.size()), 600, 100);  // Poisson: sd ~25
  EXPECT_LT(d.back().arrival, 30);
}

TEST(Workload, MixDrawsLengthsByWeight) {
  WorkloadSpec s;
  s.mix = {{100, 3}, {1000, 1}};
  s.num_requests = 4000;
  auto runs = ExpandRuns(s);
  ASSERT_TRUE(runs.ok());
  std::map<int64_t, int> n;
  for (const auto& q : (*runs)[0].requests) ++n[q.input_tokens];
  EXPECT_EQ(n.size(), 2u);
  EXPECT_NEAR(n[100] / 4000.0, 0.75, 0.03);
  EXPECT_EQ((*runs)[0].name, "c=1 mix out=128");
}

TEST(Workload, MultiTurnListsEachConversationsTurnsInOrder) {
  WorkloadSpec s;
  s.api = ApiKind::kChat;
  s.multi_turn = {3, 4, 256};
  s.concurrency = {2};
  auto runs = ExpandRuns(s);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  const auto& q = (*runs)[0].requests;
  ASSERT_EQ(q.size(), 12u);
  for (size_t i = 0; i < q.size(); ++i) {
    EXPECT_EQ(q[i].conversation, static_cast<int>(i / 4));
    EXPECT_EQ(q[i].turn, static_cast<int>(i % 4));
  }
  s.api = ApiKind::kCompletions;
  EXPECT_FALSE(ExpandRuns(s).ok());
}

TEST(Workload, InvalidCombinationsNameTheProblem) {
  WorkloadSpec s;
  s.concurrency = {2};
  s.rates = {1};
  auto r = ExpandRuns(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not both"), std::string::npos);
  WorkloadSpec t;
  t.mix = {{1, 1}};
  t.input_lengths = {5};
  EXPECT_FALSE(ExpandRuns(t).ok());
  WorkloadSpec u;
  u.output_len = 0;
  EXPECT_FALSE(ExpandRuns(u).ok());
}

TEST(WorkloadFile, RunsOverrideTopLevelDefaults) {
  const char* yaml = R"(
api: chat
output_len: 32
seed: 9
slo: ["ttft:2s@4096", "tpot:100ms"]
runs:
  - name: ttft-vs-length
    input-lengths: 128:512
    num_requests: 2
  - name: load
    rate: [1, 2.5]
    duration: 10
    mix: {128: 0.8, 1024: 0.2}
  - multi_turn: {conversations: 2, turns: 3, system_tokens: 64}
    concurrency: 2
)";
  auto f = ParseWorkloadYaml(yaml, WorkloadSpec{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->specs.size(), 3u);
  EXPECT_EQ(f->slos, (std::vector<std::string>{"ttft:2s@4096", "tpot:100ms"}));
  EXPECT_EQ(f->specs[0].api, ApiKind::kChat);
  EXPECT_EQ(f->specs[0].output_len, 32);
  EXPECT_EQ(f->specs[0].seed, 9u);
  EXPECT_EQ(f->specs[0].input_lengths, (std::vector<int64_t>{128, 256, 512}));
  EXPECT_EQ(f->specs[1].rates, (std::vector<double>{1, 2.5}));
  EXPECT_EQ(f->specs[1].mix.size(), 2u);
  EXPECT_EQ(f->specs[2].multi_turn.turns, 3);
  EXPECT_EQ(f->specs[2].multi_turn.system_tokens, 64);
  EXPECT_EQ(f->specs[2].concurrency, (std::vector<int>{2}));
}

TEST(WorkloadFile, MaxLengthResolvesAgainstTheContext) {
  auto f = ParseWorkloadYaml("output_len: 96\ninput-lengths: 1024:max\n", WorkloadSpec{});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  WorkloadSpec s = f->specs[0];
  EXPECT_TRUE(s.input_lengths.empty());
  EXPECT_FALSE(ExpandRuns(s).ok());  // not resolved yet
  ASSERT_TRUE(ResolveLengths(&s, 4096).ok());
  EXPECT_EQ(s.input_lengths, (std::vector<int64_t>{1024, 2048, 4000}));
  auto runs = ExpandRuns(s);
  ASSERT_TRUE(runs.ok());
  EXPECT_EQ(runs->size(), 3u);
}

TEST(WorkloadFile, UnknownKeysAndBadValuesAreRefusedByName) {
  auto a = ParseWorkloadYaml("concurency: 4\n", WorkloadSpec{});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("concurency"), std::string::npos);
  auto b = ParseWorkloadYaml("runs:\n  - rate: fast\n", WorkloadSpec{});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("runs[0]"), std::string::npos);
  EXPECT_NE(b.status().message().find("fast"), std::string::npos);
  auto c = ParseWorkloadYaml("api: grpc\n", WorkloadSpec{});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("grpc"), std::string::npos);
  EXPECT_FALSE(ParseWorkloadYaml("[1, 2]\n", WorkloadSpec{}).ok());
  EXPECT_FALSE(ParseWorkloadYaml("a: [\n", WorkloadSpec{}).ok());
}

}  // namespace
}  // namespace kvs::bench

namespace kvs::bench {
namespace {

TEST(Dataset, ReadsShareGptOpenAiMessagesAndTraces) {
  auto d = ParseDataset(R"([
    {"conversations": [{"from": "human", "value": "Hi there"}, {"from": "gpt", "value": "Hello"}]},
    {"conversations": [{"from": "gpt", "value": "no question"}]},
    {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]}
  ])", "mem");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->entries.size(), 2u);
  EXPECT_EQ(d->skipped, 1);
  EXPECT_EQ(d->entries[0].prompt, "Hi there");
  EXPECT_EQ(d->entries[0].reply, "Hello");
  EXPECT_EQ(d->entries[1].prompt, "Q");
  EXPECT_EQ(d->entries[1].reply, "A");
  EXPECT_FALSE(d->timed);

  auto t = ParseDataset("{\"timestamp\": 1.5, \"input_length\": 100, \"output_length\": 7}\n\n"
                        "{\"timestamp\": 2, \"input_tokens\": 50, \"output_tokens\": 3}\n",
                        "trace");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->timed);
  EXPECT_EQ(*t->entries[1].input_length, 50);
  EXPECT_EQ(*t->entries[0].output_length, 7);

  EXPECT_NE(ParseDataset("{\"timestamp\": 2, \"input_length\": 5}\n{\"timestamp\": 1, \"input_length\": 5}\n", "x")
                .status()
                .message()
                .find("must not decrease"),
            std::string::npos);
  EXPECT_NE(ParseDataset("{\"a\": 1}\nnot json\n", "f.jsonl").status().message().find("f.jsonl:2"), std::string::npos);
  EXPECT_NE(ParseDataset("[{\"a\": 1}]", "x").status().message().find("no usable entry"), std::string::npos);
}

TEST(Workload, GammaArrivalsKeepTheRateAndSpreadByBurstiness) {
  auto gaps_cv = [](double burstiness, double* mean) {
    WorkloadSpec s;
    s.rates = {10};
    s.num_requests = 4000;
    s.burstiness = burstiness;
    auto runs = ExpandRuns(s);
    EXPECT_TRUE(runs.ok());
    std::vector<double> gaps;
    const auto& r = (*runs)[0].requests;
    for (size_t i = 1; i < r.size(); ++i) gaps.push_back(r[i].arrival - r[i - 1].arrival);
    double m = 0, v = 0;
    for (double g : gaps) m += g;
    m /= static_cast<double>(gaps.size());
    for (double g : gaps) v += (g - m) * (g - m);
    v /= static_cast<double>(gaps.size() - 1);
    *mean = m;
    return std::sqrt(v) / m;
  };
  double mean = 0;
  // Gamma(shape B) gaps: coefficient of variation 1 / sqrt(B), mean 1 / rate.
  EXPECT_NEAR(gaps_cv(1, &mean), 1.0, 0.08);
  EXPECT_NEAR(mean, 0.1, 0.01);
  EXPECT_NEAR(gaps_cv(0.25, &mean), 2.0, 0.25);
  EXPECT_NEAR(mean, 0.1, 0.015);
  EXPECT_NEAR(gaps_cv(4, &mean), 0.5, 0.05);
}

TEST(Workload, RampUpRaisesTheRateLinearlyAndLengthsSpread) {
  WorkloadSpec s;
  s.rates = {100};
  s.ramp_up_seconds = 10;
  s.num_requests = 3000;
  s.input_len = 200;
  s.input_stddev = 50;
  auto runs = ExpandRuns(s);
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  int first_half = 0, second_half = 0, after = 0;
  double sum = 0, sq = 0;
  for (const PlannedRequest& r : (*runs)[0].requests) {
    if (r.arrival < 5) ++first_half;
    else if (r.arrival < 10) ++second_half;
    else if (r.arrival < 15) ++after;
    sum += static_cast<double>(r.input_tokens);
    sq += static_cast<double>(r.input_tokens) * static_cast<double>(r.input_tokens);
  }
  // Expected counts: 125 in [0, 5), 375 in [5, 10), 500 in [10, 15).
  EXPECT_NEAR(first_half, 125, 40);
  EXPECT_NEAR(second_half, 375, 60);
  EXPECT_NEAR(after, 500, 70);
  const double n = 3000, mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
  EXPECT_NEAR(mean, 200, 5);
  EXPECT_NEAR(sd, 50, 5);
  s.rates.clear();
  s.concurrency = {4};
  EXPECT_NE(ValidateSpec(s).message().find("give --rate"), std::string::npos);
}

}  // namespace
}  // namespace kvs::bench
