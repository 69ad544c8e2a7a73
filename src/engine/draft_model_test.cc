// Speculative decoding with a draft model: the engine's greedy output equals
// decoding without it (drafts accepted, drafts rejected, preemption, prefix
// hits); the draft reads only KV written for the same history (its fake
// runner checks every position it reads, so a catch-up that skips or
// misplaces a position, or trusts KV of an earlier admission, fails the
// step); a draft that never agrees costs little; the refusals name the
// mismatch.
#include "engine/draft_model.h"

#include <gtest/gtest.h>

#include "engine/engine_test_util.h"

namespace kvs::engine {
namespace draft_model_test {

using testing::Collected;
using testing::Drain;
using testing::MakePrompt;
using testing::ReferenceGenerate;

// A model that counts upwards when follow_bias is large (what the prompts
// below continue), so a draft that counts too is mostly right.
FakeModelRunnerOptions Model(int32_t num_blocks, float follow_bias, float eos_bias = -2.0f) {
  FakeModelRunnerOptions o;
  o.vocab_size = 64;
  o.block_size = 4;
  o.num_blocks = num_blocks;
  o.eos_token_id = 0;
  o.eos_logit_bias = eos_bias;
  o.follow_bias = follow_bias;
  return o;
}

EngineConfig Config(SpeculativeConfig::Method method, int32_t budget = 64, int32_t batch = 8) {
  EngineConfig c;
  c.max_num_batched_tokens = budget;
  c.max_batch_size = batch;
  c.max_context_length = 1024;
  c.seed = 3;
  c.eos_token_ids = {0};
  c.speculative.method = method;
  c.speculative.num_tokens = 4;
  return c;
}

// Prompts with a counting run (some), random ones; greedy; a few ignore EOS;
// the second half repeats the first half's prompts (prefix-cache hits).
std::vector<Request> Workload(int n) {
  std::vector<Request> w;
  for (int i = 0; i < n; ++i) {
    const int k = i % (n / 2 > 0 ? n / 2 : 1);
    Request r;
    std::vector<int32_t> prompt = MakePrompt(6 + k % 7, static_cast<uint64_t>(k), 64);
    if (k % 3 != 2) {
      for (int32_t t = 0; t < 37; ++t) prompt.push_back(1 + (t + k) % 63);
    }
    r.prompt_token_ids = prompt;
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 30 + 7 * (i % 5);
    r.sampling.ignore_eos = i % 4 == 0;
    w.push_back(std::move(r));
  }
  return w;
}

struct Outcome {
  std::vector<Collected> outputs;
  EngineStats stats;
  int64_t draft_tokens_computed = 0;  // by the draft's runner
  int64_t model_tokens_computed = 0;  // by the model's runner
  int64_t draft_forward_calls = 0;
  int64_t model_forward_calls = 0;
};

// Runs `work` to completion; with `draft` options, through a draft model.
Outcome RunWork(const FakeModelRunnerOptions& model, const FakeModelRunnerOptions* draft, EngineConfig config,
            std::vector<Request> work) {
  auto runner = std::make_unique<FakeModelRunner>(model);
  FakeModelRunner* model_runner = runner.get();
  std::unique_ptr<FakeModelRunner> draft_runner = draft ? std::make_unique<FakeModelRunner>(*draft) : nullptr;
  FakeModelRunner* draft_fake = draft_runner.get();
  auto engine = Engine::Create(std::move(config), std::move(runner), std::move(draft_runner));
  EXPECT_TRUE(engine.ok()) << engine.status().ToString();
  if (!engine.ok()) return {};
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (Request& r : work) {
    auto s = (*engine)->Submit(std::move(r));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (s.ok()) streams.push_back(*s);
  }
  Outcome o;
  while ((*engine)->Step()) EXPECT_EQ((*engine)->TEST_CheckInvariants(), "");
  for (auto& s : streams) o.outputs.push_back(Drain(*s));
  o.stats = (*engine)->GetStats();
  o.model_tokens_computed = model_runner->num_tokens_computed();
  o.model_forward_calls = model_runner->num_forward_calls();
  if (draft_fake) {
    o.draft_tokens_computed = draft_fake->num_tokens_computed();
    o.draft_forward_calls = draft_fake->num_forward_calls();
  }
  return o;
}

void ExpectSameOutputs(const Outcome& got, const Outcome& want, const std::vector<Request>& work,
                       const FakeModelRunnerOptions& model) {
  ASSERT_EQ(got.outputs.size(), want.outputs.size());
  for (size_t i = 0; i < got.outputs.size(); ++i) {
    EXPECT_EQ(got.outputs[i].num_finals, 1) << "request " << i;
    EXPECT_TRUE(got.outputs[i].last.error.ok()) << got.outputs[i].last.error.ToString();
    EXPECT_EQ(got.outputs[i].tokens, want.outputs[i].tokens) << "request " << i;
    EXPECT_EQ(got.outputs[i].last.finish_reason, want.outputs[i].last.finish_reason) << "request " << i;
    const auto ref = ReferenceGenerate(work[i].prompt_token_ids, work[i].sampling, model, {0}, 1024);
    EXPECT_EQ(got.outputs[i].tokens, ref.tokens) << "request " << i;
  }
}

TEST(DraftModelTest, GreedyOutputIsIdenticalWhetherDraftsHoldOrNot) {
  const FakeModelRunnerOptions model = Model(512, 10.0f);
  const std::vector<Request> work = Workload(12);
  const Outcome off = RunWork(model, nullptr, Config(SpeculativeConfig::Method::kOff), work);
  struct Case {
    const char* name;
    FakeModelRunnerOptions draft;
  };
  const Case cases[] = {
      {"the model itself", model},
      {"a model that also counts", Model(512, 8.0f, 0.0f)},
      {"a model that does not count", Model(512, 0.0f, 0.0f)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Outcome on = RunWork(model, &c.draft, Config(SpeculativeConfig::Method::kDraft), work);
    ExpectSameOutputs(on, off, work, model);
    EXPECT_GT(on.stats.num_draft_tokens, 0);
    EXPECT_EQ(on.stats.num_generated_tokens, off.stats.num_generated_tokens);
    EXPECT_GT(on.draft_tokens_computed, 0);
    EXPECT_EQ(on.stats.num_draft_model_tokens, on.draft_tokens_computed);
    EXPECT_GT(on.stats.draft_forward_seconds, 0.0);
    if (c.draft.follow_bias == 0.0f) {
      EXPECT_LT(on.stats.num_accepted_draft_tokens * 4, on.stats.num_draft_tokens + 4);
    } else {
      EXPECT_GT(on.stats.num_accepted_draft_tokens * 2, on.stats.num_draft_tokens);
      EXPECT_LT(on.stats.num_steps, off.stats.num_steps);
    }
    if (&c == &cases[0]) {
      // Its own greedy tokens: every draft holds.
      EXPECT_EQ(on.stats.num_accepted_draft_tokens, on.stats.num_draft_tokens);
    }
  }
}

TEST(DraftModelTest, ADraftThatNeverAgreesRunsInFewPasses) {
  // Long replies: drafting pauses after misses (for longer each time), and
  // a sequence that does not draft costs the draft nothing until it drafts
  // again, when one pass catches up every token since.
  const FakeModelRunnerOptions model = Model(512, 0.0f);
  const FakeModelRunnerOptions draft = Model(512, 20.0f);  // counts; the model does not
  std::vector<Request> work;
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.prompt_token_ids = MakePrompt(8, static_cast<uint64_t>(i), 64);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 300;
    r.sampling.ignore_eos = true;
    work.push_back(std::move(r));
  }
  const Outcome off = RunWork(model, nullptr, Config(SpeculativeConfig::Method::kOff), work);
  const Outcome on = RunWork(model, &draft, Config(SpeculativeConfig::Method::kDraft), work);
  ExpectSameOutputs(on, off, work, model);
  EXPECT_LT(on.stats.num_accepted_draft_tokens * 4, on.stats.num_draft_tokens + 4);
  EXPECT_LT(on.draft_forward_calls * 4, on.model_forward_calls)
      << on.draft_forward_calls << " draft passes beside " << on.model_forward_calls << " of the model";
  // Every position it read was written (the fake checks), so the catch-ups
  // covered the replies: more tokens than passes.
  EXPECT_GT(on.draft_tokens_computed, 3 * on.draft_forward_calls);
}

TEST(DraftModelTest, PreemptionAndPrefixHitsKeepTheOutput) {
  // 40 blocks of 4 for 12 requests of ~80 tokens: preemptions and
  // recomputes; the repeated prompts hit blocks both models wrote.
  const FakeModelRunnerOptions model = Model(40, 6.0f);
  const FakeModelRunnerOptions draft = Model(40, 6.0f, 0.0f);
  const std::vector<Request> work = Workload(12);
  const Outcome off = RunWork(model, nullptr, Config(SpeculativeConfig::Method::kOff, 32, 6), work);
  const Outcome on = RunWork(model, &draft, Config(SpeculativeConfig::Method::kDraft, 32, 6), work);
  ExpectSameOutputs(on, off, work, model);
  EXPECT_GT(on.stats.num_preemptions, 0);
  EXPECT_GT(on.stats.prefix_hit_tokens, 0);
  EXPECT_GT(on.stats.num_accepted_draft_tokens, 0);
}

TEST(DraftModelTest, SampledOutputIsSeedDeterministic) {
  const FakeModelRunnerOptions model = Model(512, 4.0f);
  const FakeModelRunnerOptions draft = Model(512, 4.0f, 0.0f);
  std::vector<Request> work = Workload(8);
  for (size_t i = 0; i < work.size(); ++i) {
    work[i].sampling.temperature = 0.8f;
    work[i].sampling.seed = 100 + i;
  }
  const Outcome a = RunWork(model, &draft, Config(SpeculativeConfig::Method::kDraft), work);
  const Outcome b = RunWork(model, &draft, Config(SpeculativeConfig::Method::kDraft), work);
  for (size_t i = 0; i < a.outputs.size(); ++i) {
    EXPECT_EQ(a.outputs[i].tokens, b.outputs[i].tokens) << "request " << i;
    EXPECT_LE(static_cast<int32_t>(a.outputs[i].tokens.size()), work[i].sampling.max_tokens);
  }
  EXPECT_GT(a.stats.num_accepted_draft_tokens, 0);
}

TEST(DraftModelTest, AFailingDraftEndsItsBatchWithAnError) {
  const FakeModelRunnerOptions model = Model(512, 10.0f);
  FakeModelRunnerOptions draft_opts = model;
  auto draft = std::make_unique<FakeModelRunner>(draft_opts);
  draft->fail_after_calls = 3;
  auto engine = Engine::Create(Config(SpeculativeConfig::Method::kDraft), std::make_unique<FakeModelRunner>(model),
                               std::move(draft));
  ASSERT_TRUE(engine.ok()) << engine.status().ToString();
  std::vector<Request> work = Workload(2);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (Request& r : work) streams.push_back(*(*engine)->Submit(std::move(r)));
  while ((*engine)->Step()) {
  }
  for (auto& s : streams) {
    const Collected c = Drain(*s);
    EXPECT_EQ(c.num_finals, 1);
    EXPECT_EQ(c.last.finish_reason, FinishReason::kError);
    EXPECT_NE(c.last.error.message().find("draft model"), std::string::npos) << c.last.error.ToString();
  }
}

TEST(DraftModelTest, RefusalsNameTheMismatch) {
  const FakeModelRunnerOptions model = Model(64, 0.0f);
  const auto refuse = [&](EngineConfig config, std::unique_ptr<ModelRunner> draft, const std::string& says) {
    auto e = Engine::Create(std::move(config), std::make_unique<FakeModelRunner>(model), std::move(draft));
    ASSERT_FALSE(e.ok()) << says;
    EXPECT_NE(e.status().message().find(says), std::string::npos) << e.status().ToString();
  };
  refuse(Config(SpeculativeConfig::Method::kDraft), nullptr, "needs a draft model");
  refuse(Config(SpeculativeConfig::Method::kNgram), std::make_unique<FakeModelRunner>(model),
         "speculative.method is not draft");
  FakeModelRunnerOptions other = model;
  other.vocab_size = 65;
  refuse(Config(SpeculativeConfig::Method::kDraft), std::make_unique<FakeModelRunner>(other), "vocabulary has 65");
  other = model;
  other.block_size = 8;
  refuse(Config(SpeculativeConfig::Method::kDraft), std::make_unique<FakeModelRunner>(other), "hold 8 tokens");
  other = model;
  other.num_blocks = 63;
  refuse(Config(SpeculativeConfig::Method::kDraft), std::make_unique<FakeModelRunner>(other), "63 blocks");
}

}  // namespace draft_model_test
}  // namespace kvs::engine
