#include "bench/needle_tasks.h"

#include <map>
#include <regex>
#include <sstream>

#include <gtest/gtest.h>

#include "bench/bench_test_util.h"

namespace kvs::bench {
namespace {

using testing::WordCounter;

NeedleSpec Spec(NeedleVariant v, int64_t length = 400) {
  NeedleSpec s;
  s.variant = v;
  s.lengths = {length};
  s.depths = {0};
  s.seed = 11;
  return s;
}

std::map<std::string, int> WordCounts(const std::string& text) {
  std::map<std::string, int> n;
  std::istringstream in(text);
  for (std::string w; in >> w;) ++n[w];
  return n;
}

TEST(NeedleTasks, VariableTrackingHidesAForwardChainAndAsksForEveryName) {
  auto filler = MakeFillerSource();
  WordCounter counter;
  NeedleSpec s = Spec(NeedleVariant::kVariableTracking);
  s.hops = 3;
  s.distractors = 1;
  auto c = BuildAnyCase(s, 400, 0.2, 0, *filler, counter);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->exact);
  EXPECT_EQ(*counter.CountPrompt(c->prompt), 400);
  ASSERT_EQ(c->expected.size(), 4u);
  // The chain in order: the first holds the value, each next names the one before.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(c->prompt, m, std::regex("VAR " + c->expected[0] + " = ([0-9]+)\\.")));
  const std::string value = m[1];
  size_t at = c->prompt.find("VAR " + c->expected[0] + " = ");
  for (size_t i = 1; i < c->expected.size(); ++i) {
    const size_t next = c->prompt.find("VAR " + c->expected[i] + " = VAR " + c->expected[i - 1] + ".");
    ASSERT_NE(next, std::string::npos) << i;
    EXPECT_GT(next, at);
    at = next;
  }
  EXPECT_NE(c->prompt.find("hold the value " + value + " in the text above"), std::string::npos);
  // The distractor chain's names are in the prompt, not expected.
  int others = 0;
  for (const Needle& n : c->needles) others += !n.asked;
  EXPECT_EQ(others, 4);
}

TEST(NeedleTasks, CommonWordsAreTheMostFrequentItemsOfTheList) {
  WordCounter counter;
  auto filler = MakeFillerSource();
  NeedleSpec s = Spec(NeedleVariant::kCommonWords, 600);
  s.common_words = 5;
  auto c = BuildAnyCase(s, 600, 0, 1, *filler, counter);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_LE(*counter.CountPrompt(c->prompt), 600);
  EXPECT_GE(*counter.CountPrompt(c->prompt), 590);
  ASSERT_EQ(c->expected.size(), 5u);
  const auto counts = WordCounts(c->prompt);
  int least_common = 1 << 30, most_rare = 0;
  for (const std::string& w : c->expected) least_common = std::min(least_common, counts.at(w));
  for (auto& [w, n] : counts) {
    if (std::regex_match(w, std::regex("[a-z]{6}")) &&
        std::find(c->expected.begin(), c->expected.end(), w) == c->expected.end()) {
      most_rare = std::max(most_rare, n);
    }
  }
  EXPECT_GE(least_common, most_rare + 2) << "common words must stand out";
  EXPECT_NE(c->prompt.find("Which 5 words appear most often"), std::string::npos);
}

TEST(NeedleTasks, FrequentWordsExpectTheTopThreeOfTheFittedText) {
  WordCounter counter;
  auto filler = MakeFillerSource();
  NeedleSpec s = Spec(NeedleVariant::kFrequentWords, 500);
  auto c = BuildAnyCase(s, 500, 0, 2, *filler, counter);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->expected.size(), 3u);
  const std::string text = c->prompt.substr(0, c->prompt.find(" ...."));
  const auto counts = WordCounts(text);
  int third = counts.at(c->expected[2]);
  for (const std::string& w : c->expected) EXPECT_GE(counts.at(w), third);
  for (const Needle& n : c->needles) {
    if (!n.asked && counts.count(n.value)) {
      EXPECT_LE(counts.at(n.value), third) << n.value;
    }
  }
}

TEST(NeedleTasks, ValueKindsAndWholeSentences) {
  WordCounter counter;
  auto filler = MakeFillerSource();
  NeedleSpec s = Spec(NeedleVariant::kSingle, 300);
  s.value_kind = "uuid";
  auto c = BuildAnyCase(s, 300, 1.0, 0, *filler, counter);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(std::regex_match(c->expected[0], std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")))
      << c->expected[0];
  s.value_kind = "words";
  for (int trial = 0; trial < 5; ++trial) {
    c = BuildAnyCase(s, 300, 1.0, trial, *filler, counter);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->exact);
    EXPECT_TRUE(std::regex_match(c->expected[0], std::regex("[a-z]+")));
    // The haystack ends a sentence before the needle and the question:
    // nothing like "The sky is The pass key is".
    const size_t needle = c->prompt.find("The pass key is");
    ASSERT_NE(needle, std::string::npos);
    ASSERT_GT(needle, 2u);
    EXPECT_EQ(c->prompt.substr(needle - 2, 2), ". ") << c->prompt.substr(needle - 40, 60);
  }
  s.value_kind = "hex";
  EXPECT_FALSE(ValidateNeedleSpec(s).ok());
}

TEST(NeedleTasks, AllDistractorHaystacksAreNeedleFormSentencesWithOtherKeys) {
  NeedleSpec s = Spec(NeedleVariant::kMultiKey);
  auto source = MakeNeedleFormSource(s);
  Rng rng(4);
  const std::regex form("The secret number of ([A-Z][a-z]{5}) is ([1-9][0-9]{4})\\.");
  for (int i = 0; i < 20; ++i) {
    const std::string sentence = source->Next(rng);
    std::smatch m;
    ASSERT_TRUE(std::regex_match(sentence, m, form)) << sentence;
    for (const char* pool_name : {"Alice", "Bob", "Zoe", "Jonas"}) EXPECT_NE(m[1].str(), pool_name);
  }
  // Built into a case, the asked needle is still the one with a pool key.
  WordCounter counter;
  auto c = BuildAnyCase(s, 300, 0.5, 0, *source, counter);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->exact);
  const std::string asked = c->needles[0].text;
  EXPECT_NE(c->prompt.find(asked), std::string::npos);
  int forms = 0;
  for (size_t p = c->prompt.find("The secret number of"); p != std::string::npos;
       p = c->prompt.find("The secret number of", p + 1)) {
    ++forms;
  }
  EXPECT_GT(forms, 20);
}

TEST(NeedleTasks, SuitesParseAndAggregateByLength) {
  auto all = ParseNeedleTasks("ruler");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 7u);
  auto some = ParseNeedleTasks("single,vt,cwe");
  ASSERT_TRUE(some.ok());
  EXPECT_EQ((*some)[1], NeedleVariant::kVariableTracking);
  EXPECT_FALSE(ParseNeedleTasks("single,single").ok());
  EXPECT_FALSE(ParseNeedleTasks("nope").ok());
  TaskScore a, b;
  a.task = NeedleVariant::kSingle;
  a.score_by_length = {1.0, 0.5};
  a.score = 0.75;
  b.task = NeedleVariant::kCommonWords;
  b.score_by_length = {0.5, 0.0};
  b.score = 0.25;
  EXPECT_EQ(AggregateByLength({a, b}, 2), (std::vector<double>{0.75, 0.25}));
  const std::string table = TaskTable({a, b}, {1024, 2048});
  EXPECT_NE(table.find("aggregate"), std::string::npos);
  EXPECT_NE(table.find("50.0%"), std::string::npos);
}

}  // namespace
}  // namespace kvs::bench
