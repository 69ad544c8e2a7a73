// The device seam: LoadEngine with device "cpu" on stories260K generates
// the greedy tokens the engine gave before the seam existed (recorded from
// the CreateCpuEngine assembly at main b4c648a) and the same as an engine
// assembled by hand over a CpuRunner (the independent path of
// engine_real_model_test); an unknown device is refused, naming the
// accepted ones, before the file is read, and so is a file whose hash
// is not the expected one. Skips when ../shared is absent.
#include "backend/load_engine.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "backend/cpu_runner.h"
#include "backend/tensor_parallel.h"
#include "base/test_util.h"
#include "base/testing/thread_collective.h"
#include "engine/engine.h"
#include "model/random_model.h"

namespace kvs::backend {
namespace {

constexpr char kPrompt[] = "Once upon a time, there was a little";
// Encode(kPrompt, add_special) and 32 greedy tokens, ignore_eos, recorded
// before the seam (context 256, 2 threads, F16 KV, batches of 64).
const std::vector<int32_t> kPromptTokens = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
const std::vector<int32_t> kRecorded = {298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411,
                                        322, 265, 282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266};

std::vector<int32_t> Greedy(engine::Engine& e, const std::vector<int32_t>& prompt) {
  engine::Request r;
  r.prompt_token_ids = prompt;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = static_cast<int32_t>(kRecorded.size());
  r.sampling.ignore_eos = true;
  auto s = e.Submit(std::move(r));
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  std::vector<int32_t> out;
  for (;;) {
    auto c = (*s)->Next();
    EXPECT_TRUE(c.ok());
    if (!c.ok()) return out;
    out.insert(out.end(), c->token_ids.begin(), c->token_ids.end());
    if (c->finished()) return out;
  }
}

EngineSpec Spec(const std::string& path) {
  EngineSpec spec;
  spec.model_path = path;
  spec.threads = 2;
  spec.context = 256;
  spec.sequences = 4;
  spec.engine.max_num_batched_tokens = 64;
  spec.engine.max_batch_size = 4;
  return spec;
}

TEST(LoadEngineTest, CpuDeviceGeneratesTheRecordedTokens) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  EngineSpec spec = Spec(path);
  spec.load_chat = true;
  auto loaded = LoadEngine(spec);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_NE(loaded->engine, nullptr);
  EXPECT_EQ(loaded->weights, nullptr) << "the runner owns the weights";
  EXPECT_EQ(loaded->model.arch, "llama");
  EXPECT_EQ(loaded->plan.context, 256);
  EXPECT_EQ(loaded->plan.num_kv_blocks, 64);
  EXPECT_EQ(loaded->threads, 2);
  ASSERT_NE(loaded->tokenizer, nullptr);
  ASSERT_NE(loaded->chat_template, nullptr);
  EXPECT_TRUE(loaded->chat_template_is_fallback) << "stories260K has no chat template: ChatML";
  EXPECT_NE(loaded->grammar_vocab, nullptr) << loaded->grammar_vocab_status.ToString();
  const std::vector<int32_t> prompt = loaded->tokenizer->Encode(kPrompt, /*add_special=*/true, /*parse_special=*/false);
  EXPECT_EQ(prompt, kPromptTokens);
  ASSERT_TRUE(loaded->engine->Start().ok());
  EXPECT_EQ(Greedy(*loaded->engine, prompt), kRecorded);
  loaded->engine->Stop();
}

// The same tokens from an engine assembled by hand over a CpuRunner with
// the pool LoadEngine planned: the seam adds nothing to what is computed.
TEST(LoadEngineTest, MatchesAHandAssembledCpuEngine) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  EngineSpec spec = Spec(path);
  spec.assemble_engine = false;
  auto loaded = LoadEngine(spec);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_NE(loaded->weights, nullptr);
  CpuRunnerOptions ro;
  ro.threads = 2;
  ro.num_blocks = 64;
  ro.kv_dtype = DType::kF16;
  ro.max_batch_tokens = 64;
  auto runner = CpuRunner::Create(std::move(loaded->weights), ro);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  engine::EngineConfig ec;
  ec.max_num_batched_tokens = 64;
  ec.max_batch_size = 4;
  ec.max_context_length = 256;
  auto e = engine::Engine::Create(ec, std::move(*runner));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  ASSERT_TRUE((*e)->Start().ok());
  EXPECT_EQ(Greedy(**e, kPromptTokens), kRecorded);
  (*e)->Stop();
}

// assemble_engine = false, then MakeRunner: the tools' path (perplexity,
// bench --offline) gets the spec's device with the geometry it asks for.
TEST(LoadEngineTest, MakeRunnerGivesTheRequestedGeometry) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  EngineSpec spec = Spec(path);
  spec.assemble_engine = false;
  spec.load_tokenizer = false;
  auto loaded = LoadEngine(spec);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->tokenizer, nullptr);
  RunnerOptions ro;
  ro.threads = 1;
  ro.num_blocks = 5;
  ro.max_batch_tokens = 16;
  ASSERT_TRUE(MakeRunner(spec, ro, &*loaded).ok());
  ASSERT_NE(loaded->runner, nullptr);
  EXPECT_EQ(loaded->runner->num_blocks(), 5);
  EXPECT_EQ(loaded->runner->vocab_size(), loaded->model.vocab);
  const Status again = AssembleEngine(spec, &*loaded);
  EXPECT_EQ(again.code(), StatusCode::kFailedPrecondition) << "the weights were taken";
}

TEST(LoadEngineTest, AWrongHashIsRefusedBeforeLoading) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  EngineSpec spec = Spec(path);
  spec.sha256 = std::string(64, '0');
  auto loaded = LoadEngine(spec);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(loaded.status().message().find("the expected SHA-256 is 0000"), std::string::npos)
      << loaded.status().message();
}

TEST(LoadEngineTest, UnknownDeviceIsRefusedNamingTheAcceptedOnes) {
  EngineSpec spec;
  spec.model_path = "/nonexistent/model.gguf";  // never opened: the device is checked first
  spec.device = "cuda";
  auto loaded = LoadEngine(spec);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(loaded.status().message(), "device: 'cuda' is not available in this build; accepted: cpu");
  ASSERT_FALSE(RunnerFactories().empty());
  EXPECT_EQ(RunnerFactories().front().device, "cpu");
  EXPECT_TRUE(FindRunnerFactory("cpu").ok());
}

// Ranks 1..n-1 of a thread group running the worker loop on `path`, as
// the other processes of `mpirun` would; Finish() (or the destructor) has
// rank 0 end them and checks that each ended cleanly.
class WorkerRanks {
 public:
  WorkerRanks(testing::ThreadGroup& group, int n, const std::string& path)
      : group_(group), status_(static_cast<size_t>(n)) {
    for (int r = 1; r < n; ++r) {
      threads_.emplace_back([this, r, path] { status_[static_cast<size_t>(r)] = RunTensorParallelWorker(group_.member(r), path, 1); });
    }
  }
  ~WorkerRanks() { Finish(); }
  void Finish() {
    if (threads_.empty()) return;
    ShutdownTensorParallelWorkers(group_.member(0));
    for (std::thread& t : threads_) t.join();
    threads_.clear();
    for (size_t r = 1; r < status_.size(); ++r) EXPECT_TRUE(status_[r].ok()) << "rank " << r << ": " << status_[r].ToString();
  }

 private:
  testing::ThreadGroup& group_;
  std::vector<Status> status_;
  std::vector<std::thread> threads_;
};

// Rank 0's spec of a tp x pp layout over `group` (one thread a rank).
EngineSpec RankZeroSpec(const std::string& path, testing::ThreadGroup& group, int tp, int pp) {
  EngineSpec spec = Spec(path);
  spec.threads = 1;
  spec.group = &group.member(0);
  spec.tensor_parallel = tp;
  spec.pipeline_parallel = pp;
  return spec;
}

// Tensor and pipeline parallel (tensor_parallel.h) with the ranks as
// threads: rank 0's engine over its shard drives the workers' loops, and
// every layout (2 tensor ranks; 2 pipeline stages; 2 x 2) generates the
// recorded tokens; the engine can be assembled again (a reload) before the
// workers are shut down.
TEST(LoadEngineTest, TensorAndPipelineParallelRanksGenerateTheRecordedTokens) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  for (const auto& [tp, pp] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    SCOPED_TRACE(::testing::Message() << "tensor " << tp << " x pipeline " << pp);
    const int n = tp * pp;
    testing::ThreadGroup group(n);
    WorkerRanks workers(group, n, path);
    for (int round = 0; round < 2; ++round) {
      EngineSpec spec = RankZeroSpec(path, group, tp, pp);
      auto loaded = LoadEngine(spec);
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      EXPECT_EQ(loaded->model.n_kv_heads, 4 / tp) << "rank 0 holds its share of the 4 KV heads";
      EXPECT_EQ(loaded->model.n_layers, pp == 1 ? 5 : 3) << "stage 0 holds 3 of the 5 layers";
      ASSERT_TRUE(loaded->engine->Start().ok());
      EXPECT_EQ(Greedy(*loaded->engine, kPromptTokens), kRecorded) << "round " << round;
      loaded->engine->Stop();
    }
    workers.Finish();
  }
}

// The disk KV tier under tensor and pipeline parallel: rank 0's store
// keeps whole blocks (every rank's part, gathered in rank order), and an
// engine assembled again over the same directory restores them into every
// rank (each takes its part) and generates what one process generates;
// layouts sharing the directory never restore each other's blocks.
TEST(LoadEngineTest, TheDiskTierKeepsWholeBlocksAcrossRanks) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  std::vector<int32_t> prompt;  // 50 tokens: 3 full blocks of 16
  while (prompt.size() < 50) prompt.insert(prompt.end(), kPromptTokens.begin(), kPromptTokens.end());
  prompt.resize(50);
  std::vector<int32_t> want;
  {
    auto one = LoadEngine(Spec(path));
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    ASSERT_TRUE(one->engine->Start().ok());
    want = Greedy(*one->engine, prompt);
  }
  // One directory for every layout: each layout's blocks are its own
  // (another layout splits a block otherwise), so none restores another's.
  const auto dir = kvs::testing::TempDir("tp_disk");
  for (const auto& [tp, pp] : {std::pair{2, 1}, std::pair{1, 2}, std::pair{2, 2}}) {
    SCOPED_TRACE(::testing::Message() << "tensor " << tp << " x pipeline " << pp);
    const int n = tp * pp;
    testing::ThreadGroup group(n);
    WorkerRanks workers(group, n, path);
    for (int round = 0; round < 2; ++round) {
      EngineSpec spec = RankZeroSpec(path, group, tp, pp);
      spec.engine.kv_disk.path = dir.string();
      spec.engine.kv_disk.max_bytes = 64 << 20;
      auto loaded = LoadEngine(spec);
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      ASSERT_TRUE(loaded->engine->Start().ok());
      EXPECT_EQ(Greedy(*loaded->engine, prompt), want) << "round " << round;
      const engine::EngineStats st = loaded->engine->GetStats();
      EXPECT_TRUE(st.kv_disk_enabled);
      EXPECT_EQ(st.kv_disk_restored_blocks, round == 1 ? 3 : 0) << "the prompt's full blocks, from disk";
      EXPECT_EQ(st.prefix_disk_hit_tokens, round == 1 ? 48 : 0);
      loaded->engine->Stop();
    }
    workers.Finish();
  }
}

// A model with sliding-window layers in pipeline stages, through the
// engine: every stage keeps the window group (rank 0's block ids, released
// as the window moves), and greedy tokens well past the 16-token window
// equal one process's. (These random weights' greedy tokens do not show a
// stage that miscounts which of its layers slide; tensor_parallel_test's
// logits do.) A layout that would leave a stage layers of one kind only is
// refused, naming it.
TEST(LoadEngineTest, PipelineStagesOfASlidingWindowModelGenerateOneProcessTokens) {
  auto dir = kvs::testing::TempDir("pp_swa");
  const std::string path = (dir / "gemma2.gguf").string();
  model::RandomModelSpec m = model::SmallTestSpec("gemma2");
  m.n_layers = 6;
  m.sliding_window = 16;
  m.tied = true;
  ASSERT_TRUE(model::WriteRandomModel(m, path, "").ok());
  auto spec_for = [&](const std::string& file, int tp, int pp, Collective* group) {
    EngineSpec spec = Spec(file);
    spec.load_tokenizer = false;  // a random model: ids only, no EOS
    spec.threads = 1;
    spec.group = group;
    spec.tensor_parallel = tp;
    spec.pipeline_parallel = pp;
    return spec;
  };
  std::vector<int32_t> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + (i * 37) % 250);
  std::vector<int32_t> want;
  {
    auto one = LoadEngine(spec_for(path, 1, 1, nullptr));
    ASSERT_TRUE(one.ok()) << one.status().ToString();
    ASSERT_EQ(one->plan.window, 16);
    ASSERT_TRUE(one->engine->Start().ok());
    want = Greedy(*one->engine, prompt);
    one->engine->Stop();
  }
  ASSERT_EQ(want.size(), kRecorded.size());
  for (const auto& [tp, pp] : {std::pair{1, 2}, std::pair{2, 2}}) {
    SCOPED_TRACE(::testing::Message() << "tensor " << tp << " x pipeline " << pp);
    const int n = tp * pp;
    testing::ThreadGroup group(n);
    WorkerRanks workers(group, n, path);
    {
      auto loaded = LoadEngine(spec_for(path, tp, pp, &group.member(0)));
      ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
      EXPECT_EQ(loaded->model.n_layers, 3) << "stage 0 holds 3 of the 6 layers";
      EXPECT_EQ(loaded->engine->GetStats().window, 16) << "rank 0's stage keeps the window group";
      ASSERT_TRUE(loaded->engine->Start().ok());
      EXPECT_EQ(Greedy(*loaded->engine, prompt), want);
      loaded->engine->Stop();
    }
    workers.Finish();
  }
  // gemma3 with a period of 3 (2 sliding, then 1 global) over 5 layers: the
  // second of two stages (layers 3-4) would hold sliding layers only.
  model::RandomModelSpec g3 = model::SmallTestSpec("gemma3");
  g3.n_layers = 5;
  g3.sliding_window = 16;
  g3.swa_pattern = 3;
  g3.tied = true;
  const std::string g3_path = (dir / "gemma3.gguf").string();
  ASSERT_TRUE(model::WriteRandomModel(g3, g3_path, "").ok());
  testing::ThreadGroup two(2);
  auto refused = LoadEngine(spec_for(g3_path, 1, 2, &two.member(0)));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("stage 1 (layers 3-4) would hold only sliding-window layers"),
            std::string::npos)
      << refused.status().ToString();
}

// A worker whose file is not rank 0's refuses to start, and rank 0's
// LoadEngine fails saying how many ranks could not.
TEST(LoadEngineTest, TensorParallelRefusesAWorkerWithAnotherFile) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto dir = kvs::testing::TempDir("tp");
  const std::string copy = (dir / "other.gguf").string();
  std::filesystem::copy_file(path, copy);
  {
    std::FILE* f = std::fopen(copy.c_str(), "ab");
    ASSERT_NE(f, nullptr);
    std::fputc(0, f);  // one byte more: another SHA-256, still a valid file
    std::fclose(f);
  }
  testing::ThreadGroup group(2);
  Status worker_status;
  std::thread worker([&] { worker_status = RunTensorParallelWorker(group.member(1), copy, 1); });
  auto loaded = LoadEngine(RankZeroSpec(path, group, 2, 1));
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("1 of the 2 ranks could not load their shard"), std::string::npos)
      << loaded.status().ToString();
  ShutdownTensorParallelWorkers(group.member(0));
  worker.join();
  EXPECT_TRUE(worker_status.ok()) << worker_status.ToString();
}

}  // namespace
}  // namespace kvs::backend
