#include "bench/needle.h"

#include <filesystem>
#include <set>

#include <gtest/gtest.h>

#include "bench/bench_test_util.h"

#include "base/test_util.h"
#include "bench/needle_report.h"

namespace kvs::bench {
namespace {

using testing::WordCounter;

NeedleSpec Spec() {
  NeedleSpec s;
  s.lengths = {200};
  s.depths = {0, 0.5, 1};
  return s;
}

// Position of the first needle's sentence in the prompt, as a fraction of
// the haystack between its start and the question.
double Where(const NeedleCase& c, const std::string& text) {
  const size_t p = text.find(c.needles[0].text);
  const size_t q = text.rfind(" What ");
  return static_cast<double>(p) / static_cast<double>(q == std::string::npos ? text.size() : q);
}

TEST(Needle, SingleCaseHasExactLengthDepthAndAnswerPrefix) {
  auto filler = MakeFillerSource();
  WordCounter counter;
  NeedleSpec s = Spec();
  for (double depth : {0.0, 0.5, 1.0}) {
    auto c = BuildCase(s, 200, depth, 0, *filler, counter);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_TRUE(c->exact);
    EXPECT_EQ(*counter.CountPrompt(c->prompt), 200);
    ASSERT_EQ(c->needles.size(), 1u);
    ASSERT_EQ(c->expected.size(), 1u);
    EXPECT_EQ(c->expected[0].size(), 5u);
    EXPECT_NE(c->prompt.find("The pass key is " + c->expected[0] + ". Remember it."), std::string::npos);
    EXPECT_EQ(c->prompt.substr(c->prompt.size() - 38), " What is the pass key? The pass key is");
    EXPECT_EQ(c->prompt[0], ' ');  // filler haystacks start like the model's training text
    const double where = Where(*c, c->prompt);
    EXPECT_NEAR(where, depth, 0.08) << c->prompt;
  }
}

TEST(Needle, TrialsDrawFreshValuesAndAreReproducible) {
  auto filler = MakeFillerSource();
  WordCounter counter;
  NeedleSpec s = Spec();
  std::set<std::string> values;
  for (int t = 0; t < 20; ++t) values.insert(BuildCase(s, 200, 0.5, t, *filler, counter)->expected[0]);
  EXPECT_GE(values.size(), 19u);
  EXPECT_EQ(BuildCase(s, 200, 0.5, 3, *filler, counter)->prompt, BuildCase(s, 200, 0.5, 3, *filler, counter)->prompt);
}

TEST(Needle, VariantsPlantAndAskTheRightNeedles) {
  auto prose = MakeProseSource();
  WordCounter counter;
  NeedleSpec s = Spec();
  s.haystack = "prose";
  s.api = ApiKind::kChat;

  s.variant = NeedleVariant::kMultiKey;
  s.needles = 4;
  auto mk = BuildCase(s, 300, 0.5, 1, *prose, counter);
  ASSERT_TRUE(mk.ok()) << mk.status().ToString();
  ASSERT_EQ(mk->needles.size(), 4u);
  ASSERT_EQ(mk->expected.size(), 1u);
  std::set<std::string> keys;
  for (const auto& n : mk->needles) {
    keys.insert(n.key);
    EXPECT_NE(mk->user_message.find(n.text), std::string::npos);
  }
  EXPECT_EQ(keys.size(), 4u);
  EXPECT_TRUE(mk->needles[0].asked);
  EXPECT_NE(mk->user_message.find("\nWhat is the secret number of " + mk->needles[0].key + "?"), std::string::npos);
  EXPECT_EQ(*counter.CountChat({{"user", mk->user_message}}), 300);
  EXPECT_NE(mk->user_message[0], ' ');

  s.variant = NeedleVariant::kMultiValue;
  s.values = 3;
  auto mv = BuildCase(s, 300, 0.2, 0, *prose, counter);
  ASSERT_TRUE(mv.ok());
  EXPECT_EQ(mv->expected.size(), 3u);
  EXPECT_EQ(mv->needles[0].key, mv->needles[2].key);
  EXPECT_NE(mv->user_message.find("What are all the special numbers for"), std::string::npos);

  s.variant = NeedleVariant::kMultiQuery;
  s.queries = 2;
  s.distractors = 2;
  auto mq = BuildCase(s, 300, 0.8, 0, *prose, counter);
  ASSERT_TRUE(mq.ok());
  EXPECT_EQ(mq->needles.size(), 4u);
  EXPECT_EQ(mq->expected.size(), 2u);
  EXPECT_FALSE(mq->needles[3].asked);
  EXPECT_NE(mq->user_message.find("What is the secret number of " + mq->needles[0].key + "? What is the secret number of " +
                                  mq->needles[1].key + "?"),
            std::string::npos);
}

TEST(Needle, SpecValidationNamesTheProblem) {
  NeedleSpec s = Spec();
  s.variant = NeedleVariant::kMultiKey;
  s.tmpl.fact = "The code is {value}.";  // no {key}
  auto v = ValidateNeedleSpec(s);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.message().find("{key}"), std::string::npos);
  NeedleSpec d = Spec();
  d.depths = {1.5};
  EXPECT_FALSE(ValidateNeedleSpec(d).ok());
  NeedleSpec k = Spec();
  k.variant = NeedleVariant::kMultiKey;
  k.needles = 3;
  k.keys = {"a", "b"};
  EXPECT_FALSE(ValidateNeedleSpec(k).ok());
  // Distractors switch the single variant to the keyed template.
  NeedleSpec x = Spec();
  x.distractors = 2;
  EXPECT_TRUE(ValidateNeedleSpec(x).ok());
  EXPECT_NE(x.EffectiveTemplate().fact.find("{key}"), std::string::npos);
}

TEST(Needle, ExactMatchScoring) {
  EXPECT_TRUE(ContainsValue(" 48213.", "48213"));
  EXPECT_TRUE(ContainsValue("The pass key is 48213", "48213"));
  EXPECT_FALSE(ContainsValue(" 148213.", "48213"));
  EXPECT_FALSE(ContainsValue(" 482134", "48213"));
  EXPECT_FALSE(ContainsValue(" 4821", "48213"));
  EXPECT_TRUE(ContainsValue("x 1 and 48213", "48213"));
  EXPECT_DOUBLE_EQ(ScoreAnswer("12, 34 and 56", {"12", "34", "78"}), 2.0 / 3);
}

TEST(Needle, DepthParsing) {
  auto d = ParseDepths("0:100:10");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  ASSERT_EQ(d->size(), 11u);
  EXPECT_DOUBLE_EQ((*d)[3], 0.3);
  EXPECT_DOUBLE_EQ(d->back(), 1.0);
  EXPECT_EQ(*ParseDepths("0,0.5,1"), (std::vector<double>{0, 0.5, 1}));
  EXPECT_EQ(*ParseDepths("10%,90%"), (std::vector<double>{0.1, 0.9}));
  EXPECT_FALSE(ParseDepths("0:1").ok());
  EXPECT_FALSE(ParseDepths("120").ok());
  EXPECT_FALSE(ParseDepths("a").ok());
}

NeedleResult R(int64_t len, double depth, bool hit) {
  NeedleResult r;
  r.length = len;
  r.depth = depth;
  r.hit = hit;
  return r;
}

TEST(Needle, MissKindsAndChanceLevel) {
  // Multikey: one asked value among 4 needles.
  auto Case = [](const std::string& answer, bool error = false) {
    NeedleResult r;
    r.length = 1024;
    r.expected = {"48213"};
    r.others = {"11111", "22222", "33333"};
    r.answer = answer;
    if (error) r.error = "HTTP 500";
    r.score = ScoreAnswer(r.answer, r.expected);
    r.hit = !error && r.score >= 1.0;
    return r;
  };
  const std::vector<NeedleResult> rs = {Case("It is 48213."), Case("It is 22222."), Case("It is 22222."),
                                        Case("I do not know."), Case("", true)};
  EXPECT_EQ(rs[0].MissKind(), "");
  EXPECT_EQ(rs[1].MissKind(), "distractor");
  EXPECT_EQ(rs[3].MissKind(), "none");
  EXPECT_EQ(rs[4].MissKind(), "error");
  const NeedleSummary s = SummarizeNeedle(rs, {1024}, {0}, 0.9);
  EXPECT_EQ(s.misses, (std::map<std::string, int64_t>{{"distractor", 2}, {"error", 1}, {"none", 1}}));
  ASSERT_TRUE(s.chance_level);
  EXPECT_DOUBLE_EQ(*s.chance_level, 0.25);
  // 1 of 5 (20 %) is not shown above the 25 % chance level.
  const std::string text = NeedleTable(s);
  EXPECT_NE(text.find("misses: 2 distractor (answered another needle's value)"), std::string::npos) << text;
  EXPECT_NE(text.find("chance level: 25.0 %"), std::string::npos) << text;
  EXPECT_NE(text.find("NOT shown above"), std::string::npos) << text;
  // Multivalue: some of the values is partial.
  NeedleResult mv;
  mv.expected = {"1", "2"};
  mv.answer = "1 and 3";
  mv.score = ScoreAnswer(mv.answer, mv.expected);
  EXPECT_EQ(mv.MissKind(), "partial");
}

TEST(Needle, EffectiveLengthAndLatePositionWarning) {
  const std::vector<int64_t> lengths = {1024, 2048, 4096};
  const std::vector<double> depths = {0, 0.25, 0.75, 1};
  std::vector<NeedleResult> rs;
  for (double d : depths) {
    for (int t = 0; t < 10; ++t) {
      rs.push_back(R(1024, d, !(d == 1 && t == 0)));  // 90 % at depth 1: passes
      rs.push_back(R(2048, d, true));
      rs.push_back(R(4096, d, d < 0.5 || t < 4));  // late half at 40 %
    }
  }
  NeedleSummary s = SummarizeNeedle(rs, lengths, depths, 0.9);
  ASSERT_TRUE(s.effective_length);
  EXPECT_EQ(*s.effective_length, 2048);
  EXPECT_TRUE(s.failing_below_effective.empty());
  EXPECT_EQ(s.requests, 120);
  EXPECT_DOUBLE_EQ(s.cells[0][3].recall(), 0.9);
  ASSERT_EQ(s.late_position_warnings.size(), 1u);
  EXPECT_NE(s.late_position_warnings[0].find("at 4096 tokens"), std::string::npos);
  EXPECT_NE(s.late_position_warnings[0].find("40 % vs 100 %"), std::string::npos) << s.late_position_warnings[0];
  auto j = s.ToJson();
  EXPECT_EQ(j["effective_context_length"], 2048);
  EXPECT_EQ(j["grid"][2]["cells"][3]["hits"], 4);

  // Nothing passes: no effective length. A pass above a failure is flagged.
  std::vector<NeedleResult> bad = {R(1024, 0, false), R(2048, 0, true)};
  NeedleSummary b = SummarizeNeedle(bad, {1024, 2048}, {0}, 0.9);
  EXPECT_EQ(*b.effective_length, 2048);
  EXPECT_EQ(b.failing_below_effective, (std::vector<int64_t>{1024}));
  NeedleSummary none = SummarizeNeedle({R(1024, 0, false)}, {1024}, {0}, 0.9);
  EXPECT_FALSE(none.effective_length);
  EXPECT_TRUE(none.ToJson()["effective_context_length"].is_null());
}

TEST(Needle, BundledModelTokenizerGivesExactPrompts) {
  const std::string model = kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " is absent";
  auto counter = LocalTokenCounter::FromGguf(model);
  ASSERT_TRUE(counter.ok());
  auto filler = MakeFillerSource();
  NeedleSpec s = Spec();
  for (ApiKind api : {ApiKind::kCompletions, ApiKind::kChat}) {
    s.api = api;
    for (int64_t len : {256, 1024}) {
      auto c = BuildCase(s, len, 0.3, 0, *filler, **counter);
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      EXPECT_TRUE(c->exact) << len << " got " << c->tokens;
      const int64_t n = api == ApiKind::kChat ? *(*counter)->CountChat({{"user", c->user_message}})
                                              : *(*counter)->CountPrompt(c->prompt);
      EXPECT_EQ(n, len);
    }
  }
}

}  // namespace
}  // namespace kvs::bench
