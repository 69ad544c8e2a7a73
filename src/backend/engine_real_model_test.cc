// The serving engine on a real model (stories260K through the CPU backend):
// at temperature 0 every request's output is the same alone and batched with
// 15 others of mixed lengths, with and without prefix caching, and with
// preemption forced by a tiny KV pool (also releasing free blocks at once).
// Sliding-window models (random Gemma 3 and Mistral-style weights) give the
// same greedy output with their window KV group freeing blocks as without.
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "backend/load_engine.h"
#include "backend/cpu_runner.h"
#include "base/test_util.h"
#include "engine/engine.h"
#include "model/random_model.h"

namespace kvs::backend {
namespace {

struct EngineSetup {
  int num_blocks = 256;
  bool prefix_caching = true;
  int max_batch = 16;
  int chunk = 64;  // max_num_batched_tokens
  double release_s = -1.0;  // kv_release_idle_s
  int num_window_blocks = 0;  // > 0: sliding layers in a window KV group
};

std::unique_ptr<engine::Engine> MakeEngine(const std::string& path, const EngineSetup& s) {
  auto model = model::LlamaModel::Load(path);
  EXPECT_TRUE(model.ok());
  CpuRunnerOptions ro;
  ro.threads = 2;
  ro.num_blocks = s.num_blocks;
  ro.num_window_blocks = s.num_window_blocks;
  ro.kv_dtype = DType::kF32;
  ro.max_batch_tokens = s.chunk;
  auto runner = CpuRunner::Create(std::move(*model), ro);
  EXPECT_TRUE(runner.ok());
  engine::EngineConfig ec;
  ec.max_num_batched_tokens = s.chunk;
  ec.max_batch_size = s.max_batch;
  ec.max_context_length = 1024;
  ec.enable_prefix_caching = s.prefix_caching;
  ec.eos_token_ids = {};  // run every request to max_tokens
  ec.kv_release_idle_s = s.release_s;
  auto e = engine::Engine::Create(ec, std::move(*runner));
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return std::move(*e);
}

std::vector<std::vector<int32_t>> Prompts() {
  std::mt19937 rng(99);
  std::vector<std::vector<int32_t>> prompts;
  // A shared 100-token prefix for half of them, so prefix caching has work.
  std::vector<int32_t> shared = {1};
  for (int i = 0; i < 99; ++i) shared.push_back(3 + static_cast<int32_t>(rng() % 500));
  for (int r = 0; r < 16; ++r) {
    std::vector<int32_t> p = r % 2 ? shared : std::vector<int32_t>{1};
    const int extra = 3 + static_cast<int>(rng() % 150);
    for (int i = 0; i < extra; ++i) p.push_back(3 + static_cast<int32_t>(rng() % 500));
    prompts.push_back(p);
  }
  return prompts;
}

std::vector<int32_t> Collect(engine::RequestStream& s) {
  std::vector<int32_t> out;
  for (;;) {
    auto c = s.Next();
    EXPECT_TRUE(c.ok());
    out.insert(out.end(), c->token_ids.begin(), c->token_ids.end());
    if (c->finished()) {
      EXPECT_EQ(c->finish_reason, engine::FinishReason::kLength) << c->error.ToString();
      return out;
    }
  }
}

std::vector<std::vector<int32_t>> RunAll(const std::string& path, const EngineSetup& s, bool one_at_a_time,
                                         int64_t* preemptions = nullptr) {
  auto e = MakeEngine(path, s);
  const auto prompts = Prompts();
  std::vector<std::vector<int32_t>> outs(prompts.size());
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (size_t i = 0; i < prompts.size(); ++i) {
    engine::Request r;
    r.prompt_token_ids = prompts[i];
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 24;
    auto st = e->Submit(r);
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (one_at_a_time) {
      while (e->Step()) {}
      outs[i] = Collect(**st);
    } else {
      streams.push_back(*st);
    }
  }
  if (!one_at_a_time) {
    while (e->Step()) {}
    for (size_t i = 0; i < streams.size(); ++i) outs[i] = Collect(*streams[i]);
  }
  EXPECT_EQ(e->TEST_CheckInvariants(), "");
  if (preemptions) *preemptions = e->GetStats().num_preemptions;
  return outs;
}

TEST(EngineRealModelTest, BatchedOutputEqualsAloneWithAndWithoutPrefixCacheAndUnderPreemption) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  EngineSetup alone_setup;
  alone_setup.prefix_caching = false;
  const auto alone = RunAll(path, alone_setup, true);
  for (const auto& o : alone) ASSERT_EQ(o.size(), 24u);

  EngineSetup batched;  // prefix caching on (the default)
  EXPECT_EQ(RunAll(path, batched, false), alone) << "batched, prefix caching on";
  batched.prefix_caching = false;
  EXPECT_EQ(RunAll(path, batched, false), alone) << "batched, prefix caching off";

  EngineSetup tiny;  // 30 blocks of 16 = 480 slots for 16 requests of up to ~270 tokens
  tiny.num_blocks = 30;
  int64_t preemptions = 0;
  EXPECT_EQ(RunAll(path, tiny, false, &preemptions), alone) << "tiny pool";
  EXPECT_GT(preemptions, 0) << "the tiny pool was meant to force preemption";
  // Blocks returned to the system the moment they are free (madvise): the
  // reused blocks read back as zeros before being rewritten.
  tiny.release_s = 0.0;
  EXPECT_EQ(RunAll(path, tiny, false), alone) << "tiny pool, blocks released when free";
}

struct WindowRun {
  std::vector<std::vector<int32_t>> outs;  // per request, then the repeat of request 0
  int32_t repeat_cached_tokens = 0;
  engine::EngineStats stats;
  int32_t max_window_blocks_over_bound = 0;  // steps where a sequence held more than its window's blocks
};

// Four 70-token prompts (sharing 40 tokens) generating 60 tokens each, then
// the first again twice (a prefix hit), on a model with a 16-token window.
WindowRun RunWindowed(const std::string& path, const EngineSetup& s) {
  auto e = MakeEngine(path, s);
  std::mt19937 rng(5);
  std::vector<int32_t> shared;
  for (int i = 0; i < 40; ++i) shared.push_back(3 + static_cast<int32_t>(rng() % 250));
  std::vector<engine::Request> work;
  for (int r = 0; r < 4; ++r) {
    engine::Request q;
    q.prompt_token_ids = shared;
    for (int i = 0; i < 30; ++i) q.prompt_token_ids.push_back(3 + static_cast<int32_t>(rng() % 250));
    q.sampling.temperature = 0.0f;
    q.sampling.max_tokens = 60;
    work.push_back(q);
  }
  WindowRun run;
  std::vector<std::shared_ptr<engine::RequestStream>> streams;
  for (const engine::Request& q : work) streams.push_back(*e->Submit(q));
  while (e->Step()) {
    EXPECT_EQ(e->TEST_CheckInvariants(), "");
    const engine::EngineStats st = e->GetStats();
    // After a step a sequence holds positions (c - 16, c): at most 2 blocks of 16.
    run.max_window_blocks_over_bound += st.num_window_blocks_used > 2 * st.num_running;
  }
  for (auto& st : streams) run.outs.push_back(Collect(*st));
  // Twice: the window blocks of the first run may have been evicted (the
  // repeat then recomputes and publishes them); the second must hit.
  for (int round = 0; round < 2; ++round) {
    const int64_t hits_before = e->GetStats().prefix_hit_tokens;
    auto repeat = *e->Submit(work[0]);
    while (e->Step()) EXPECT_EQ(e->TEST_CheckInvariants(), "");
    run.outs.push_back(Collect(*repeat));
    run.repeat_cached_tokens = static_cast<int32_t>(e->GetStats().prefix_hit_tokens - hits_before);
  }
  run.stats = e->GetStats();
  return run;
}

model::RandomModelSpec SlidingSpec(const char* arch) {
  model::RandomModelSpec spec = model::SmallTestSpec(arch);
  spec.n_layers = 3;
  spec.sliding_window = 16;
  spec.swa_pattern = std::string(arch) == "gemma3" ? 3 : 0;  // 2 of 3 sliding; Mistral-style: all
  spec.tied = std::string(arch) != "llama";
  return spec;
}

// The one engine assembly, LoadEngine (the memory plan sizes both groups) on a model
// with sliding layers: its plan passes the engine's check and requests run.
TEST(EngineRealModelTest, CpuEngineGivesSlidingLayersAWindowGroup) {
  for (const char* arch : {"gemma3", "llama"}) {
    SCOPED_TRACE(arch);
    auto dir = kvs::testing::TempDir(std::string("swa_cpu_engine_") + arch);
    const std::string path = (dir / "m.gguf").string();
    ASSERT_TRUE(model::WriteRandomModel(SlidingSpec(arch), path, "").ok());
    EngineSpec o;
    o.model_path = path;
    o.model_dtype = "f32";     // as stored, as LlamaModel::Load(path) reads it
    o.load_tokenizer = false;  // no EOS: every request runs to max_tokens
    o.threads = 2;
    o.context = 256;
    o.sequences = 2;
    o.memory_limit_bytes = uint64_t{1} << 30;
    o.engine.max_num_batched_tokens = 64;
    o.engine.max_batch_size = 4;
    auto cpu = LoadEngine(o);
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    EXPECT_EQ(cpu->plan.window, 16);
    EXPECT_EQ(cpu->plan.num_window_blocks, 4 * (1 + 2) + 64 / 16);
    EXPECT_NE(cpu->plan.Describe(DType::kF16).find("16 sliding-window blocks"), std::string::npos);
    const engine::EngineStats s = cpu->engine->GetStats();
    EXPECT_EQ(s.window, 16);
    EXPECT_EQ(s.num_window_blocks_total, 16);
    EXPECT_EQ(s.num_blocks_total, cpu->plan.num_kv_blocks);
    engine::Request r;
    for (int i = 0; i < 100; ++i) r.prompt_token_ids.push_back(3 + i);
    r.sampling.temperature = 0.0f;
    r.sampling.max_tokens = 20;
    auto stream = cpu->engine->Submit(r);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    while (cpu->engine->Step()) {}
    EXPECT_EQ(Collect(**stream).size(), 20u);
    EXPECT_EQ(cpu->engine->TEST_CheckInvariants(), "");
  }
}

TEST(EngineRealModelTest, SlidingWindowGroupFreesBlocksAndKeepsGreedyOutput) {
  for (const char* arch : {"gemma3", "llama"}) {
    SCOPED_TRACE(arch);
    auto dir = kvs::testing::TempDir(std::string("swa_engine_") + arch);
    const std::string path = (dir / "m.gguf").string();
    ASSERT_TRUE(model::WriteRandomModel(SlidingSpec(arch), path, "").ok());
    EngineSetup plain;
    plain.max_batch = 4;
    const WindowRun reference = RunWindowed(path, plain);
    EXPECT_EQ(reference.stats.window, 0);
    EngineSetup windowed = plain;
    windowed.num_window_blocks = 4 * 3 + 64 / 16;  // max_batch * (ceil(15 / 16) + 2) + chunk / 16
    windowed.release_s = 0.0;
    const WindowRun got = RunWindowed(path, windowed);
    EXPECT_EQ(got.outs, reference.outs);
    EXPECT_EQ(got.stats.window, 16);
    EXPECT_EQ(got.max_window_blocks_over_bound, 0);
    EXPECT_GT(got.stats.num_blocks_used_peak, 4 * 120 / 16 - 8) << "the global group keeps every position";
    EXPECT_EQ(got.repeat_cached_tokens, 64) << "69 prompt tokens: 4 blocks, and block 3's window block";
    EXPECT_EQ(got.stats.num_window_blocks_used, 0);
  }
}

}  // namespace
}  // namespace kvs::backend
