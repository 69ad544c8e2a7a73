#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/vocabulary.h"

namespace kvs::engine {
namespace {

Sequence MakeSeq(SamplingParams p, std::vector<int32_t> prompt = {0}, uint64_t seed = 1) {
  Sequence s(0, "r", std::move(prompt), std::move(p));
  s.rng.seed(seed);
  return s;
}

std::vector<float> RandomLogits(int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> l(static_cast<size_t>(vocab));
  for (float& x : l) x = static_cast<float>(UniformDouble(rng) * 10.0 - 5.0);
  return l;
}

std::vector<double> Softmax(const std::vector<float>& l, double t = 1.0) {
  const double m = *std::max_element(l.begin(), l.end());
  std::vector<double> p(l.size());
  double sum = 0;
  for (size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp((l[i] - m) / t);
  for (double& x : p) x /= sum;
  return p;
}

// Draws n tokens (the sequence's RNG advancing) and counts them.
std::map<int32_t, int> Histogram(Sampler& s, const std::vector<float>& logits, Sequence& seq, int n) {
  std::map<int32_t, int> h;
  for (int i = 0; i < n; ++i) ++h[s.Sample(logits, seq).token_id];
  return h;
}

TEST(SamplerTest, GreedyTakesArgmaxAndTiesGoToTheLowestId) {
  Sampler s(5);
  SamplingParams p;
  p.temperature = 0.0f;
  Sequence seq = MakeSeq(p);
  EXPECT_EQ(s.Sample(std::vector<float>{0.1f, 3.0f, -1.0f, 2.9f, 0.0f}, seq).token_id, 1);
  EXPECT_EQ(s.Sample(std::vector<float>{1.0f, 2.0f, 2.0f, -1.0f, 2.0f}, seq).token_id, 1);
  const std::mt19937_64 before = seq.rng;
  s.Sample(std::vector<float>{1.0f, 2.0f, 2.0f, -1.0f, 2.0f}, seq);
  EXPECT_TRUE(seq.rng == before) << "greedy must not consume randomness";
}

TEST(SamplerTest, TemperatureSamplingFollowsTheSoftmax) {
  const int32_t vocab = 8;
  Sampler s(vocab);
  const std::vector<float> logits = RandomLogits(vocab, 3);
  for (float t : {0.5f, 1.0f, 2.0f}) {
    SamplingParams p;
    p.temperature = t;
    Sequence seq = MakeSeq(p);
    const int n = 200000;
    const auto h = Histogram(s, logits, seq, n);
    const std::vector<double> want = Softmax(logits, t);
    for (int32_t v = 0; v < vocab; ++v) {
      const double got = h.count(v) ? h.at(v) / static_cast<double>(n) : 0.0;
      // 5 sigma of a binomial proportion.
      EXPECT_NEAR(got, want[static_cast<size_t>(v)], 5 * std::sqrt(want[static_cast<size_t>(v)] / n) + 1e-4)
          << "token " << v << " t " << t;
    }
  }
}

// The full-vocabulary path runs the SIMD softmax kernel, which clamps its
// input at -87: a token far below the top (a banned one: logit_bias -100 at
// low temperature, or -inf) must still weigh exactly 0, as with std::exp,
// while one 80 nats below keeps its tiny nonzero weight, and a vocabulary
// that is not a multiple of the SIMD width is sampled like any other.
TEST(SamplerTest, TokensFarBelowTheTopAreNeverDrawn) {
  const int32_t vocab = 37;
  Sampler s(vocab);
  std::vector<float> logits(static_cast<size_t>(vocab), 0.0f);
  logits[5] = -std::numeric_limits<float>::infinity();
  logits[6] = -100.0f;
  logits[7] = -1000.0f;
  logits[36] = 1.0f;  // the last, in the SIMD tail
  SamplingParams p;
  p.temperature = 0.25f;  // logit -100 becomes -400 nats
  Sequence seq = MakeSeq(p);
  const auto h = Histogram(s, logits, seq, 20000);
  for (int32_t banned : {5, 6, 7}) EXPECT_EQ(h.count(banned), 0u) << "token " << banned;
  const std::vector<double> want = Softmax(logits, 0.25);
  EXPECT_NEAR(h.count(36) ? h.at(36) / 20000.0 : 0.0, want[36], 5 * std::sqrt(want[36] / 20000) + 1e-3);

  // Top-p over these weights: the nucleus never reaches the banned tokens.
  p.top_p = 0.999f;
  Sequence seq2 = MakeSeq(p, {0}, 9);
  const auto h2 = Histogram(s, logits, seq2, 5000);
  for (int32_t banned : {5, 6, 7}) EXPECT_EQ(h2.count(banned), 0u) << "token " << banned;
}

// Vocabulary: 0 = stop, 1..7 = "a".."g"; grammar: one of a, b, c, then "d".
std::shared_ptr<const grammar::CompiledGrammar> FirstOfAbc() {
  std::vector<std::string> bytes = {"", "a", "b", "c", "d", "e", "f", "g"};
  std::vector<grammar::Vocabulary::Kind> kinds(bytes.size(), grammar::Vocabulary::Kind::kText);
  kinds[0] = grammar::Vocabulary::Kind::kStop;
  auto v = grammar::Vocabulary::FromTokens(std::move(bytes), std::move(kinds), 8);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  auto g = grammar::CompiledGrammar::FromGbnf("root ::= [abc] \"d\"", *v);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return *g;
}

// The draw-first shortcut (greedy, plain temperature) and the masked path
// (top-p) both sample from the softmax restricted to the allowed tokens.
TEST(SamplerTest, ConstrainedSamplingFollowsTheMaskedSoftmax) {
  const auto g = FirstOfAbc();
  Sampler s(8);
  // Disallowed tokens carry most of the mass, so the shortcut is refused
  // often and both of its branches are exercised.
  const std::vector<float> logits = {0.5f, 0.2f, -0.4f, 0.9f, 2.0f, 1.5f, -1.0f, 1.0f};
  std::vector<double> want = Softmax(logits);
  double z = want[1] + want[2] + want[3];
  for (size_t i = 0; i < want.size(); ++i) want[i] = (i >= 1 && i <= 3) ? want[i] / z : 0.0;
  for (float top_p : {1.0f, 0.999f}) {
    SamplingParams p;
    p.temperature = 1.0f;
    p.top_p = top_p;
    p.max_tokens = 100;
    Sequence seq = MakeSeq(p);
    const int n = 100000;
    std::map<int32_t, int> h;
    for (int i = 0; i < n; ++i) {
      seq.matcher = std::make_unique<grammar::GrammarMatcher>(g);
      const SampleResult r = s.Sample(logits, seq);
      ASSERT_TRUE(r.error.ok()) << r.error.ToString();
      ++h[r.token_id];
    }
    for (int32_t v = 0; v < 8; ++v) {
      const double got = h.count(v) ? h.at(v) / static_cast<double>(n) : 0.0;
      EXPECT_NEAR(got, want[static_cast<size_t>(v)], 5 * std::sqrt(want[static_cast<size_t>(v)] / n) + 1e-4)
          << "token " << v << " top_p " << top_p;
    }
  }
  // Greedy: the global argmax (token 4, "d") is refused; the best allowed wins.
  SamplingParams p;
  p.temperature = 0.0f;
  p.max_tokens = 100;
  Sequence seq = MakeSeq(p);
  seq.matcher = std::make_unique<grammar::GrammarMatcher>(g);
  EXPECT_EQ(s.Sample(logits, seq).token_id, 3);
  // ... and the next step, where the argmax is allowed, takes it.
  EXPECT_EQ(s.Sample(logits, seq).token_id, 4);
  EXPECT_EQ(s.Sample(logits, seq).token_id, 0) << "only the stop token is left";
}

TEST(SamplerTest, TopKKeepsOnlyTheKMostLikely) {
  const int32_t vocab = 50;
  Sampler s(vocab);
  const std::vector<float> logits = RandomLogits(vocab, 4);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  SamplingParams p;
  p.temperature = 3.0f;  // flat, so that excluded tokens would show up
  p.top_k = 5;
  Sequence seq = MakeSeq(p);
  const auto h = Histogram(s, logits, seq, 20000);
  EXPECT_EQ(h.size(), 5u);
  for (const auto& [tok, n] : h) {
    EXPECT_NE(std::find(order.begin(), order.begin() + 5, tok), order.begin() + 5) << tok;
  }
  // Ties at the cut keep the lowest ids.
  std::vector<float> flat(vocab, 1.0f);
  flat[40] = 2.0f;
  p.top_k = 3;
  Sequence seq2 = MakeSeq(p);
  const auto h2 = Histogram(s, flat, seq2, 5000);
  EXPECT_EQ(h2.size(), 3u);
  EXPECT_TRUE(h2.count(40) && h2.count(0) && h2.count(1));
}

// The smallest set of most likely tokens whose mass reaches p.
std::set<int32_t> NucleusOf(const std::vector<float>& logits, double top_p, double t) {
  const std::vector<double> prob = Softmax(logits, t);
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return prob[a] > prob[b]; });
  std::set<int32_t> keep;
  double cum = 0;
  for (int32_t id : order) {
    if (cum >= top_p) break;
    keep.insert(id);
    cum += prob[static_cast<size_t>(id)];
  }
  return keep;
}

TEST(SamplerTest, TopPKeepsTheNucleusEvenForLargeVocabularies) {
  for (int32_t vocab : {40, 5000}) {
    Sampler s(vocab);
    std::vector<float> logits = RandomLogits(vocab, 5);
    for (float& l : logits) l *= 0.6f;  // flat enough that the nucleus spans > 256 tokens at 5000
    SamplingParams p;
    p.top_p = 0.5f;
    Sequence seq = MakeSeq(p);
    const std::set<int32_t> nucleus = NucleusOf(logits, 0.5, 1.0);
    if (vocab == 5000) {
      EXPECT_GT(nucleus.size(), 256u);
    }
    const auto h = Histogram(s, logits, seq, vocab == 40 ? 20000 : 3000);
    for (const auto& [tok, n] : h) EXPECT_EQ(nucleus.count(tok), 1u) << "token " << tok << " outside the nucleus";
    if (vocab == 40) {
      EXPECT_EQ(h.size(), nucleus.size());
    }
  }
}

TEST(SamplerTest, MinPDropsTokensFarBelowTheTop) {
  Sampler s(4);
  // Probabilities ~ 0.6, 0.3, 0.08, 0.02 relative to the top: 1, 0.5, 0.13, 0.03.
  const std::vector<float> logits = {std::log(0.6f), std::log(0.3f), std::log(0.08f), std::log(0.02f)};
  SamplingParams p;
  p.min_p = 0.1f;
  Sequence seq = MakeSeq(p);
  const auto h = Histogram(s, logits, seq, 20000);
  EXPECT_EQ(h.count(3), 0u);
  EXPECT_GT(h.at(2), 0);
  EXPECT_NEAR(h.at(0) / 20000.0, 0.6 / 0.98, 0.02);
}

TEST(SamplerTest, PenaltiesChangeTheArgmaxAsSpecified) {
  Sampler s(4);
  SamplingParams p;
  p.temperature = 0.0f;
  const std::vector<float> logits = {2.0f, 1.9f, -1.0f, 1.0f};
  {
    // Repetition: 2.0 / 1.5 = 1.33 < 1.9; token 0 is in the prompt.
    p.repetition_penalty = 1.5f;
    Sequence seq = MakeSeq(p, {0});
    EXPECT_EQ(s.Sample(logits, seq).token_id, 1);
  }
  {
    // Presence applies to output tokens only, not the prompt.
    SamplingParams q = p;
    q.repetition_penalty = 1.0f;
    q.presence_penalty = 0.2f;
    Sequence seq = MakeSeq(q, {0});
    EXPECT_EQ(s.Sample(logits, seq).token_id, 0);
    seq.token_ids.push_back(0);  // now in the output: 2.0 - 0.2 < 1.9
    EXPECT_EQ(s.Sample(logits, seq).token_id, 1);
  }
  {
    // Frequency scales with the count: 2.0 - 2 * 0.04 = 1.92 > 1.9, 2.0 - 3 * 0.04 = 1.88 < 1.9.
    SamplingParams q = p;
    q.repetition_penalty = 1.0f;
    q.frequency_penalty = 0.04f;
    Sequence seq = MakeSeq(q, {3});
    seq.token_ids.insert(seq.token_ids.end(), {0, 0});
    EXPECT_EQ(s.Sample(logits, seq).token_id, 0);
    seq.token_ids.push_back(0);
    EXPECT_EQ(s.Sample(logits, seq).token_id, 1);
  }
  {
    // A negative logit is multiplied by the repetition penalty.
    SamplingParams q = p;
    q.repetition_penalty = 2.0f;
    Sequence seq = MakeSeq(q, {2});
    const std::vector<float> neg = {-1.0f, -1.5f, -0.6f, -5.0f};
    EXPECT_EQ(s.Sample(neg, seq).token_id, 0);  // -0.6 * 2 = -1.2 < -1.0
  }
}

TEST(SamplerTest, SameSeedSameDrawsDifferentSeedDifferentDraws) {
  const int32_t vocab = 1000;
  Sampler s(vocab);
  SamplingParams p;
  p.top_p = 0.95f;
  p.top_k = 100;
  const auto draw = [&](uint64_t seed) {
    Sequence seq = MakeSeq(p, {1, 2, 3}, seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.Sample(RandomLogits(vocab, static_cast<uint64_t>(i)), seq).token_id);
    return out;
  };
  EXPECT_EQ(draw(11), draw(11));
  EXPECT_NE(draw(11), draw(12));
}

TEST(SamplerTest, LogprobsAreTheRawLogSoftmaxWithTopAlternatives) {
  const int32_t vocab = 30;
  Sampler s(vocab);
  const std::vector<float> logits = RandomLogits(vocab, 9);
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 3;
  p.repetition_penalty = 1.3f;  // processing must not leak into the logprobs
  p.logprobs = 4;
  Sequence seq = MakeSeq(p, {1, 2});
  const SampleResult r = s.Sample(logits, seq);
  const std::vector<double> prob = Softmax(logits);
  EXPECT_NEAR(r.logprob, std::log(prob[static_cast<size_t>(r.token_id)]), 1e-5);
  ASSERT_EQ(r.top.size(), 4u);
  std::vector<int32_t> order(vocab);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.top[i].token_id, order[i]);
    EXPECT_NEAR(r.top[i].logprob, std::log(prob[static_cast<size_t>(order[i])]), 1e-5);
  }
  SamplingParams none = p;
  none.logprobs = 0;
  Sequence seq0 = MakeSeq(none);
  EXPECT_TRUE(s.Sample(logits, seq0).top.empty());
}

TEST(SamplerTest, ValidateNamesTheField) {
  SamplingParams p;
  p.temperature = -1.0f;
  EXPECT_NE(p.Validate(10).message().find("temperature"), std::string::npos);
  p = {};
  p.top_p = 0.0f;
  EXPECT_NE(p.Validate(10).message().find("top_p"), std::string::npos);
  p = {};
  p.top_p = NAN;
  EXPECT_FALSE(p.Validate(10).ok());
  p = {};
  p.stop_token_ids = {10};
  EXPECT_NE(p.Validate(10).message().find("stop token id 10"), std::string::npos);
  p = {};
  p.logprobs = 21;
  EXPECT_EQ(p.Validate(10).code(), StatusCode::kInvalidArgument);
  p = {};
  p.max_tokens = 0;
  EXPECT_NE(p.Validate(10).message().find("max_tokens"), std::string::npos);
  EXPECT_TRUE(SamplingParams{}.Validate(10).ok());
}

}  // namespace
}  // namespace kvs::engine
