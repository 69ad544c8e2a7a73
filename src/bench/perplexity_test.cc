// EvaluatePerplexity's windowing on a scripted runner (which windows, BOS,
// which positions are scored, forward calls split by --batch) and the
// estimate's arithmetic; the end-to-end check against the NumPy reference on
// a real model is tests/cli/perplexity_test.sh.
#include "bench/perplexity.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

namespace kvs::bench {
namespace {

// A runner whose logits at a token t favour t + 1 (mod vocab): logit log(3)
// there, 0 elsewhere, so p(t + 1) = 3 / (vocab + 2). Records every call.
class ScriptedRunner : public engine::ModelRunner {
 public:
  struct Call {
    std::vector<int32_t> tokens;
    int32_t start_pos;
    bool all_logits;
  };
  static constexpr int32_t kVocab = 8;

  int32_t vocab_size() const override { return kVocab; }
  int32_t block_size() const override { return 4; }
  int32_t num_blocks() const override { return 4; }
  Status Forward(const engine::ForwardBatch& batch, std::span<float> logits) override {
    EXPECT_EQ(batch.seqs.size(), 1u);
    const engine::ForwardSeq& s = batch.seqs[0];
    calls.push_back({{s.tokens.begin(), s.tokens.end()}, s.start_pos, s.all_logits});
    EXPECT_EQ(static_cast<int64_t>(logits.size()), batch.NumLogits() * kVocab);
    if (!s.all_logits) return Status::Ok();
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      for (int32_t v = 0; v < kVocab; ++v) {
        logits[i * kVocab + static_cast<size_t>(v)] = v == (s.tokens[i] + 1) % kVocab ? std::log(3.0f) : 0.0f;
      }
    }
    return Status::Ok();
  }
  std::vector<Call> calls;
};

TEST(PerplexityTest, WindowsBosScoredHalfAndBatches) {
  std::mt19937 rng(5);
  std::vector<int32_t> stream(53);  // 3 whole windows of 16 and 5 tokens left over
  for (int32_t& t : stream) t = static_cast<int32_t>(rng() % 3 == 0 ? 6 : rng() % 6);  // no 7: that is the BOS
  for (size_t i = 1; i < stream.size(); i += 2) stream[i] = (stream[i - 1] + 1) % 8;  // many predictable tokens
  PerplexityOptions o;
  o.ctx = 16;
  o.batch = 5;
  o.bos_id = 7;
  ScriptedRunner runner;
  std::vector<double> running;
  auto est = EvaluatePerplexity(runner, stream, o, [&](const PerplexityEstimate& e) { running.push_back(e.Ppl()); });
  ASSERT_TRUE(est.ok()) << est.status().ToString();

  // Each window: calls at 0, 5 (cut at ctx/2 = 8), 8, 13; logits only from 8 on.
  ASSERT_EQ(runner.calls.size(), 12u);
  const int32_t starts[] = {0, 5, 8, 13}, ends[] = {5, 8, 13, 16};
  double nll = 0.0;
  int64_t count = 0;
  for (int w = 0; w < 3; ++w) {
    for (int k = 0; k < 4; ++k) {
      const auto& c = runner.calls[static_cast<size_t>(w * 4 + k)];
      EXPECT_EQ(c.start_pos, starts[k]);
      EXPECT_EQ(static_cast<int32_t>(c.tokens.size()), ends[k] - starts[k]);
      EXPECT_EQ(c.all_logits, starts[k] >= 8);
      for (size_t i = 0; i < c.tokens.size(); ++i) {
        const size_t pos = static_cast<size_t>(starts[k]) + i;
        EXPECT_EQ(c.tokens[i], pos == 0 ? 7 : stream[static_cast<size_t>(w) * 16 + pos]) << w << " " << pos;
      }
    }
    // Positions 8..14 predict tokens 9..15 of the window.
    for (size_t p = 8; p < 15; ++p) {
      const size_t at = static_cast<size_t>(w) * 16 + p;
      nll += -std::log(stream[at + 1] == (stream[at] + 1) % 8 ? 0.3 : 0.1);
      ++count;
    }
    ASSERT_EQ(running.size(), 3u);
    EXPECT_NEAR(running[static_cast<size_t>(w)], std::exp(nll / static_cast<double>(count)), 1e-6);  // logits are float
  }
  EXPECT_EQ(est->count, 21);
  EXPECT_EQ(est->chunks, 3);
  EXPECT_NEAR(est->Ppl(), std::exp(nll / 21.0), 1e-6);  // logits are float
  // Two outcomes only (0.3 or 0.1), so the spread is known in closed form.
  const double mean = nll / 21.0;
  double var = 0.0;
  for (int w = 0; w < 3; ++w) {
    for (size_t p = 8; p < 15; ++p) {
      const size_t at = static_cast<size_t>(w) * 16 + p;
      const double v = -std::log(stream[at + 1] == (stream[at] + 1) % 8 ? 0.3 : 0.1) - mean;
      var += v * v;
    }
  }
  var /= 21.0;
  EXPECT_GT(var, 0.0);
  EXPECT_NEAR(est->PplError(), std::sqrt(var / 20.0) * est->Ppl(), 1e-6);  // logits are float

  // --chunks 2 evaluates the first two windows only; one call per half when the batch is large.
  o.max_chunks = 2;
  o.batch = 2048;
  ScriptedRunner r2;
  auto est2 = EvaluatePerplexity(r2, stream, o, nullptr);
  ASSERT_TRUE(est2.ok());
  EXPECT_EQ(est2->chunks, 2);
  EXPECT_EQ(est2->count, 14);
  EXPECT_EQ(r2.calls.size(), 4u);
}

TEST(PerplexityTest, TokenLogProbIsLogSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, -50.0f};
  const double z = std::exp(1.0) + std::exp(2.0) + std::exp(3.0) + std::exp(-50.0);
  EXPECT_NEAR(TokenLogProb(logits, 2), 3.0 - std::log(z), 1e-12);
  EXPECT_NEAR(TokenLogProb(logits, 3), -50.0 - std::log(z), 1e-6);  // logits are float
  // Large logits do not overflow.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(TokenLogProb(big, 0), std::log(0.5), 1e-12);
}

TEST(PerplexityTest, BadInputIsRejected) {
  PerplexityOptions o;
  o.ctx = 64;
  EXPECT_EQ(*PerplexityChunks(128, o, 2048), 2);
  EXPECT_EQ(*PerplexityChunks(200, o, 2048), 3);
  o.max_chunks = 1;
  EXPECT_EQ(*PerplexityChunks(200, o, 2048), 1);
  auto short_text = PerplexityChunks(127, o, 2048);
  ASSERT_FALSE(short_text.ok());
  EXPECT_NE(short_text.status().message().find("needs at least 128"), std::string::npos);
  EXPECT_FALSE(PerplexityChunks(1000, o, 32).ok());  // above the model's context
  o.ctx = 4;
  EXPECT_FALSE(PerplexityChunks(1000, o, 2048).ok());  // too few tokens scored per window
  o.ctx = 64;
  o.batch = 0;
  EXPECT_FALSE(PerplexityChunks(1000, o, 2048).ok());

  // A runner whose KV pool is smaller than a window is refused, not overrun.
  ScriptedRunner small;  // 16 positions
  o.batch = 16;
  o.ctx = 32;
  std::vector<int32_t> stream(64, 1);
  auto est = EvaluatePerplexity(small, stream, o, nullptr);
  ASSERT_FALSE(est.ok());
  EXPECT_TRUE(small.calls.empty());
}

}  // namespace
}  // namespace kvs::bench
