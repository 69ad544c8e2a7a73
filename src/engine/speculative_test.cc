// Speculative decoding: the n-gram proposer, the adaptive control, the
// sampler's draft verification (distribution checked by counting), and the
// engine: output identical to decoding without speculation at temperature 0,
// under batching, prefix caching, preemption and stops.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/engine_test_util.h"
#include "engine/sampler.h"

namespace kvs::engine {
namespace {

using testing::Collected;
using testing::Drain;
using testing::MakeEngine;
using testing::MakePrompt;
using testing::ReferenceGenerate;
using testing::RunToCompletion;

TEST(ProposeNgramTest, TakesWhatFollowedTheMostRecentLongestMatch) {
  std::vector<int32_t> out;
  //                     0  1  2  3  4  5  6  7  8  9 10
  const std::vector<int32_t> t = {5, 6, 7, 8, 1, 6, 7, 9, 2, 6, 7};
  // Suffix [6, 7] occurs at 1 and 5; the most recent (5) is followed by 9, 2, 6.
  EXPECT_EQ(ProposeNgram(t, 2, 4, 3, &out), 3);
  EXPECT_EQ(out, (std::vector<int32_t>{9, 2, 6}));
  // A longer suffix wins over a more recent shorter one: [1, 6, 7] ... [x, 6, 7].
  out.clear();
  const std::vector<int32_t> u = {1, 6, 7, 3, 3, 2, 6, 7, 4, 4, 1, 6, 7};
  EXPECT_EQ(ProposeNgram(u, 2, 3, 2, &out), 2);
  EXPECT_EQ(out, (std::vector<int32_t>{3, 3}));
  // The continuation stops at the end of the sequence, and may run into the suffix.
  out.clear();
  const std::vector<int32_t> v = {4, 5, 4, 5, 4, 5};
  EXPECT_EQ(ProposeNgram(v, 2, 2, 8, &out), 2);  // match at 2: followed by 4, 5 (the suffix itself)
  EXPECT_EQ(out, (std::vector<int32_t>{4, 5}));
  // No match, or too short: nothing.
  out.clear();
  EXPECT_EQ(ProposeNgram(std::vector<int32_t>{1, 2, 3, 4}, 2, 4, 5, &out), 0);
  EXPECT_EQ(ProposeNgram(std::vector<int32_t>{1}, 1, 4, 5, &out), 0);
  EXPECT_EQ(ProposeNgram(v, 2, 2, 0, &out), 0);
  EXPECT_TRUE(out.empty());
}

TEST(SpecControlTest, GrowsOnFullAcceptanceShrinksAndPausesOnMisses) {
  SpecControl c;
  EXPECT_EQ(c.Budget(4), 4);
  c.Update(4, 4, 4);
  EXPECT_EQ(c.Budget(4), 4);  // capped by the config
  c.Update(4, 0, 4);
  EXPECT_EQ(c.Budget(4), 2);
  c.Update(2, 0, 4);  // second miss in a row: a pause of 4 steps
  for (int i = 0; i < 4; ++i) EXPECT_EQ(c.Budget(4), 0);
  EXPECT_EQ(c.Budget(4), 1);
  c.Update(1, 1, 4);
  EXPECT_EQ(c.Budget(4), 2);
  c.Update(2, 1, 4);  // partial: the accepted run plus one
  EXPECT_EQ(c.Budget(4), 2);
  c.Update(2, 2, 4);
  c.Update(3, 3, 4);
  EXPECT_EQ(c.Budget(4), 4);
  c.Update(4, 1, 4);
  EXPECT_EQ(c.Budget(4), 2);
}

TEST(SpeculativeConfigTest, ValidatesAndParses) {
  SpeculativeConfig c;
  EXPECT_TRUE(c.Validate().ok());  // off
  c.method = SpeculativeConfig::Method::kNgram;
  EXPECT_TRUE(c.Validate().ok());
  c.num_tokens = 0;
  EXPECT_NE(c.Validate().message().find("num_tokens"), std::string::npos);
  c.num_tokens = 4;
  c.ngram_min = 3;
  c.ngram_max = 2;
  EXPECT_NE(c.Validate().message().find("ngram_min"), std::string::npos);
  EXPECT_EQ(*ParseSpeculativeMethod("ngram"), SpeculativeConfig::Method::kNgram);
  EXPECT_EQ(*ParseSpeculativeMethod("off"), SpeculativeConfig::Method::kOff);
  EXPECT_FALSE(ParseSpeculativeMethod("eagle").ok());
}

// AcceptDraft's token is distributed as Sample's, whatever the draft: the
// frequencies over many draws match the softmax of the processed logits.
TEST(AcceptDraftTest, RejectionSamplingKeepsTheDistribution) {
  const int32_t vocab = 6;
  const std::vector<float> logits = {1.0f, 0.5f, -0.2f, 2.0f, 0.0f, -3.0f};
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 5;  // token 5 is cut
  Sequence seq(0, "r", {1, 2}, p);
  seq.rng.seed(11);
  // Reference probabilities: softmax(logits / T) over the top 5.
  std::vector<double> ref(vocab, 0.0);
  double z = 0;
  for (int32_t v = 0; v < 5; ++v) z += ref[static_cast<size_t>(v)] = std::exp(logits[static_cast<size_t>(v)] / 0.7);
  for (double& r : ref) r /= z;
  Sampler sampler(vocab);
  for (int32_t draft : {3, 2, 5}) {  // likely, unlikely, impossible
    const int n = 60000;
    std::vector<int> count(vocab, 0);
    int accepted = 0;
    for (int i = 0; i < n; ++i) {
      bool ok = false;
      const SampleResult r = sampler.AcceptDraft(logits, seq, draft, &ok);
      ++count[static_cast<size_t>(r.token_id)];
      accepted += ok;
      EXPECT_EQ(ok, r.token_id == draft);
    }
    for (int32_t v = 0; v < vocab; ++v) {
      const double expect = ref[static_cast<size_t>(v)] * n;
      const double sd = std::sqrt(expect * (1 - ref[static_cast<size_t>(v)])) + 1;
      EXPECT_NEAR(count[static_cast<size_t>(v)], expect, 5 * sd) << "draft " << draft << " token " << v;
    }
    EXPECT_NEAR(accepted, ref[static_cast<size_t>(draft)] * n, 5 * std::sqrt(n * 0.25) + 1) << "draft " << draft;
  }
  // Greedy: accepted iff the draft is the argmax, which is the result either way.
  SamplingParams g;
  g.temperature = 0.0f;
  Sequence gs(1, "g", {1}, g);
  bool ok = false;
  EXPECT_EQ(sampler.AcceptDraft(logits, gs, 3, &ok).token_id, 3);
  EXPECT_TRUE(ok);
  EXPECT_EQ(sampler.AcceptDraft(logits, gs, 0, &ok).token_id, 3);
  EXPECT_FALSE(ok);
}

FakeModelRunnerOptions CountingModel(int32_t num_blocks, float follow_bias) {
  FakeModelRunnerOptions o;
  o.vocab_size = 64;
  o.block_size = 4;
  o.num_blocks = num_blocks;
  o.eos_token_id = 0;
  o.eos_logit_bias = -2.0f;
  o.follow_bias = follow_bias;
  return o;
}

EngineConfig SpecConfig(bool on, int32_t budget = 64, int32_t batch = 8) {
  EngineConfig c;
  c.max_num_batched_tokens = budget;
  c.max_batch_size = batch;
  c.max_context_length = 1024;
  c.seed = 3;
  if (on) {
    c.speculative.method = SpeculativeConfig::Method::kNgram;
    c.speculative.num_tokens = 4;
    c.speculative.ngram_min = 1;
    c.speculative.ngram_max = 3;
  }
  return c;
}

// Prompts that count upwards (what the counting model continues), random
// ones, and mixes; greedy, with and without ignore_eos.
std::vector<Request> CopyWorkload(int n) {
  std::vector<Request> w;
  for (int i = 0; i < n; ++i) {
    Request r;
    std::vector<int32_t> prompt = MakePrompt(6 + i % 7, static_cast<uint64_t>(i), 64);
    if (i % 3 != 2) {
      for (int32_t k = 0; k < 70; ++k) prompt.push_back(1 + (k + i) % 63);  // a run the output will repeat
    }
    r.prompt_token_ids = prompt;
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 40 + 7 * (i % 5);
    r.sampling.ignore_eos = i % 4 == 0;
    w.push_back(std::move(r));
  }
  return w;
}

struct Outcome {
  std::vector<Collected> outputs;
  EngineStats stats;
};

Outcome RunAll(const FakeModelRunnerOptions& opts, EngineConfig config, std::vector<Request> work) {
  auto t = MakeEngine(opts, std::move(config));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (Request& r : work) {
    auto s = t.engine->Submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    streams.push_back(*s);
  }
  Outcome o;
  while (t.engine->Step()) {
    EXPECT_EQ(t.engine->TEST_CheckInvariants(), "");
  }
  for (auto& s : streams) o.outputs.push_back(Drain(*s));
  o.stats = t.engine->GetStats();
  return o;
}

TEST(EngineSpeculativeTest, GreedyOutputIsIdenticalWithDraftsAccepted) {
  for (const float follow : {10.0f, 0.0f}) {  // drafts mostly accepted / mostly rejected
    SCOPED_TRACE(follow);
    const FakeModelRunnerOptions opts = CountingModel(512, follow);
    const Outcome off = RunAll(opts, SpecConfig(false), CopyWorkload(12));
    const Outcome on = RunAll(opts, SpecConfig(true), CopyWorkload(12));
    ASSERT_EQ(off.outputs.size(), on.outputs.size());
    const std::vector<Request> work = CopyWorkload(12);
    for (size_t i = 0; i < off.outputs.size(); ++i) {
      EXPECT_EQ(on.outputs[i].num_finals, 1);
      EXPECT_EQ(on.outputs[i].tokens, off.outputs[i].tokens) << "request " << i;
      EXPECT_EQ(on.outputs[i].last.finish_reason, off.outputs[i].last.finish_reason) << "request " << i;
      EXPECT_EQ(on.outputs[i].last.num_output_tokens, off.outputs[i].last.num_output_tokens) << "request " << i;
      // And both equal the engine-free reference.
      const auto ref = ReferenceGenerate(work[i].prompt_token_ids, work[i].sampling, opts, {0}, 1024);
      EXPECT_EQ(on.outputs[i].tokens, ref.tokens) << "request " << i;
    }
    EXPECT_EQ(off.stats.num_draft_tokens, 0);
    EXPECT_GT(on.stats.num_draft_tokens, 0);
    EXPECT_EQ(on.stats.num_generated_tokens, off.stats.num_generated_tokens);
    if (follow > 0) {
      // Most drafts hold, and each accepted draft saved a forward pass.
      EXPECT_GT(on.stats.num_accepted_draft_tokens * 2, on.stats.num_draft_tokens);
      EXPECT_LT(on.stats.num_steps, off.stats.num_steps) << on.stats.num_accepted_draft_tokens << " of " << on.stats.num_draft_tokens;
    } else {
      EXPECT_LT(on.stats.num_accepted_draft_tokens * 4, on.stats.num_draft_tokens + 4);
    }
  }
}

TEST(EngineSpeculativeTest, TinyPoolPreemptionAndPrefixCachingKeepOutputsIdentical) {
  // 40 blocks of 4 for 12 requests of ~120 tokens: preemptions, and drafts
  // that find no free block are dropped rather than preempting anyone.
  const FakeModelRunnerOptions opts = CountingModel(40, 6.0f);
  const Outcome off = RunAll(opts, SpecConfig(false, 32, 6), CopyWorkload(12));
  const Outcome on = RunAll(opts, SpecConfig(true, 32, 6), CopyWorkload(12));
  for (size_t i = 0; i < off.outputs.size(); ++i) {
    EXPECT_EQ(on.outputs[i].tokens, off.outputs[i].tokens) << "request " << i;
  }
  EXPECT_GT(on.stats.num_preemptions, 0);
  EXPECT_GT(on.stats.num_accepted_draft_tokens, 0);
}

TEST(EngineSpeculativeTest, SampledOutputKeepsItsSeedDeterminismAndNeverExceedsMaxTokens) {
  const FakeModelRunnerOptions opts = CountingModel(512, 4.0f);
  std::vector<Request> work = CopyWorkload(8);
  for (size_t i = 0; i < work.size(); ++i) {
    work[i].sampling.temperature = 0.8f;
    work[i].sampling.seed = 100 + i;
  }
  const Outcome a = RunAll(opts, SpecConfig(true), work);
  const Outcome b = RunAll(opts, SpecConfig(true), work);
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    EXPECT_EQ(a.outputs[i].tokens, b.outputs[i].tokens) << "request " << i;
    EXPECT_LE(static_cast<int32_t>(a.outputs[i].tokens.size()), work[i].sampling.max_tokens);
    if (work[i].sampling.ignore_eos) {
      EXPECT_EQ(a.outputs[i].last.finish_reason, FinishReason::kLength);
      EXPECT_EQ(static_cast<int32_t>(a.outputs[i].tokens.size()), work[i].sampling.max_tokens);
    }
  }
  EXPECT_GT(a.stats.num_accepted_draft_tokens, 0);
}

TEST(EngineSpeculativeTest, PenaltiesGrammarAndLogprobsDecodeWithoutDrafts) {
  const FakeModelRunnerOptions opts = CountingModel(512, 6.0f);
  std::vector<Request> work = CopyWorkload(4);
  work[0].sampling.repetition_penalty = 1.3f;
  work[1].sampling.logprobs = 2;
  work[2].sampling.frequency_penalty = 0.4f;
  work[3].sampling.presence_penalty = 0.4f;
  const Outcome on = RunAll(opts, SpecConfig(true), work);
  const Outcome off = RunAll(opts, SpecConfig(false), work);
  EXPECT_EQ(on.stats.num_draft_tokens, 0);
  for (size_t i = 0; i < on.outputs.size(); ++i) EXPECT_EQ(on.outputs[i].tokens, off.outputs[i].tokens);
}

TEST(EngineSpeculativeTest, RefusedForSlidingWindowModels) {
  FakeModelRunnerOptions opts = CountingModel(64, 0.0f);
  opts.window = 8;
  opts.num_window_blocks = 64;
  auto e = Engine::Create(SpecConfig(true), std::make_unique<FakeModelRunner>(opts));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("sliding-window"), std::string::npos);
}

}  // namespace
}  // namespace kvs::engine
