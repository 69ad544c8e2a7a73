// Paged attention benchmarks on the attention shape of the 125M / 1.1B test
// models (head_dim 64; 12 query heads / 4 KV heads, or 32 / 4):
//
//   Prefill/<variant>/<kv dtype>/h:<heads>/n:<n>   causal attention of an
//       n-token prompt (one layer); reports GFLOP/s (4 * heads * head_dim
//       * n(n+1)/2 flops)
//   Decode/<variant>/<kv dtype>/h:<heads>/d:<depth>  one token at KV depth
//       `depth` through 12 layers (distinct KV per layer, so it streams like
//       the model); reports tokens/s of the attention work alone and GB/s
//       of K/V read
//
// KVSERVE_BENCH_THREADS sets the threads (default 2); KVSERVE_BENCH_CPU_TIME=1
// rates by the benchmark thread's CPU time (meaningful with 1 thread on a
// shared machine). Run e.g.:
//   build/release/src/kvcache/attention_bench --benchmark_filter='Decode/avx512/F16'
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "base/bench_util.h"
#include "kvcache/kv_cache.h"
#include "kvcache/paged_attention.h"

namespace kvs::kvcache {
namespace {

using testing::BenchPool;
using testing::BenchUseRealTime;

constexpr int kHeadDim = 64, kKvHeads = 4, kBlock = 16;

struct Setup {
  std::unique_ptr<KvCache> cache;
  std::vector<int32_t> table;
  std::vector<int32_t> tokens;
  std::vector<float> q, out;
};

Setup Make(DType dtype, int layers, int positions, int n_heads, int n_tokens) {
  Setup s;
  const int blocks = (positions + kBlock - 1) / kBlock + 1;
  auto c = KvCache::Create({layers, kKvHeads, kHeadDim, kBlock, blocks, dtype});
  s.cache = std::move(*c);
  s.table.resize(static_cast<size_t>(blocks));
  std::iota(s.table.begin(), s.table.end(), 0);
  std::shuffle(s.table.begin(), s.table.end(), std::mt19937(3));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> k(kKvHeads * kHeadDim), v(k.size());
  for (int l = 0; l < layers; ++l) {
    for (int p = 0; p < positions; ++p) {
      for (size_t i = 0; i < k.size(); ++i) { k[i] = nd(rng); v[i] = nd(rng); }
      s.cache->Write(l, int64_t(s.table[static_cast<size_t>(p / kBlock)]) * kBlock + p % kBlock, k.data(), v.data());
    }
  }
  s.tokens.assign(static_cast<size_t>(n_tokens), 0);
  s.q.resize(static_cast<size_t>(n_tokens) * n_heads * kHeadDim);
  for (float& x : s.q) x = nd(rng);
  s.out.resize(s.q.size());
  return s;
}

void BM_Prefill(benchmark::State& state, PagedAttention::Variant variant, DType dtype) {
  const int n_heads = static_cast<int>(state.range(0)), n = static_cast<int>(state.range(1));
  if (!PagedAttention::Available(variant)) {
    state.SkipWithError("variant not available on this CPU");
    return;
  }
  Setup s = Make(dtype, 1, n, n_heads, n);
  PagedAttention attention(variant);
  ForwardBatch batch;
  batch.seqs.push_back({0, s.tokens, 0, s.table});
  const AttentionParams params{0, n_heads, 0.125f};
  for (auto _ : state) attention.Run(*s.cache, params, batch, s.q.data(), s.out.data(), BenchPool());
  const double flops = 4.0 * n_heads * kHeadDim * (double(n) * (n + 1) / 2);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Decode(benchmark::State& state, PagedAttention::Variant variant, DType dtype) {
  const int n_heads = static_cast<int>(state.range(0)), depth = static_cast<int>(state.range(1));
  constexpr int kLayers = 12;
  if (!PagedAttention::Available(variant)) {
    state.SkipWithError("variant not available on this CPU");
    return;
  }
  Setup s = Make(dtype, kLayers, depth + 1, n_heads, 1);
  PagedAttention attention(variant);
  ForwardBatch batch;
  batch.seqs.push_back({0, s.tokens, depth, s.table});
  for (auto _ : state) {
    for (int l = 0; l < kLayers; ++l) {
      attention.Run(*s.cache, {l, n_heads, 0.125f}, batch, s.q.data(), s.out.data(), BenchPool());
    }
  }
  const double kv_bytes = 2.0 * kLayers * (depth + 1) * double(RowBytes(dtype, kHeadDim * kKvHeads));
  state.counters["tok/s"] = benchmark::Counter(1.0, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["KV_GB/s"] = benchmark::Counter(kv_bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void Register() {
  const std::pair<PagedAttention::Variant, const char*> variants[] = {
      {PagedAttention::Variant::kAvx512, "avx512"}, {PagedAttention::Variant::kAvx2, "avx2"},
      {PagedAttention::Variant::kGeneric, "generic"}};
  for (const auto& [v, vname] : variants) {
    for (DType dt : {DType::kF16, DType::kQ8_0, DType::kBF16, DType::kF32}) {
      const std::string suffix = std::string(vname) + "/" + DTypeName(dt);
      auto* p = benchmark::RegisterBenchmark(("Prefill/" + suffix).c_str(), BM_Prefill, v, dt);
      p->ArgNames({"h", "n"})->Args({12, 512})->Args({12, 4096})->Args({32, 4096})->Unit(benchmark::kMillisecond);
      auto* d = benchmark::RegisterBenchmark(("Decode/" + suffix).c_str(), BM_Decode, v, dt);
      d->ArgNames({"h", "d"})->Args({12, 4096})->Args({12, 16384})->Args({32, 4096})->Unit(benchmark::kMillisecond);
      if (BenchUseRealTime()) {
        p->UseRealTime();
        d->UseRealTime();
      }
    }
  }
}

}  // namespace
}  // namespace kvs::kvcache

int main(int argc, char** argv) {
  kvs::kvcache::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
