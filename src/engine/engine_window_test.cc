// The engine over a runner with a sliding-window KV group (FakeModelRunner
// with `window`, which checks every window read against the full history):
// window blocks stay bounded per sequence while the global group grows,
// outputs match the reference, and a repeated prompt hits the prefix cache.
#include <gtest/gtest.h>

#include "engine/engine_test_util.h"

namespace kvs::engine::testing {
namespace window_test {

constexpr int32_t kBs = 4, kWindow = 10, kBatch = 4, kStepTokens = 16;

FakeModelRunnerOptions WindowOpts(int32_t num_window_blocks) {
  FakeModelRunnerOptions o;
  o.vocab_size = 64;
  o.block_size = kBs;
  o.num_blocks = 256;
  o.window = kWindow;
  o.num_window_blocks = num_window_blocks;
  return o;
}

EngineConfig WindowConfig() {
  EngineConfig c;
  c.max_num_batched_tokens = kStepTokens;
  c.max_batch_size = kBatch;
  c.max_context_length = 1024;
  c.enable_prefix_caching = true;
  c.kv_release_idle_s = 0;  // released window blocks read as unwritten: a wrong release fails a read
  c.seed = 5;
  return c;
}

Request Greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  Request r;
  r.prompt_token_ids = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.sampling.max_tokens = max_tokens;
  r.sampling.ignore_eos = true;
  return r;
}

TEST(EngineWindowTest, RefusesAWindowGroupTooSmallForOneSequence) {
  // One sequence needs ceil((10 - 1 + 16) / 4) + 1 = 8 window blocks.
  auto runner = std::make_unique<FakeModelRunner>(WindowOpts(7));
  EXPECT_EQ(Engine::Create(WindowConfig(), std::move(runner)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Engine::Create(WindowConfig(), std::make_unique<FakeModelRunner>(WindowOpts(8))).ok());
}

TEST(EngineWindowTest, WindowBlocksStayBoundedWhileGlobalOnesGrow) {
  const FakeModelRunnerOptions opts = WindowOpts(kBatch * ((kWindow + kBs - 1) / kBs + 2) + kStepTokens / kBs);
  auto t = MakeEngine(opts, WindowConfig());
  std::vector<Request> work;
  for (uint64_t i = 0; i < 3; ++i) work.push_back(Greedy(MakePrompt(22, i, 64), 90));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : work) streams.push_back(t.engine->Submit(r).value());
  const int32_t per_seq = (kWindow + kBs - 1) / kBs + 1;
  int32_t max_window_used = 0;
  while (t.engine->Step()) {
    ASSERT_EQ(t.engine->TEST_CheckInvariants(), "");
    const EngineStats s = t.engine->GetStats();
    ASSERT_LE(s.num_window_blocks_used, s.num_running * per_seq);
    max_window_used = std::max(max_window_used, s.num_window_blocks_used);
  }
  const EngineStats s = t.engine->GetStats();
  EXPECT_EQ(s.window, kWindow);
  EXPECT_GT(s.num_blocks_used_peak, 3 * 100 / kBs) << "the global group keeps every position";
  EXPECT_LE(max_window_used, 3 * per_seq);
  EXPECT_EQ(s.num_window_blocks_used, 0);
  EXPECT_GT(s.num_window_blocks_released, 0);
  for (size_t i = 0; i < work.size(); ++i) {
    const Collected c = Drain(*streams[i]);
    const Reference ref = ReferenceGenerate(work[i].prompt_token_ids, work[i].sampling, opts, {}, 1024);
    EXPECT_EQ(c.tokens, ref.tokens) << "request " << i;
    EXPECT_EQ(c.last.finish_reason, FinishReason::kLength);
  }

  // The same prompt again, alone: a prefix hit whose window blocks are cached.
  const Request p = Greedy(MakePrompt(22, 77, 64), 12);
  for (int round = 0; round < 2; ++round) {
    auto stream = t.engine->Submit(p).value();
    while (t.engine->Step()) ASSERT_EQ(t.engine->TEST_CheckInvariants(), "");
    const Collected c = Drain(*stream);
    EXPECT_EQ(c.tokens, ReferenceGenerate(p.prompt_token_ids, p.sampling, opts, {}, 1024).tokens);
    EXPECT_EQ(c.last.num_cached_tokens, round == 0 ? 0 : 20) << "round " << round;
  }
}

// A window group so small that sequences preempt each other for it: outputs
// still match the reference and the invariants hold at every step.
TEST(EngineWindowTest, TightWindowGroupPreemptsAndStaysCorrect) {
  const FakeModelRunnerOptions opts = WindowOpts(10);
  auto t = MakeEngine(opts, WindowConfig());
  std::vector<Request> work;
  for (uint64_t i = 0; i < 6; ++i) work.push_back(Greedy(MakePrompt(15 + static_cast<int32_t>(i) * 7, i % 3, 64), 30));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : work) streams.push_back(t.engine->Submit(r).value());
  while (t.engine->Step()) ASSERT_EQ(t.engine->TEST_CheckInvariants(), "");
  for (size_t i = 0; i < work.size(); ++i) {
    const Collected c = Drain(*streams[i]);
    EXPECT_EQ(c.tokens, ReferenceGenerate(work[i].prompt_token_ids, work[i].sampling, opts, {}, 1024).tokens)
        << "request " << i;
  }
  EXPECT_GT(t.engine->GetStats().num_preemptions, 0);
}

// EngineStats::max_admissible_tokens (the server's max_admissible_context
// before the context cap) counts the window group: while a running sequence
// leaves fewer window blocks than one sequence's worst case (8 here), it is
// what the available window blocks hold, else what the global ones hold.
TEST(EngineWindowTest, MaxAdmissibleTokensCountsTheWindowGroup) {
  auto t = MakeEngine(WindowOpts(8), WindowConfig());
  const int32_t per_seq = WindowBlocksPerSequence(kWindow, kStepTokens, kBs);
  ASSERT_EQ(per_seq, 8);
  EXPECT_EQ(t.engine->GetStats().max_admissible_tokens, 256 * kBs);
  auto stream = t.engine->Submit(Greedy(MakePrompt(22, 1, 64), 20)).value();
  int tight_steps = 0;
  while (t.engine->Step()) {
    const EngineStats s = t.engine->GetStats();
    const int64_t full = static_cast<int64_t>(s.num_blocks_free + s.num_blocks_cached) * kBs;
    const int32_t window = s.num_window_blocks_free + s.num_window_blocks_cached;
    if (window < per_seq) {
      ++tight_steps;
      ASSERT_EQ(s.max_admissible_tokens, std::min<int64_t>(full, window * kBs));
    } else {
      ASSERT_EQ(s.max_admissible_tokens, full);
    }
  }
  // Holding 3 of the 8 window blocks (its window plus the next token's) is
  // enough to make the window group the tight one.
  EXPECT_GT(tight_steps, 0);
  Drain(*stream);
  const EngineStats s = t.engine->GetStats();
  EXPECT_EQ(s.num_window_blocks_used, 0);
  EXPECT_EQ(s.max_admissible_tokens, 256 * kBs);
}

}  // namespace window_test
}  // namespace kvs::engine::testing
