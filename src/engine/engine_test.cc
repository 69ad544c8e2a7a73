#include "engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <map>
#include <set>
#include <thread>

#include "engine/engine_test_util.h"

namespace kvs::engine {
namespace {

using testing::Collected;
using testing::Drain;
using testing::MakeEngine;
using testing::MakePrompt;
using testing::ReferenceGenerate;
using testing::RunToCompletion;

FakeModelRunnerOptions Opts(int32_t num_blocks, int32_t block_size = 16) {
  FakeModelRunnerOptions o;
  o.vocab_size = 64;
  o.block_size = block_size;
  o.num_blocks = num_blocks;
  o.eos_token_id = 0;
  o.eos_logit_bias = 1.0f;
  return o;
}

EngineConfig Config(int32_t budget = 128, int32_t batch = 8) {
  EngineConfig c;
  c.max_num_batched_tokens = budget;
  c.max_batch_size = batch;
  c.max_context_length = 4096;
  c.seed = 5;
  return c;
}

std::shared_ptr<RequestStream> MustSubmit(Engine& e, Request r) {
  auto s = e.Submit(std::move(r));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : nullptr;
}

Request MakeRequest(std::vector<int32_t> prompt, int32_t max_tokens, bool greedy, uint64_t seed) {
  Request r;
  r.prompt_token_ids = std::move(prompt);
  r.sampling.max_tokens = max_tokens;
  if (greedy) {
    r.sampling.temperature = 0.0f;
  } else {
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.9f;
    r.sampling.seed = seed;
  }
  return r;
}

// A mixed workload: lengths, greedy and seeded sampling, penalties, ignore_eos.
std::vector<Request> Workload(int n, int32_t max_prompt, int32_t max_tokens) {
  std::vector<Request> w;
  for (int i = 0; i < n; ++i) {
    const int32_t len = 5 + static_cast<int32_t>((i * 97) % static_cast<int>(max_prompt - 5));
    Request r = MakeRequest(MakePrompt(len, static_cast<uint64_t>(i), 64), max_tokens - (i % 4) * 5, i % 2 == 0,
                            1000 + static_cast<uint64_t>(i));
    if (i % 3 == 0) r.sampling.ignore_eos = true;
    if (i % 5 == 1) r.sampling.repetition_penalty = 1.2f;
    if (i % 5 == 2) r.sampling.frequency_penalty = 0.5f;
    w.push_back(std::move(r));
  }
  return w;
}

TEST(EngineTest, OutputsMatchTheEngineFreeReference) {
  const FakeModelRunnerOptions opts = Opts(512);
  auto t = MakeEngine(opts, Config());
  const std::vector<Request> work = Workload(12, 400, 60);
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const Request& r : work) streams.push_back(MustSubmit(*t.engine, r));
  RunToCompletion(*t.engine);
  for (size_t i = 0; i < work.size(); ++i) {
    const Collected c = Drain(*streams[i]);
    const auto ref = ReferenceGenerate(work[i].prompt_token_ids, work[i].sampling, opts, {0}, 4096);
    EXPECT_EQ(c.tokens, ref.tokens) << "request " << i;
    EXPECT_EQ(c.last.finish_reason, ref.reason);
    EXPECT_EQ(c.num_finals, 1);
    EXPECT_EQ(c.last.num_prompt_tokens, static_cast<int32_t>(work[i].prompt_token_ids.size()));
    EXPECT_EQ(c.last.num_output_tokens,
              static_cast<int32_t>(ref.tokens.size()) + (ref.reason == FinishReason::kStop ? 1 : 0));
    if (ref.reason == FinishReason::kStop) {
      EXPECT_EQ(c.last.stop_token_id, 0);
    }
    EXPECT_GT(c.last.timings.e2e_s, 0.0);
    EXPECT_EQ(streams[i]->Next(std::chrono::milliseconds(0)).status().code(), StatusCode::kOutOfRange);
  }
  const EngineStats s = t.engine->GetStats();
  EXPECT_EQ(s.num_blocks_used, 0);
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  EXPECT_EQ(s.num_finished_stop + s.num_finished_length, 12);
  EXPECT_EQ(t.engine->TEST_CheckInvariants(), "");
}

TEST(EngineTest, SeededOutputDoesNotDependOnTheBatch) {
  const FakeModelRunnerOptions opts = Opts(512);
  Request x = MakeRequest(MakePrompt(50, 99, 64), 40, /*greedy=*/false, 1234);
  x.sampling.temperature = 1.0f;
  x.sampling.ignore_eos = true;
  std::vector<int32_t> alone;
  {
    auto t = MakeEngine(opts, Config());
    auto s = MustSubmit(*t.engine, x);
    RunToCompletion(*t.engine);
    alone = Drain(*s).tokens;
  }
  auto t = MakeEngine(opts, Config(/*budget=*/64, /*batch=*/6));
  std::vector<std::shared_ptr<RequestStream>> others;
  for (const Request& r : Workload(5, 200, 30)) others.push_back(MustSubmit(*t.engine, r));
  t.engine->Step();
  t.engine->Step();
  auto s = MustSubmit(*t.engine, x);
  for (const Request& r : Workload(4, 100, 20)) others.push_back(MustSubmit(*t.engine, r));
  RunToCompletion(*t.engine);
  EXPECT_EQ(Drain(*s).tokens, alone);
  EXPECT_EQ(alone, ReferenceGenerate(x.prompt_token_ids, x.sampling, opts, {0}, 4096).tokens);
  EXPECT_EQ(alone.size(), 40u);
}

// Outputs under heavy preemption (a tiny pool) equal those with a big pool.
TEST(EngineTest, TinyPoolPreemptionGivesIdenticalOutputs) {
  const std::vector<Request> work = Workload(16, 150, 120);
  const auto run = [&](int32_t num_blocks, bool caching, int64_t* preemptions) {
    EngineConfig c = Config(96, 8);
    c.enable_prefix_caching = caching;
    auto t = MakeEngine(Opts(num_blocks), c);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const Request& r : work) streams.push_back(MustSubmit(*t.engine, r));
    int32_t max_used_seen = 0;
    while (t.engine->Step()) {
      EXPECT_EQ(t.engine->TEST_CheckInvariants(), "");
      max_used_seen = std::max(max_used_seen, t.engine->GetStats().num_blocks_used);
    }
    // The peak is sampled inside the step (after scheduling), so it covers
    // every value seen between steps, stays within the pool, and outlives
    // the requests; forward passes took measurable time.
    const EngineStats end = t.engine->GetStats();
    EXPECT_GE(end.num_blocks_used_peak, max_used_seen);
    EXPECT_LE(end.num_blocks_used_peak, num_blocks);
    if (num_blocks < 100) {
      EXPECT_GE(end.num_blocks_used_peak, num_blocks - 2) << "a tiny pool fills up";
    }
    EXPECT_GT(end.forward_seconds, 0.0);
    EXPECT_GT(end.num_steps, 0);
    std::vector<std::vector<int32_t>> out;
    for (auto& s : streams) {
      const Collected c = Drain(*s);
      EXPECT_EQ(c.num_finals, 1);
      out.push_back(c.tokens);
    }
    *preemptions = t.engine->GetStats().num_preemptions;
    EXPECT_EQ(t.engine->GetStats().num_blocks_used, 0);
    return out;
  };
  int64_t big_preemptions = 0, tiny_preemptions = 0, tiny_nocache_preemptions = 0;
  const auto big = run(1024, true, &big_preemptions);
  const auto tiny = run(24, true, &tiny_preemptions);  // 384 tokens; one request needs up to 17 blocks
  const auto tiny_nocache = run(24, false, &tiny_nocache_preemptions);
  EXPECT_EQ(big_preemptions, 0);
  EXPECT_GT(tiny_preemptions, 5);
  EXPECT_GT(tiny_nocache_preemptions, 5);
  EXPECT_EQ(tiny, big);
  EXPECT_EQ(tiny_nocache, big);
}

// Blocks give their memory back as soon as they are free (the fake runner
// wipes them, so releasing a block anyone still reads breaks its chain
// check): outputs under preemption in a tiny pool stay those of a big pool.
TEST(EngineTest, ReleasingFreeKvBlocksKeepsOutputsIdentical) {
  const std::vector<Request> work = Workload(16, 150, 120);
  const auto run = [&](int32_t num_blocks, bool caching, double release_s, EngineStats* stats) {
    EngineConfig c = Config(96, 8);
    c.enable_prefix_caching = caching;
    c.kv_release_idle_s = release_s;
    auto t = MakeEngine(Opts(num_blocks), c);
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const Request& r : work) streams.push_back(MustSubmit(*t.engine, r));
    while (t.engine->Step()) {
      EXPECT_EQ(t.engine->TEST_CheckInvariants(), "");
    }
    t.engine->Step();  // an idle step releases what the last one freed
    std::vector<std::vector<int32_t>> out;
    for (auto& s : streams) {
      const Collected c = Drain(*s);
      EXPECT_EQ(c.num_finals, 1);
      EXPECT_NE(c.last.finish_reason, FinishReason::kError) << c.last.error.ToString();
      out.push_back(c.tokens);
    }
    *stats = t.engine->GetStats();
    EXPECT_EQ(stats->num_blocks_released, t.runner->num_blocks_released());
    return out;
  };
  EngineStats never, cached, uncached;
  const auto big = run(1024, true, -1.0, &never);
  EXPECT_EQ(never.num_blocks_released, 0);
  EXPECT_EQ(run(24, true, 0.0, &cached), big);
  EXPECT_GT(cached.num_blocks_released, 16);
  // What stays committed is the prefix cache.
  EXPECT_EQ(cached.kv_committed_bytes, cached.num_blocks_cached);
  EXPECT_EQ(run(24, false, 0.0, &uncached), big);
  EXPECT_GT(uncached.num_blocks_released, cached.num_blocks_released);
  EXPECT_EQ(uncached.kv_committed_bytes, 0);
}

// A started engine that goes idle wakes up to release its free blocks after
// kv_release_idle_s, without a new request.
TEST(EngineTest, IdleEngineReleasesFreeBlocksAfterTheDelay) {
  EngineConfig c = Config();
  c.enable_prefix_caching = false;
  c.kv_release_idle_s = 0.05;
  auto t = MakeEngine(Opts(256), c);
  ASSERT_TRUE(t.engine->Start().ok());
  auto s = MustSubmit(*t.engine, MakeRequest(MakePrompt(100, 1, 64), 20, true, 1));
  while (!s->Next(std::chrono::seconds(10))->finished()) {
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (t.engine->GetStats().kv_committed_bytes > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  const EngineStats st = t.engine->GetStats();
  EXPECT_EQ(st.kv_committed_bytes, 0);
  EXPECT_GE(st.num_blocks_released, 7);  // 119 positions in blocks of 16
  t.engine->Stop();
}

TEST(EngineTest, PrefixCacheComputesOnlyTheNewSuffix) {
  const FakeModelRunnerOptions opts = Opts(1024);
  auto t = MakeEngine(opts, Config(512, 8));
  const std::vector<int32_t> prefix = MakePrompt(2000, 1, 64);
  const auto with_suffix = [&](int32_t n, uint64_t salt) {
    std::vector<int32_t> p = prefix;
    const std::vector<int32_t> s = MakePrompt(n, salt, 64);
    p.insert(p.end(), s.begin(), s.end());
    return p;
  };
  Request a = MakeRequest(with_suffix(10, 2), 5, true, 0);
  a.sampling.ignore_eos = true;
  auto sa = MustSubmit(*t.engine, a);
  RunToCompletion(*t.engine);
  const Collected ca = Drain(*sa);
  EXPECT_EQ(ca.last.num_cached_tokens, 0);
  EXPECT_EQ(ca.last.num_computed_prompt_tokens, 2010);

  const int64_t computed_before = t.runner->num_tokens_computed();
  Request b = MakeRequest(with_suffix(37, 3), 5, true, 0);
  b.sampling.ignore_eos = true;
  auto sb = MustSubmit(*t.engine, b);
  RunToCompletion(*t.engine);
  const Collected cb = Drain(*sb);
  EXPECT_EQ(cb.last.num_cached_tokens, 2000);  // 125 full blocks of 16
  EXPECT_EQ(cb.last.num_computed_prompt_tokens, 37);
  EXPECT_EQ(t.runner->num_tokens_computed() - computed_before, 37 + 4) << "the suffix, then 4 decodes";
  EXPECT_EQ(cb.tokens, ReferenceGenerate(b.prompt_token_ids, b.sampling, opts, {0}, 4096).tokens);
  const EngineStats s = t.engine->GetStats();
  EXPECT_EQ(s.prefix_hit_tokens, 2000);
  EXPECT_EQ(s.prefix_query_tokens, 2010 + 2037);
  EXPECT_EQ(s.num_blocks_used, 0);
  EXPECT_GT(s.num_blocks_cached, 125);
  EXPECT_EQ(s.num_blocks_free + s.num_blocks_cached + s.num_blocks_used, s.num_blocks_total);
}

TEST(EngineTest, CacheSaltIsolatesTenants) {
  auto t = MakeEngine(Opts(256), Config());
  const std::vector<int32_t> prompt = MakePrompt(100, 4, 64);
  const auto cached = [&](const std::string& salt) {
    Request r = MakeRequest(prompt, 3, true, 0);
    r.cache_salt = salt;
    auto s = MustSubmit(*t.engine, r);
    RunToCompletion(*t.engine);
    return Drain(*s).last.num_cached_tokens;
  };
  EXPECT_EQ(cached("tenant-a"), 0);
  EXPECT_EQ(cached("tenant-a"), 96);
  EXPECT_EQ(cached("tenant-b"), 0);
  EXPECT_EQ(cached(""), 0);
  EXPECT_EQ(cached(""), 96);
  EXPECT_EQ(cached("tenant-b"), 96);
}

TEST(EngineTest, LongPromptIsChunkedAndEveryStepCarriesAllRunningDecodes) {
  const FakeModelRunnerOptions opts = [] {
    FakeModelRunnerOptions o = Opts(1024);
    o.eos_token_id = -1;  // decoders run to max_tokens
    return o;
  }();
  auto t = MakeEngine(opts, Config(/*budget=*/64, /*batch=*/8));
  std::vector<std::map<int64_t, size_t>> batches;  // seq_id -> tokens, per step
  t.runner->on_forward = [&](const ForwardBatch& b) {
    std::map<int64_t, size_t> m;
    for (const ForwardSeq& s : b.seqs) m[s.seq_id] = s.tokens.size();
    batches.push_back(m);
  };
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i) streams.push_back(MustSubmit(*t.engine, MakeRequest(MakePrompt(20, i, 64), 300, true, 0)));
  for (int i = 0; i < 3; ++i) t.engine->Step();
  streams.push_back(MustSubmit(*t.engine, MakeRequest(MakePrompt(3000, 9, 64), 5, true, 0)));
  RunToCompletion(*t.engine);
  int prefill_steps = 0;
  for (const auto& m : batches) {
    size_t tokens = 0;
    for (const auto& [id, n] : m) tokens += n;
    EXPECT_LE(tokens, 64u);
    const auto it = m.find(4);
    if (it == m.end() || it->second == 1) continue;
    ++prefill_steps;
    for (int64_t d = 0; d < 4; ++d) {
      ASSERT_EQ(m.count(d), 1u) << "decode of sequence " << d << " stalled by the long prefill";
      EXPECT_EQ(m.at(d), 1u);
    }
  }
  EXPECT_EQ(prefill_steps, (3000 + 59) / 60);
  for (auto& s : streams) EXPECT_EQ(Drain(*s).num_finals, 1);
}

TEST(EngineTest, RefusesImpossibleRequestsWithPreciseErrors) {
  EngineConfig c = Config();
  c.max_queued_requests = 2;
  auto t = MakeEngine(Opts(16), c);  // 16 blocks of 16 = 256 tokens
  Engine& e = *t.engine;
  const auto message = [&](Request r) { return e.Submit(std::move(r)).status(); };

  Status st = message(MakeRequest(MakePrompt(100, 1, 64), 4000, true, 0));
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("prompt (100 tokens) + max_tokens (4000) = 4100 tokens exceeds max_context_length (4096)"),
            std::string::npos)
      << st.message();

  st = message(MakeRequest(MakePrompt(200, 1, 64), 100, true, 0));
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);
  EXPECT_NE(st.message().find("needs up to 19 KV blocks of 16 tokens, but the whole KV pool has 16 blocks (256 tokens)"),
            std::string::npos)
      << st.message();
  // Streams are kept: a dropped stream would be cancelled as abandoned.
  std::vector<std::shared_ptr<RequestStream>> keep;
  keep.push_back(MustSubmit(e, MakeRequest(MakePrompt(200, 1, 64), 57, true, 0)));  // 256 positions fit exactly

  st = message(MakeRequest({}, 10, true, 0));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("empty"), std::string::npos);

  st = message(MakeRequest({1, 2, 64}, 10, true, 0));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("prompt token 64 at position 2 is outside the vocabulary [0, 64)"), std::string::npos);

  Request bad = MakeRequest({1}, 10, true, 0);
  bad.sampling.top_p = 1.5f;
  EXPECT_NE(message(bad).message().find("top_p"), std::string::npos);

  Request named = MakeRequest({1, 2}, 10, true, 0);
  named.request_id = "dup";
  keep.push_back(MustSubmit(e, named));
  st = message(named);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << "2 queued: the bound comes first";
  EXPECT_NE(st.message().find("max_queued_requests = 2"), std::string::npos);
  e.Step();  // the first is admitted, which frees a queue slot
  st = message(named);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'dup' is already in use"), std::string::npos);
  keep.push_back(MustSubmit(e, MakeRequest({1, 2}, 10, true, 0)));

  e.Stop();
  EXPECT_EQ(message(MakeRequest({1}, 1, true, 0)).code(), StatusCode::kUnavailable);
}

TEST(EngineTest, CancelIsVisibleExactlyOnceAndFreesBlocks) {
  EngineConfig c = Config(128, 1);  // one running at a time: the second waits
  auto t = MakeEngine(Opts(64), c);
  Request r = MakeRequest(MakePrompt(40, 1, 64), 100, true, 0);
  r.sampling.ignore_eos = true;
  r.request_id = "running";
  auto running = MustSubmit(*t.engine, r);
  r.request_id = "waiting";
  auto waiting = MustSubmit(*t.engine, r);
  for (int i = 0; i < 5; ++i) t.engine->Step();
  Collected cr;
  testing::TakeAvailable(*running, cr);
  EXPECT_EQ(cr.tokens.size(), 5u);
  EXPECT_GT(t.engine->GetStats().num_blocks_used, 0);

  EXPECT_TRUE(t.engine->Cancel("running").ok());
  EXPECT_TRUE(t.engine->Cancel("waiting").ok());
  EXPECT_TRUE(t.engine->Cancel("running").ok()) << "still live until the engine applies it";
  EXPECT_FALSE(t.engine->Step());
  EXPECT_EQ(t.engine->Cancel("running").code(), StatusCode::kNotFound);
  EXPECT_EQ(t.engine->Cancel("never").code(), StatusCode::kNotFound);

  testing::TakeAvailable(*running, cr);
  EXPECT_EQ(cr.num_finals, 1);
  EXPECT_EQ(cr.last.finish_reason, FinishReason::kCancelled);
  EXPECT_EQ(cr.tokens.size(), 5u);
  const Collected cw = Drain(*waiting);
  EXPECT_EQ(cw.num_finals, 1);
  EXPECT_EQ(cw.last.finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(cw.tokens.empty());
  EXPECT_EQ(running->Next(std::chrono::milliseconds(1)).status().code(), StatusCode::kOutOfRange);

  const EngineStats s = t.engine->GetStats();
  EXPECT_EQ(s.num_blocks_used, 0);
  EXPECT_EQ(s.num_finished_cancelled, 2);
  EXPECT_EQ(s.num_running + s.num_waiting, 0);
  EXPECT_EQ(t.engine->TEST_CheckInvariants(), "");
}

TEST(EngineTest, RunnerFailureEndsTheBatchWithAnErrorAndTheEngineGoesOn) {
  const FakeModelRunnerOptions opts = Opts(128);
  auto t = MakeEngine(opts, Config());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(MustSubmit(*t.engine, MakeRequest(MakePrompt(30, i, 64), 50, true, 0)));
  t.runner->fail_after_calls = 2;
  RunToCompletion(*t.engine);
  for (auto& s : streams) {
    const Collected c = Drain(*s);
    EXPECT_EQ(c.num_finals, 1);
    EXPECT_EQ(c.last.finish_reason, FinishReason::kError);
    EXPECT_NE(c.last.error.message().find("injected failure"), std::string::npos) << c.last.error.ToString();
  }
  EXPECT_EQ(t.engine->GetStats().num_blocks_used, 0);
  EXPECT_EQ(t.engine->TEST_CheckInvariants(), "");
  t.runner->fail_after_calls = -1;
  Request r = MakeRequest(MakePrompt(30, 0, 64), 20, true, 0);
  auto s = MustSubmit(*t.engine, r);
  RunToCompletion(*t.engine);
  EXPECT_EQ(Drain(*s).tokens, ReferenceGenerate(r.prompt_token_ids, r.sampling, opts, {0}, 4096).tokens);
}

TEST(EngineTest, AbandonedStreamIsCancelled) {
  auto t = MakeEngine(Opts(64), Config());
  {
    auto dropped = MustSubmit(*t.engine, MakeRequest(MakePrompt(30, 1, 64), 100, true, 0));
    t.engine->Step();
  }
  t.engine->Step();
  const EngineStats s = t.engine->GetStats();
  EXPECT_EQ(s.num_finished_cancelled, 1);
  EXPECT_EQ(s.num_blocks_used, 0);
}

TEST(EngineTest, StopEndsLiveRequestsWithAnError) {
  auto t = MakeEngine(Opts(64), Config());
  auto a = MustSubmit(*t.engine, MakeRequest(MakePrompt(30, 1, 64), 100, true, 0));
  t.engine->Step();
  auto b = MustSubmit(*t.engine, MakeRequest(MakePrompt(30, 2, 64), 100, true, 0));  // still in the inbox
  t.engine->Stop();
  for (auto* s : {a.get(), b.get()}) {
    const Collected c = Drain(*s);
    EXPECT_EQ(c.num_finals, 1);
    EXPECT_EQ(c.last.finish_reason, FinishReason::kError);
    EXPECT_EQ(c.last.error.code(), StatusCode::kUnavailable);
  }
  EXPECT_EQ(t.engine->GetStats().num_blocks_used, 0);
}

TEST(EngineTest, LogprobsComeWithTheirTopAlternatives) {
  const FakeModelRunnerOptions opts = Opts(64);
  auto t = MakeEngine(opts, Config());
  Request r = MakeRequest(MakePrompt(20, 1, 64), 6, true, 0);
  r.sampling.logprobs = 3;
  r.sampling.ignore_eos = true;
  auto s = MustSubmit(*t.engine, r);
  RunToCompletion(*t.engine);
  const Collected c = Drain(*s);
  ASSERT_EQ(c.tokens.size(), 6u);
  ASSERT_EQ(c.logprobs.size(), 6u);
  std::vector<int32_t> history = r.prompt_token_ids;
  std::vector<float> logits(64);
  for (size_t i = 0; i < 6; ++i) {
    FakeModelRunner::ReferenceLogits(history, opts, logits);
    double sum = 0;
    for (float l : logits) sum += std::exp(static_cast<double>(l));
    EXPECT_NEAR(c.logprobs[i].logprob, logits[static_cast<size_t>(c.tokens[i])] - std::log(sum), 1e-4);
    ASSERT_EQ(c.logprobs[i].top.size(), 3u);
    EXPECT_EQ(c.logprobs[i].top[0].token_id, c.tokens[i]) << "greedy: the sampled token is the most likely";
    EXPECT_GE(c.logprobs[i].top[0].logprob, c.logprobs[i].top[1].logprob);
    history.push_back(c.tokens[i]);
  }
}

TEST(EngineTest, ChunksMergeWhenTheConsumerIsSlow) {
  auto t = MakeEngine(Opts(64), Config());
  Request r = MakeRequest(MakePrompt(10, 1, 64), 8, true, 0);
  r.sampling.ignore_eos = true;
  auto s = MustSubmit(*t.engine, r);
  RunToCompletion(*t.engine);
  const Collected c = Drain(*s);
  EXPECT_EQ(c.num_chunks, 1);
  EXPECT_EQ(c.num_finals, 1);
  EXPECT_EQ(c.tokens.size(), 8u);
  EXPECT_EQ(c.last.token_times_s.size(), 8u);
  EXPECT_EQ(c.last.finish_reason, FinishReason::kLength);
  EXPECT_EQ(c.last.num_output_tokens, 8);
}

// Producers submit and cancel from several threads while the engine thread
// runs; consumers read every stream to its end.
TEST(EngineTest, ConcurrentSubmitAndCancel) {
  const FakeModelRunnerOptions opts = Opts(96);
  auto t = MakeEngine(opts, Config(64, 8));
  ASSERT_TRUE(t.engine->Start().ok());
  EXPECT_FALSE(t.engine->Start().ok());
  constexpr int kThreads = 4, kPerThread = 100;
  std::atomic<int> finals{0}, cancelled{0}, mismatches{0};
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) {
    threads.emplace_back([&, th] {
      std::mt19937_64 rng(static_cast<uint64_t>(th));
      std::vector<std::pair<Request, std::shared_ptr<RequestStream>>> mine;
      for (int i = 0; i < kPerThread; ++i) {
        Request r = MakeRequest(MakePrompt(5 + static_cast<int32_t>(rng() % 100), rng(), 64),
                                1 + static_cast<int32_t>(rng() % 40), rng() % 2 == 0, rng());
        r.request_id = fmt::format("t{}-{}", th, i);
        StatusOr<std::shared_ptr<RequestStream>> s = t.engine->Submit(r);
        while (!s.ok() && s.status().code() == StatusCode::kResourceExhausted) {
          std::this_thread::yield();
          s = t.engine->Submit(r);
        }
        ASSERT_TRUE(s.ok()) << s.status().ToString();
        if (rng() % 4 == 0) (void)t.engine->Cancel(r.request_id);
        mine.emplace_back(std::move(r), std::move(s).value());
        (void)t.engine->GetStats();
      }
      for (auto& [r, s] : mine) {
        std::vector<int32_t> tokens;
        while (true) {
          StatusOr<StreamChunk> c = s->Next(std::chrono::milliseconds(20000));
          ASSERT_TRUE(c.ok()) << c.status().ToString();
          tokens.insert(tokens.end(), c->token_ids.begin(), c->token_ids.end());
          if (!c->finished()) continue;
          ++finals;
          if (c->finish_reason == FinishReason::kCancelled) {
            ++cancelled;
          } else if (tokens != ReferenceGenerate(r.prompt_token_ids, r.sampling, opts, {0}, 4096).tokens) {
            ++mismatches;
          }
          break;
        }
        EXPECT_EQ(s->Next(std::chrono::milliseconds(0)).status().code(), StatusCode::kOutOfRange);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(finals.load(), kThreads * kPerThread);
  EXPECT_GT(cancelled.load(), 0);
  EXPECT_EQ(mismatches.load(), 0) << "unseeded greedy and seeded requests must match the reference";
  t.engine->Stop();
  const EngineStats s = t.engine->GetStats();
  EXPECT_EQ(s.num_blocks_used, 0);
  EXPECT_EQ(s.num_finished_stop + s.num_finished_length + s.num_finished_cancelled, kThreads * kPerThread);
  EXPECT_EQ(t.engine->TEST_CheckInvariants(), "");
}

// Stop() while producers submit and consumers read: every accepted request
// still ends exactly once, and Submit says Unavailable afterwards.
TEST(EngineTest, StopWhileBusyEndsEveryRequestOnce) {
  auto t = MakeEngine(Opts(96), Config(64, 8));
  ASSERT_TRUE(t.engine->Start().ok());
  std::atomic<int> accepted{0}, finals{0};
  std::atomic<bool> refused{false};
  std::vector<std::thread> threads;
  for (int th = 0; th < 3; ++th) {
    threads.emplace_back([&, th] {
      for (int i = 0; !refused.load(); ++i) {
        Request r = MakeRequest(MakePrompt(20, static_cast<uint64_t>(th * 1000 + i), 64), 30, true, 0);
        StatusOr<std::shared_ptr<RequestStream>> s = t.engine->Submit(r);
        if (!s.ok()) {
          if (s.status().code() == StatusCode::kUnavailable) refused = true;
          continue;
        }
        ++accepted;
        while (true) {
          StatusOr<StreamChunk> c = (*s)->Next(std::chrono::milliseconds(20000));
          ASSERT_TRUE(c.ok()) << c.status().ToString();
          if (c->finished()) break;
        }
        ++finals;
        EXPECT_EQ((*s)->Next(std::chrono::milliseconds(0)).status().code(), StatusCode::kOutOfRange);
      }
    });
  }
  while (accepted.load() < 20) std::this_thread::yield();
  t.engine->Stop();
  for (auto& th : threads) th.join();
  EXPECT_EQ(finals.load(), accepted.load());
  EXPECT_EQ(t.engine->GetStats().num_blocks_used, 0);
  EXPECT_EQ(t.engine->TEST_CheckInvariants(), "");
}

TEST(EngineTest, ConfigIsValidatedAgainstTheRunner) {
  EngineConfig c = Config();
  c.max_batch_size = 500;
  c.max_num_batched_tokens = 256;
  auto e = Engine::Create(c, std::make_unique<FakeModelRunner>(Opts(64)));
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("max_batch_size"), std::string::npos);
  c = Config();
  c.eos_token_ids = {64};
  e = Engine::Create(c, std::make_unique<FakeModelRunner>(Opts(64)));
  EXPECT_NE(e.status().message().find("eos token id 64"), std::string::npos);
}

// The consumer side without blocking: the ready signal fires when output
// arrives for a consumer that has taken everything (once per merged batch,
// and at once when output is already waiting), and a consumer that only
// reacts to it still receives every token and exactly one final chunk.
TEST(RequestStreamTest, ReadySignalFiresPerBatchAndAtRegistration) {
  RequestStream s("r");
  StreamChunk a;
  a.token_ids = {1};
  s.Push(a);  // before any listener: nothing to call
  int calls = 0;
  s.SetOnReady([&] { ++calls; });
  EXPECT_EQ(calls, 1);  // output was already waiting
  StreamChunk b;
  b.token_ids = {2};
  s.Push(b);  // merges into the pending chunk: no second signal
  EXPECT_EQ(calls, 1);
  auto c = s.Next(std::chrono::milliseconds(0));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->token_ids, (std::vector<int32_t>{1, 2}));
  StreamChunk fin;
  fin.finish_reason = FinishReason::kLength;
  s.Push(fin);
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(s.Next(std::chrono::milliseconds(0))->finished());
}

TEST(RequestStreamTest, ConsumerDrivenOnlyByTheReadySignal) {
  auto t = MakeEngine(Opts(256), Config());
  ASSERT_TRUE(t.engine->Start().ok());
  std::mutex mu;
  std::condition_variable cv;
  std::vector<int32_t> got;
  int finals = 0;
  Request r = MakeRequest(MakePrompt(20, 3, 64), 40, true, 0);
  r.sampling.ignore_eos = true;
  auto stream = MustSubmit(*t.engine, r);
  ASSERT_NE(stream, nullptr);
  stream->SetOnReady([&] {
    std::lock_guard<std::mutex> lock(mu);
    for (;;) {
      auto c = stream->Next(std::chrono::milliseconds(0));
      if (!c.ok()) break;
      got.insert(got.end(), c->token_ids.begin(), c->token_ids.end());
      if (c->finished()) ++finals;
    }
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return finals > 0; }));
  EXPECT_EQ(finals, 1);
  EXPECT_EQ(got.size(), 40u);
  lock.unlock();
  t.engine->Stop();
}

TEST(EngineTest, ValidateRequestIsTheOneCheck) {
  RequestLimits l;
  l.vocab_size = 64;
  l.max_context_length = 100;
  l.block_size = 16;
  l.num_blocks = 4;  // 64 positions: less than the context
  Request r = MakeRequest({1, 2, 3}, 10, true, 0);
  EXPECT_TRUE(ValidateRequest(r, l).ok());
  r.prompt_token_ids.push_back(64);
  EXPECT_EQ(ValidateRequest(r, l).code(), StatusCode::kInvalidArgument);
  r.prompt_token_ids.pop_back();
  r.sampling.max_tokens = 98;
  EXPECT_EQ(ValidateRequest(r, l).code(), StatusCode::kOutOfRange);  // context
  r.sampling.max_tokens = 70;
  const Status st = ValidateRequest(r, l);
  EXPECT_EQ(st.code(), StatusCode::kOutOfRange);  // the KV pool
  EXPECT_NE(st.message().find("KV blocks"), std::string::npos);
  r.sampling.max_tokens = 5;
  r.sampling.stop_token_ids = {99};
  EXPECT_NE(ValidateRequest(r, l).message().find("stop token id 99"), std::string::npos);
}

TEST(EngineTest, ValidatedRequestIsTrustedForItsLimits) {
  RequestLimits l;
  l.vocab_size = 64;
  l.max_context_length = 100;
  l.block_size = 16;
  l.num_blocks = 8;
  Request bad = MakeRequest({1, 2, 3}, 10, true, 0);
  bad.sampling.temperature = 2.5f;  // SamplingLimits: [0, 2]
  auto refused = ValidatedRequest::Validate(bad, l);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "'temperature' must be a number in [0, 2], got 2.5");
  auto v = ValidatedRequest::Validate(MakeRequest({1, 2, 3}, 10, true, 0), l);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->limits(), l);
  v->set_request_id("x");
  v->set_seed(7);
  EXPECT_EQ(v->request().request_id, "x");
  EXPECT_EQ(v->request().sampling.seed, 7u);
  EXPECT_EQ(std::move(*v).Release().prompt_token_ids.size(), 3u);
}

}  // namespace
}  // namespace kvs::engine
