// Thousands of random submits, cancels and refusals against a tiny KV pool
// (constant preemption) with shared prefixes and two cache salts. After every
// step the engine's invariants hold; in the end every accepted request ended
// exactly once, and every one that was not cancelled produced exactly the
// engine-free reference output. Also with a sliding-window KV group (the
// fake runner checks every window read), preempting for it too.
#include <gtest/gtest.h>

#include <random>

#include "engine/engine.h"
#include "engine/engine_test_util.h"

namespace kvs::engine {
namespace {

using testing::Collected;
using testing::MakeEngine;
using testing::MakePrompt;
using testing::ReferenceGenerate;

struct Tracked {
  Request request;
  std::shared_ptr<RequestStream> stream;
  Collected got;
};

void RunStress(bool windowed) {
  FakeModelRunnerOptions opts;
  if (windowed) {
    opts.window = 20;
    opts.num_window_blocks = 24;  // one sequence alone needs ceil((19 + 64) / 8) + 1 = 12
  }
  opts.vocab_size = 64;
  opts.block_size = 8;
  opts.num_blocks = 48;  // 384 tokens for up to 6 sequences of up to ~170: preemption all the time
  opts.eos_token_id = 0;
  opts.eos_logit_bias = 1.0f;
  EngineConfig config;
  config.max_num_batched_tokens = 64;
  config.max_batch_size = 6;
  config.max_context_length = 512;
  config.max_queued_requests = 40;
  config.seed = 1;
  auto t = MakeEngine(opts, config);
  Engine& engine = *t.engine;

  std::mt19937_64 rng(2024);
  const std::vector<std::vector<int32_t>> prefixes = {MakePrompt(40, 1, 64), MakePrompt(57, 2, 64),
                                                      MakePrompt(16, 3, 64)};
  std::vector<Tracked> tracked;
  std::vector<size_t> live;  // indices into tracked
  int refused_queue = 0, refused_size = 0;
  constexpr int kRequests = 3000;
  int64_t steps = 0;
  while (static_cast<int>(tracked.size()) < kRequests || engine.GetStats().num_running + engine.GetStats().num_waiting > 0) {
    if (static_cast<int>(tracked.size()) < kRequests) {
      for (int k = static_cast<int>(rng() % 3); k > 0; --k) {
        Request r;
        if (rng() % 4 != 0) r.prompt_token_ids = prefixes[rng() % prefixes.size()];
        const std::vector<int32_t> suffix = MakePrompt(1 + static_cast<int32_t>(rng() % 40), rng(), 64);
        r.prompt_token_ids.insert(r.prompt_token_ids.end(), suffix.begin(), suffix.end());
        r.sampling.max_tokens = 1 + static_cast<int32_t>(rng() % 60);
        if (rng() % 2 == 0) {
          r.sampling.temperature = 0.0f;
        } else {
          r.sampling.temperature = 0.9f;
          r.sampling.top_k = 20;
          r.sampling.seed = rng();
        }
        r.sampling.ignore_eos = rng() % 3 == 0;
        if (rng() % 3 == 0) r.cache_salt = "tenant";
        if (rng() % 50 == 0) r.sampling.max_tokens = 400;  // more than the pool holds: refused
        StatusOr<std::shared_ptr<RequestStream>> s = engine.Submit(r);
        if (!s.ok()) {
          if (s.status().code() == StatusCode::kResourceExhausted) {
            ++refused_queue;
          } else {
            ASSERT_EQ(s.status().code(), StatusCode::kOutOfRange) << s.status().ToString();
            ++refused_size;
          }
          continue;
        }
        live.push_back(tracked.size());
        tracked.push_back({std::move(r), std::move(s).value(), {}});
      }
    }
    if (!live.empty() && rng() % 8 == 0) {
      const Status st = engine.Cancel(tracked[live[rng() % live.size()]].stream->request_id());
      ASSERT_TRUE(st.ok() || st.code() == StatusCode::kNotFound);
    }
    engine.Step();
    ++steps;
    ASSERT_EQ(engine.TEST_CheckInvariants(), "") << "step " << steps;
    const EngineStats s = engine.GetStats();
    ASSERT_EQ(s.num_blocks_free + s.num_blocks_cached + s.num_blocks_used, s.num_blocks_total);
    ASSERT_LE(s.num_running, 6);
    for (size_t i = 0; i < live.size();) {
      Tracked& tr = tracked[live[i]];
      testing::TakeAvailable(*tr.stream, tr.got);
      if (tr.got.num_finals > 0) {
        live[i] = live.back();
        live.pop_back();
      } else {
        ++i;
      }
    }
    ASSERT_LT(steps, 1000000);
  }
  const EngineStats s = engine.GetStats();
  EXPECT_EQ(s.num_blocks_used, 0);
  EXPECT_GT(s.num_preemptions, 100);
  EXPECT_GT(s.prefix_hit_tokens, 10000);
  EXPECT_EQ(s.num_window_blocks_used, 0);
  EXPECT_GT(refused_size, 10);
  int cancelled = 0, checked = 0;
  for (Tracked& tr : tracked) {
    testing::TakeAvailable(*tr.stream, tr.got);
    ASSERT_EQ(tr.got.num_finals, 1) << tr.stream->request_id();
    if (tr.got.last.finish_reason == FinishReason::kCancelled) {
      ++cancelled;
      continue;
    }
    const auto ref = ReferenceGenerate(tr.request.prompt_token_ids, tr.request.sampling, opts, {0}, 512);
    ASSERT_EQ(tr.got.tokens, ref.tokens) << tr.stream->request_id();
    ASSERT_EQ(tr.got.last.finish_reason, ref.reason);
    ++checked;
  }
  EXPECT_GT(cancelled, 100);
  EXPECT_GT(checked, 1000);
  EXPECT_EQ(s.num_finished_cancelled, cancelled);
  EXPECT_EQ(s.num_finished_stop + s.num_finished_length, checked);
  std::printf("steps %lld, requests %zu (checked %d, cancelled %d), refused: queue %d size %d, preemptions %lld, "
              "prefix hit %lld / %lld tokens\n",
              static_cast<long long>(steps), tracked.size(), checked, cancelled, refused_queue, refused_size,
              static_cast<long long>(s.num_preemptions), static_cast<long long>(s.prefix_hit_tokens),
              static_cast<long long>(s.prefix_query_tokens));
}

TEST(EngineStressTest, RandomSubmitCancelPreemptKeepsInvariantsAndOutputs) { RunStress(false); }

TEST(EngineStressTest, RandomSubmitCancelPreemptWithWindowGroup) { RunStress(true); }

}  // namespace
}  // namespace kvs::engine
