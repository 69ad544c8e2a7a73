// Text sources and exact-length prompts, with a synthetic counter and with
// the bundled model's real tokenizer.
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "bench/prompt_fit.h"
#include "bench/text_gen.h"

namespace kvs::bench {
namespace {

TEST(TextSources, ProseIsVariedAndHasNoDigits) {
  auto src = MakeProseSource();
  Rng rng(1);
  std::set<std::string> distinct;
  for (int i = 0; i < 200; ++i) {
    const std::string s = src->Next(rng);
    ASSERT_FALSE(s.empty());
    EXPECT_TRUE(s.back() == '.' || s.back() == '?') << s;
    EXPECT_EQ(s.find_first_of("0123456789"), std::string::npos) << s;
    EXPECT_EQ(s.find("  "), std::string::npos) << s;
    distinct.insert(s);
  }
  EXPECT_GT(distinct.size(), 150u);
  // Prompts start differently: no two of 300 share their first 8 words.
  std::set<std::string> openings;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    Rng r(seed);
    openings.insert(MakeWords(*src, r, 20).Join(8));
  }
  EXPECT_EQ(openings.size(), 300u);
  // Same seed, same text.
  Rng a(5), b(5);
  EXPECT_EQ(MakeWords(*src, a, 100).Join(100), MakeWords(*src, b, 100).Join(100));
}

TEST(TextSources, FileSourceKeepsSentenceOrder) {
  auto dir = kvs::testing::TempDir("bench_text");
  const auto path = (dir / "t.txt").string();
  std::ofstream(path) << "First one here. Second one\nspans lines! Third?\n\n";
  auto src = MakeTextSource(path);
  ASSERT_TRUE(src.ok()) << src.status().ToString();
  Rng rng(3);
  WordStream w = MakeWords(**src, rng, 30);
  const std::string text = w.Join(w.words.size());
  EXPECT_NE(text.find("Second one spans lines! Third? First one here."), std::string::npos) << text;
  EXPECT_TRUE(w.sentence_end[w.words.size() - 1]);
  EXPECT_FALSE(MakeTextSource((dir / "missing.txt").string()).ok());
  std::ofstream(dir / "empty.txt") << "  \n";
  EXPECT_FALSE(MakeTextSource((dir / "empty.txt").string()).ok());
  std::filesystem::remove_all(dir);
}

// Counts like a tokenizer with merges across word boundaries: each word is
// ceil(len / 4) tokens, "the x" pairs merge one token away, plus one BOS.
class FakeCounter : public TokenCounter {
 public:
  StatusOr<int64_t> CountPrompt(const std::string& text) override {
    ++calls;
    int64_t n = 1;
    WordStream w;
    w.Append(text);
    for (size_t i = 0; i < w.words.size(); ++i) {
      n += static_cast<int64_t>((w.words[i].size() + 3) / 4);
      if (i > 0 && w.words[i - 1] == "the" && n > 1) --n;
    }
    return n;
  }
  StatusOr<int64_t> CountChat(const std::vector<ChatMessage>& m) override {
    int64_t n = 5;  // template overhead
    for (const auto& x : m) n += *CountPrompt(x.content) - 1;
    return n;
  }
  std::string Describe() const override { return "fake"; }
  int calls = 0;
};

TEST(FitWords, ReachesExactCountsWithFewCalls) {
  auto src = MakeProseSource();
  FakeCounter counter;
  for (int64_t target : {1, 2, 17, 100, 513, 2000}) {
    Rng rng(static_cast<uint64_t>(target));
    WordStream w = MakeWords(*src, rng, static_cast<size_t>(target) + 16);
    counter.calls = 0;
    auto r = FitPrompt(w, target, counter);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->exact) << target << " got " << r->tokens;
    EXPECT_EQ(*counter.CountPrompt(r->text), target);
    EXPECT_LE(r->count_calls, 30) << target;
    auto c = FitChatMessage(w, target + 10, counter);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(*counter.CountChat({{"user", c->text}}), target + 10);
  }
  Rng rng(1);
  WordStream w = MakeWords(*src, rng, 50);
  EXPECT_FALSE(FitPrompt(w, 0, counter).ok());     // below the BOS
  EXPECT_FALSE(FitPrompt(w, 5000, counter).ok());  // not enough text
}

TEST(FitWords, ExactWithTheBundledModelsTokenizer) {
  const std::string model = kvs::testing::SourceDir() + "/models/kvserve-tiny.gguf";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << model << " is absent";
  auto counter = LocalTokenCounter::FromGguf(model);
  ASSERT_TRUE(counter.ok()) << counter.status().ToString();
  // Known counts (docs/api.md, /tokenize of the served model): BOS + text.
  EXPECT_EQ(*(*counter)->CountPrompt("The grass is green. The pass key is 12345."), 17);
  EXPECT_EQ(*(*counter)->CountChat({{"user", "hi"}}), 11);
  auto src = MakeProseSource();
  for (int64_t target : {64, 1000, 4000}) {
    Rng rng(static_cast<uint64_t>(target) + 7);
    WordStream w = MakeWords(*src, rng, static_cast<size_t>(target));
    auto r = FitPrompt(w, target, **counter);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_TRUE(r->exact) << target << " got " << r->tokens;
    EXPECT_EQ(*(*counter)->CountPrompt(r->text), target);
    auto c = FitChatMessage(w, target, **counter);
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->exact);
    EXPECT_EQ(*(*counter)->CountChat({{"user", c->text}}), target);
  }
}

}  // namespace
}  // namespace kvs::bench
