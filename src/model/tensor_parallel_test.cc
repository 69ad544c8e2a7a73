// Tensor parallel in the model (LoadOptions::shard_count, LlamaModel::SetCollective):
// N shards, each on its own thread with its own KV cache and a ThreadGroup
// collective, compute the same logits as the whole model, on stories260K
// and on random models of several architectures and weight types; layouts a
// model cannot take are refused by name.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <numeric>
#include <random>
#include <thread>

#include "base/test_util.h"
#include "base/testing/thread_collective.h"
#include "model/llama.h"
#include "model/random_model.h"

namespace kvs::model {
namespace {

constexpr int kBlock = 16;

std::vector<int32_t> Tokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % static_cast<uint32_t>(vocab));
  return t;
}

// What a rank does with logits: rank 0 keeps them (computed here, or
// received from the last pipeline stage: recv_from >= 0); the last stage's
// first tensor-parallel rank computes them (and its model sends them on);
// the others have none.
struct LogitsRole {
  bool keep = true;
  bool compute = true;
  int recv_from = -1;
  Collective* world = nullptr;
};

// Every token's logits of `tokens` fed in `chunks` (the last size repeats),
// through one rank's model and KV cache; empty unless role.keep.
std::vector<float> RunChunks(LlamaModel& m, const std::vector<int32_t>& tokens, std::vector<int> chunks,
                             LogitsRole role = {}) {
  const ModelConfig& c = m.config();
  const int nblocks = static_cast<int>(tokens.size()) / kBlock + 1;
  auto cache = kvcache::KvCache::Create({c.n_layers, c.n_kv_heads, c.head_dim, kBlock, nblocks, DType::kF32});
  EXPECT_TRUE(cache.ok()) << cache.status().ToString();
  std::vector<int32_t> table(static_cast<size_t>(nblocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(7));
  ThreadPool pool(1);
  std::vector<float> all;
  size_t pos = 0, k = 0;
  while (pos < tokens.size()) {
    const size_t n = std::min(tokens.size() - pos, static_cast<size_t>(chunks[std::min(k++, chunks.size() - 1)]));
    kvcache::ForwardBatch b;
    b.seqs.push_back({0, std::span<const int32_t>(tokens.data() + pos, n), static_cast<int32_t>(pos), table, true, true});
    std::vector<float> logits(role.keep || role.compute ? n * static_cast<size_t>(c.vocab) : 0);
    if (role.recv_from >= 0) role.world->PostRecv(logits, role.recv_from, LlamaModel::kLogitsTag);
    const Status st = m.Forward(b, **cache, logits, pool);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (role.recv_from >= 0) role.world->WaitPosted();
    if (role.keep) all.insert(all.end(), logits.begin(), logits.end());
    pos += n;
  }
  return all;
}

StatusOr<std::unique_ptr<LlamaModel>> LoadShard(const std::string& path, int rank, int count) {
  LoadOptions o = LoadOptions::ForDtype("f32");
  o.shard_rank = rank;
  o.shard_count = count;
  return LlamaModel::Load(path, o);
}

// Rank 0's logits of `count` shards run together.
std::vector<float> ShardedLogits(const std::string& path, int count, const std::vector<int32_t>& tokens,
                                 const std::vector<int>& chunks) {
  testing::ThreadGroup group(count);
  std::vector<std::unique_ptr<LlamaModel>> models;
  for (int r = 0; r < count; ++r) {
    auto m = LoadShard(path, r, count);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    if (!m.ok()) return {};
    (*m)->SetCollective(&group.member(r));
    models.push_back(std::move(*m));
  }
  std::vector<float> out;
  std::vector<std::thread> threads;
  for (int r = 0; r < count; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> got =
          RunChunks(*models[static_cast<size_t>(r)], tokens, chunks, LogitsRole{r == 0, r == 0, -1, nullptr});
      if (r == 0) out = std::move(got);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

// The largest |a - b| over a row, relative to the row's largest |b|.
double WorstRowDeviation(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  double worst = 0;
  for (size_t r = 0; r < b.size() / static_cast<size_t>(vocab); ++r) {
    double scale = 1e-6, dev = 0;
    for (size_t v = r * vocab; v < (r + 1) * vocab; ++v) {
      scale = std::max(scale, std::fabs(static_cast<double>(b[v])));
      dev = std::max(dev, std::fabs(static_cast<double>(a[v]) - b[v]));
    }
    worst = std::max(worst, dev / scale);
  }
  return worst;
}

// Perplexity of `tokens` under every-token logits: exp(mean NLL of token i + 1 given row i).
double Perplexity(const std::vector<float>& logits, const std::vector<int32_t>& tokens, int vocab) {
  double nll = 0;
  for (size_t i = 0; i + 1 < tokens.size(); ++i) {
    const float* row = logits.data() + i * static_cast<size_t>(vocab);
    const double mx = *std::max_element(row, row + vocab);
    double z = 0;
    for (int v = 0; v < vocab; ++v) z += std::exp(row[v] - mx);
    nll += -(row[tokens[i + 1]] - mx - std::log(z));
  }
  return std::exp(nll / static_cast<double>(tokens.size() - 1));
}

int ArgmaxDisagreements(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  int n = 0;
  for (size_t r = 0; r < b.size() / static_cast<size_t>(vocab); ++r) {
    auto row = [&](const std::vector<float>& x) {
      return std::max_element(x.begin() + r * vocab, x.begin() + (r + 1) * vocab) - x.begin();
    };
    n += row(a) != row(b);
  }
  return n;
}

// With `twin` (the same model in F32), quantized weights: the kernels
// quantize activations too, and a partial sum that differs in its last bit
// can round an activation the other way, so the shards are held to the
// whole model's own distance from the exact F32 model instead of to 1e-4.
void ExpectShardsMatchWhole(const std::string& path, int count, const std::string& twin = "") {
  auto whole = LlamaModel::Load(path, LoadOptions::ForDtype("f32"));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const int vocab = (*whole)->config().vocab;
  std::vector<int32_t> tokens = Tokens(45, vocab, 11);
  // A prefill in odd chunks, then one token at a time (decode).
  const std::vector<int> chunks = {17, 9, 1};
  const std::vector<float> want = RunChunks(**whole, tokens, chunks);
  const std::vector<float> got = ShardedLogits(path, count, tokens, chunks);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(ArgmaxDisagreements(got, want, vocab), 0) << path << " x" << count;
  // The bound: perplexity within 0.1 % of the whole model's.
  EXPECT_NEAR(Perplexity(got, tokens, vocab) / Perplexity(want, tokens, vocab), 1.0, 1e-3) << path << " x" << count;
  if (twin.empty()) {
    EXPECT_LT(WorstRowDeviation(got, want, vocab), 1e-4) << path << " x" << count;
    return;
  }
  auto exact_model = LlamaModel::Load(twin, LoadOptions::ForDtype("f32"));
  ASSERT_TRUE(exact_model.ok()) << exact_model.status().ToString();
  const std::vector<float> exact = RunChunks(**exact_model, tokens, chunks);
  const double whole_dev = WorstRowDeviation(want, exact, vocab), shard_dev = WorstRowDeviation(got, exact, vocab);
  EXPECT_LT(shard_dev, 1.5 * whole_dev + 1e-4) << path << " x" << count << ": whole " << whole_dev;
  std::printf("%s x%d: from the F32 twin: whole %.5f, shards %.5f; shards from whole %.5f\n", path.c_str(), count,
              whole_dev, shard_dev, WorstRowDeviation(got, want, vocab));
}

// Rank 0's logits of `tp` x `pp` ranks: pipeline stages of contiguous
// layers (StageLayers), each split over `tp` ranks, activations passed
// stage to stage and logits back to rank 0, as the server's ranks do.
std::vector<float> PipelineLogits(const std::string& path, int tp, int pp, const std::vector<int32_t>& tokens,
                                  const std::vector<int>& chunks) {
  const int n = tp * pp;
  testing::ThreadGroup world(n);
  std::vector<float> out;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      const int stage = r / tp, t = r % tp;
      Collective* stage_group = world.member(r).Split(stage, t);
      auto probe = LlamaModel::Load(path, LoadOptions::ForDtype("f32"));
      ASSERT_TRUE(probe.ok());
      const LayerRange layers = StageLayers((*probe)->config().n_layers, pp, stage);
      LoadOptions o = LoadOptions::ForDtype("f32");
      o.shard_rank = t;
      o.shard_count = tp;
      o.first_layer = layers.first;
      o.num_layers = layers.count;
      auto m = LlamaModel::Load(path, o);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      if (tp > 1) (*m)->SetCollective(stage_group);
      const bool last = stage == pp - 1;
      LlamaModel::PipelineLinks links{&world.member(r), stage > 0 ? r - tp : -1, last ? -1 : r + tp,
                                      last && t == 0 && r != 0 ? 0 : -1};
      (*m)->SetPipeline(links);
      LogitsRole role{r == 0, last && t == 0, r == 0 && pp > 1 ? (pp - 1) * tp : -1, &world.member(r)};
      std::vector<float> got = RunChunks(**m, tokens, chunks, role);
      if (r == 0) out = std::move(got);
    });
  }
  for (std::thread& th : threads) th.join();
  return out;
}

TEST(TensorParallelTest, PipelineStagesMatchWholeModel) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto whole = LlamaModel::Load(path, LoadOptions::ForDtype("f32"));
  ASSERT_TRUE(whole.ok());
  const int vocab = (*whole)->config().vocab;
  std::vector<int32_t> tokens = Tokens(45, vocab, 5);
  const std::vector<int> chunks = {17, 9, 1};
  const std::vector<float> want = RunChunks(**whole, tokens, chunks);
  // stories260K has 5 layers: 3 + 2 over two stages, 2 + 2 + 1 over three.
  for (const auto& [tp, pp] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{1, 3}, std::pair{2, 3}}) {
    const std::vector<float> got = PipelineLogits(path, tp, pp, tokens, chunks);
    ASSERT_EQ(got.size(), want.size()) << "tp " << tp << " pp " << pp;
    EXPECT_LT(WorstRowDeviation(got, want, vocab), 1e-4) << "tp " << tp << " pp " << pp;
    EXPECT_EQ(ArgmaxDisagreements(got, want, vocab), 0) << "tp " << tp << " pp " << pp;
    EXPECT_NEAR(Perplexity(got, tokens, vocab) / Perplexity(want, tokens, vocab), 1.0, 1e-3) << "tp " << tp;
  }
  EXPECT_EQ(StageLayers(80, 3, 0).count, 27);
  EXPECT_EQ(StageLayers(80, 3, 2).first, 54);
  EXPECT_EQ(StageLayers(80, 3, 2).count, 26);
}

// Sliding-window layers in stages: gemma2 (even layers slide, a window of 8
// in a 45-token sequence) over 6 layers; with two stages the second starts
// at a global layer (3), so its pattern must count from there.
TEST(TensorParallelTest, PipelineStagesOfASlidingWindowModelMatchWholeModel) {
  auto dir = kvs::testing::TempDir("pp_swa");
  RandomModelSpec s = SmallTestSpec("gemma2");
  s.n_layers = 6;
  s.sliding_window = 8;
  s.tied = true;
  const std::string path = (dir / "gemma2.gguf").string();
  ASSERT_TRUE(WriteRandomModel(s, path, "").ok());
  auto whole = LlamaModel::Load(path, LoadOptions::ForDtype("f32"));
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  const int vocab = (*whole)->config().vocab;
  const std::vector<int32_t> tokens = Tokens(45, vocab, 9);
  const std::vector<int> chunks = {17, 9, 1};
  const std::vector<float> want = RunChunks(**whole, tokens, chunks);
  for (const auto& [tp, pp] : {std::pair{1, 2}, std::pair{2, 2}, std::pair{1, 3}}) {
    const std::vector<float> got = PipelineLogits(path, tp, pp, tokens, chunks);
    ASSERT_EQ(got.size(), want.size()) << "tp " << tp << " pp " << pp;
    EXPECT_LT(WorstRowDeviation(got, want, vocab), 1e-4) << "tp " << tp << " pp " << pp;
    EXPECT_EQ(ArgmaxDisagreements(got, want, vocab), 0) << "tp " << tp << " pp " << pp;
  }
}

TEST(TensorParallelTest, Stories260KShardsMatchWholeModel) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  ExpectShardsMatchWhole(path, 2);
  ExpectShardsMatchWhole(path, 4);  // one KV head per rank
}

TEST(TensorParallelTest, RandomModelsShardsMatchWholeModel) {
  auto dir = kvs::testing::TempDir("tp");
  struct Case {
    std::string arch;
    DType type;
    int count;
  };
  // Q8_0 splits on 32-element blocks, Q4_K on 256: the shapes give every
  // rank whole blocks of wo's and down's columns.
  for (const Case& k : {Case{"llama", DType::kQ8_0, 2}, Case{"llama", DType::kQ4_K, 2}, Case{"llama", DType::kF16, 2},
                        Case{"qwen2", DType::kF32, 2}, Case{"qwen3", DType::kQ8_0, 2}, Case{"gemma2", DType::kF32, 2},
                        Case{"phi3", DType::kF32, 2},
                        // 2 KV heads on 4 ranks (replicated): the biases (qwen2)
                        // and the per-head norms (qwen3) follow the KV head.
                        Case{"qwen2", DType::kF32, 4}, Case{"qwen3", DType::kQ8_0, 4}}) {
    RandomModelSpec s = SmallTestSpec(k.arch);
    s.weight_type = k.type;
    // A vocabulary that does not divide by the ranks: the head's rows split
    // 129 + 128. gemma2 with its head tied to the embeddings: each rank's
    // head is a view of its rows of them.
    if (k.arch == "llama" && k.type == DType::kF16) s.vocab = 257;
    if (k.arch == "gemma2") s.tied = true;
    if (k.type == DType::kQ4_K) {
      s.hidden = 512;
      s.n_heads = 8;
      s.n_kv_heads = 4;
      s.ffn = 1024;
    }
    const std::string path = (dir / (k.arch + "-" + DTypeName(k.type) + "-" + std::to_string(k.count) + ".gguf")).string();
    const bool quantized = k.type != DType::kF32 && k.type != DType::kF16;
    const std::string twin = quantized ? path + ".f32" : "";
    ASSERT_TRUE(WriteRandomModel(s, path, twin).ok());
    SCOPED_TRACE(path);
    ExpectShardsMatchWhole(path, k.count, twin);
  }
}

TEST(TensorParallelTest, RefusesLayoutsTheModelCannotTake) {
  auto dir = kvs::testing::TempDir("tp");
  RandomModelSpec s = SmallTestSpec("llama");  // 4 heads, 2 KV heads
  const std::string f32 = (dir / "f32.gguf").string();
  ASSERT_TRUE(WriteRandomModel(s, f32, "").ok());
  auto three = LoadShard(f32, 0, 3);
  ASSERT_FALSE(three.ok());
  EXPECT_NE(three.status().message().find("2 KV heads"), std::string::npos) << three.status().ToString();
  // Q4_K: 64 of wo's columns per rank would cut its 256-element blocks.
  s.weight_type = DType::kQ4_K;
  s.hidden = 256;
  s.ffn = 512;
  const std::string q4k = (dir / "q4k.gguf").string();
  ASSERT_TRUE(WriteRandomModel(s, q4k, "").ok());
  auto split = LoadShard(q4k, 1, 2);
  ASSERT_FALSE(split.ok());
  EXPECT_NE(split.status().message().find("256-element blocks"), std::string::npos) << split.status().ToString();
  // A shard without its group refuses to run instead of computing a part.
  auto lone = LoadShard(f32, 0, 2);
  ASSERT_TRUE(lone.ok()) << lone.status().ToString();
  std::vector<int32_t> tokens = {1, 2, 3};
  auto cache = kvcache::KvCache::Create({2, 1, 32, kBlock, 1, DType::kF32});
  ASSERT_TRUE(cache.ok());
  std::vector<int32_t> table = {0};
  kvcache::ForwardBatch b;
  b.seqs.push_back({0, tokens, 0, table, true});
  std::vector<float> logits(static_cast<size_t>((*lone)->config().vocab));
  ThreadPool pool(1);
  const Status st = (*lone)->Forward(b, **cache, logits, pool);
  EXPECT_EQ(st.code(), StatusCode::kFailedPrecondition) << st.ToString();
}

}  // namespace
}  // namespace kvs::model
