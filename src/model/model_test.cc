// Compares kvserve's forward pass with the independent NumPy reference
// (tools/reference.py, float64, dense attention) on stories260K and on random
// models of every architecture and weight type written by the GGUF writer.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "model/llama.h"
#include "model/random_model.h"

namespace kvs::model {
namespace {

bool HaveNumpy() {
  return std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0;
}

std::vector<float> ReferenceLogits(const std::string& model, const std::vector<int32_t>& tokens, int vocab) {
  auto dir = kvs::testing::TempDir("ref");
  const std::string tok_path = (dir / "tokens.txt").string(), out_path = (dir / "logits.f32").string();
  {
    std::ofstream f(tok_path);
    for (int32_t t : tokens) f << t << ' ';
  }
  const std::string cmd = "/usr/bin/python3 " + kvs::testing::SourceDir() + "/tools/reference.py --model " + model +
                          " --tokens @" + tok_path + " --out " + out_path;
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::vector<float> out(tokens.size() * static_cast<size_t>(vocab));
  std::ifstream f(out_path, std::ios::binary);
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size() * 4));
  EXPECT_TRUE(f.good()) << "reference output missing";
  return out;
}

// Runs `tokens` through the model in the given chunk sizes (the last chunk
// size repeats), through a shuffled block table, returning all logits.
std::vector<float> KvserveLogits(LlamaModel& m, const std::vector<int32_t>& tokens, std::vector<int> chunks,
                                 DType kv_dtype, int threads) {
  const ModelConfig& c = m.config();
  const int block = 16;
  const int nblocks = static_cast<int>(tokens.size()) / block + 4;
  auto cache = kvcache::KvCache::Create({c.n_layers, c.n_kv_heads, c.head_dim, block, nblocks, kv_dtype});
  EXPECT_TRUE(cache.ok());
  std::vector<int32_t> table(static_cast<size_t>(nblocks));
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), std::mt19937(7));
  ThreadPool pool(threads);
  std::vector<float> all(tokens.size() * static_cast<size_t>(c.vocab));
  size_t pos = 0, ci = 0;
  while (pos < tokens.size()) {
    const size_t n = std::min<size_t>(static_cast<size_t>(chunks[std::min(ci, chunks.size() - 1)]), tokens.size() - pos);
    ++ci;
    kvcache::ForwardBatch b;
    b.seqs.push_back({0, std::span<const int32_t>(tokens.data() + pos, n), static_cast<int32_t>(pos), table, true, true});
    Status st = m.Forward(b, **cache, std::span<float>(all.data() + pos * c.vocab, n * c.vocab), pool);
    EXPECT_TRUE(st.ok()) << st.ToString();
    pos += n;
  }
  return all;
}

// Largest |a - b| relative to the largest |b| in the row, over all rows.
double MaxRelativeDeviation(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  double worst = 0;
  for (size_t r = 0; r < a.size() / vocab; ++r) {
    double scale = 1e-6, dev = 0;
    for (int v = 0; v < vocab; ++v) {
      scale = std::max(scale, std::fabs(double(b[r * vocab + v])));
      dev = std::max(dev, std::fabs(double(a[r * vocab + v]) - b[r * vocab + v]));
    }
    worst = std::max(worst, dev / scale);
  }
  return worst;
}

double ArgmaxAgreement(const std::vector<float>& a, const std::vector<float>& b, int vocab) {
  size_t same = 0, rows = a.size() / vocab;
  for (size_t r = 0; r < rows; ++r) {
    auto ia = std::max_element(a.begin() + r * vocab, a.begin() + (r + 1) * vocab) - (a.begin() + r * vocab);
    auto ib = std::max_element(b.begin() + r * vocab, b.begin() + (r + 1) * vocab) - (b.begin() + r * vocab);
    same += ia == ib;
  }
  return double(same) / rows;
}

std::vector<int32_t> RandomTokens(int n, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng() % vocab);
  return t;
}

TEST(ModelTest, Stories260KMatchesReference) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  if (!HaveNumpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy is absent";
  auto m = LlamaModel::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int vocab = (*m)->config().vocab;
  std::vector<int32_t> tokens = RandomTokens(70, vocab, 3);
  tokens[0] = 1;  // BOS
  auto ref = ReferenceLogits(path, tokens, vocab);
  // Prefill in one chunk, in odd chunks, and token-by-token decode.
  for (std::vector<int> chunks : {std::vector<int>{70}, {17, 5, 1}, {1}}) {
    auto got = KvserveLogits(**m, tokens, chunks, DType::kF32, 2);
    EXPECT_LT(MaxRelativeDeviation(got, ref, vocab), 1e-4) << "chunks " << chunks[0];
    EXPECT_EQ(ArgmaxAgreement(got, ref, vocab), 1.0);
  }
}

// Greedy decoding (prefill the prompt in one batch, then one token at a
// time) of `n` tokens after `prompt`.
std::vector<int32_t> GreedyTokens(LlamaModel& m, const std::vector<int32_t>& prompt, int n, DType kv_dtype) {
  const ModelConfig& c = m.config();
  const int block = 16;
  const int nblocks = (static_cast<int>(prompt.size()) + n) / block + 2;
  auto cache = kvcache::KvCache::Create({c.n_layers, c.n_kv_heads, c.head_dim, block, nblocks, kv_dtype});
  EXPECT_TRUE(cache.ok());
  std::vector<int32_t> table(static_cast<size_t>(nblocks));
  std::iota(table.begin(), table.end(), 0);
  ThreadPool pool(2);
  std::vector<float> logits(static_cast<size_t>(c.vocab));
  std::vector<int32_t> seq = prompt, out;
  int32_t pos = 0;
  while (static_cast<int>(out.size()) < n) {
    const std::span<const int32_t> chunk(seq.data() + pos, seq.size() - static_cast<size_t>(pos));
    kvcache::ForwardBatch b;
    b.seqs.push_back({0, chunk, pos, table, true});
    const Status st = m.Forward(b, **cache, logits, pool);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    pos = static_cast<int32_t>(seq.size());
    const auto next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

// Greedy output on stories260K equals llama.cpp's token for token
// (src/model/testdata/stories260k_greedy_llamacpp.txt says how it was made).
TEST(ModelTest, Stories260KGreedyMatchesLlamaCpp) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto m = LlamaModel::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  std::ifstream f(kvs::testing::SourceDir() + "/src/model/testdata/stories260k_greedy_llamacpp.txt");
  ASSERT_TRUE(f.good());
  std::string line;
  std::vector<int32_t> prompt;
  int cases = 0;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key;
    in >> key;
    std::vector<int32_t> ids;
    for (int32_t v; in >> v;) ids.push_back(v);
    if (key == "prompt") {
      prompt = ids;
    } else if (key == "tokens") {
      ASSERT_FALSE(prompt.empty());
      const std::vector<int32_t> got = GreedyTokens(**m, prompt, static_cast<int>(ids.size()), DType::kF16);
      for (size_t i = 0; i < ids.size(); ++i) {
        ASSERT_EQ(got[i], ids[i]) << "case " << cases << ", generated token " << i;
      }
      ++cases;
    }
  }
  EXPECT_EQ(cases, 3);
}

struct ArchCase {
  const char* arch;
  DType type;
};

class RandomModelTest : public ::testing::TestWithParam<ArchCase> {};

TEST_P(RandomModelTest, MatchesReferenceOnDequantizedWeights) {
  if (!HaveNumpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy is absent";
  const ArchCase p = GetParam();
  auto dir = kvs::testing::TempDir(std::string("rand_") + p.arch + DTypeName(p.type));
  const std::string path = (dir / "m.gguf").string(), twin = (dir / "twin.gguf").string();
  RandomModelSpec spec;
  spec.arch = p.arch;
  spec.weight_type = p.type;
  spec.tied = p.type == DType::kQ8_0;         // exercise tied embeddings too
  spec.rope_freqs = p.type == DType::kF16;    // and Llama-3 frequency factors
  ASSERT_TRUE(WriteRandomModel(spec, path, twin).ok());
  auto m = LlamaModel::Load(path);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const int vocab = (*m)->config().vocab;
  const auto tokens = RandomTokens(40, vocab, 11);
  auto ref = ReferenceLogits(twin, tokens, vocab);
  auto got = KvserveLogits(**m, tokens, {23, 1}, DType::kF32, 2);
  // F32 weights: the same math in float vs double. Quantized weights: the
  // reference uses the exact dequantized weights, but kvserve (like
  // llama.cpp) also quantizes activations to 8 bits for the dot products,
  // which bounds the agreement at roughly 1 % of the logit scale.
  const bool float_weights = p.type == DType::kF32;
  const bool half_weights = p.type == DType::kF16 || p.type == DType::kBF16;
  const double tol = float_weights ? 1e-4 : half_weights ? 2e-3 : 3e-2;
  EXPECT_LT(MaxRelativeDeviation(got, ref, vocab), tol);
  EXPECT_GE(ArgmaxAgreement(got, ref, vocab), float_weights || half_weights ? 1.0 : 0.9);
}

INSTANTIATE_TEST_SUITE_P(
    ArchsAndTypes, RandomModelTest,
    ::testing::Values(ArchCase{"llama", DType::kF32}, ArchCase{"qwen2", DType::kF32}, ArchCase{"qwen3", DType::kF32},
                      ArchCase{"llama", DType::kF16}, ArchCase{"llama", DType::kBF16}, ArchCase{"llama", DType::kQ8_0},
                      ArchCase{"llama", DType::kQ4_0}, ArchCase{"llama", DType::kQ4_K}, ArchCase{"llama", DType::kQ5_K},
                      ArchCase{"llama", DType::kQ6_K},
                      ArchCase{"qwen2", DType::kQ8_0}, ArchCase{"qwen3", DType::kQ4_K}),
    [](const auto& info) { return std::string(info.param.arch) + "_" + DTypeName(info.param.type); });

TEST(ModelTest, LongPromptThroughPagedCacheMatchesReference) {
  if (!HaveNumpy()) GTEST_SKIP() << "/usr/bin/python3 with numpy is absent";
  auto dir = kvs::testing::TempDir("long");
  const std::string path = (dir / "m.gguf").string();
  RandomModelSpec spec;
  spec.hidden = 64;
  spec.n_heads = 4;
  spec.n_kv_heads = 2;
  spec.ffn = 128;
  spec.vocab = 256;
  spec.n_layers = 2;
  ASSERT_TRUE(WriteRandomModel(spec, path, "").ok());
  auto m = LlamaModel::Load(path);
  ASSERT_TRUE(m.ok());
  const auto tokens = RandomTokens(4200, spec.vocab, 5);
  auto ref = ReferenceLogits(path, tokens, spec.vocab);
  auto got = KvserveLogits(**m, tokens, {1000, 3000, 200}, DType::kF32, 2);
  EXPECT_LT(MaxRelativeDeviation(got, ref, spec.vocab), 1e-4);
  EXPECT_EQ(ArgmaxAgreement(got, ref, spec.vocab), 1.0);
}

TEST(ModelTest, RefusesUnsupportedArchitectureByName) {
  auto dir = kvs::testing::TempDir("arch");
  RandomModelSpec spec;
  spec.arch = "mamba";
  const std::string path = (dir / "m.gguf").string();
  ASSERT_TRUE(WriteRandomModel(spec, path, "").ok());
  auto m = LlamaModel::Load(path);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("'mamba' is not supported"), std::string::npos) << m.status().ToString();
}

TEST(ModelTest, RejectsOutOfRangeTokens) {
  KVS_REQUIRE_SHARED(path, "models/stories260K.gguf");
  auto m = LlamaModel::Load(path);
  ASSERT_TRUE(m.ok());
  const ModelConfig& c = (*m)->config();
  auto cache = kvcache::KvCache::Create({c.n_layers, c.n_kv_heads, c.head_dim, 16, 4, DType::kF16});
  ASSERT_TRUE(cache.ok());
  std::vector<int32_t> toks = {1, 99999}, table = {0};
  kvcache::ForwardBatch b;
  b.seqs.push_back({0, toks, 0, table, true});
  ThreadPool pool(1);
  std::vector<float> logits(static_cast<size_t>(c.vocab));
  Status st = (*m)->Forward(b, **cache, logits, pool);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kvs::model
