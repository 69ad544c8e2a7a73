// MatMul benchmarks for the shapes of a 125M Llama (hidden 768, 12 layers,
// 12 heads / 4 KV heads -> k,v out 256, FFN 2048, vocab 32000), 2 threads.
//
//   MatMul/<isa>/<type>/<shape>/m:<m>   one projection; reports GFLOP/s and
//                                       GB/s of weight bytes streamed
//   Model/<isa>/<type>/m:<m>            every projection of all 12 layers
//                                       (+ the output layer for one token),
//                                       distinct weight copies per layer so
//                                       decode streams from memory like the
//                                       real model; reports tokens/s of the
//                                       matmul work alone
//   ModelFused/<isa>/<type>/m:<m>       the same with q/k/v and gate/up
//                                       issued through MatMulMany
//
// Run e.g.: build/kernels/src/kernels/kernels_bench --benchmark_filter='avx512/Q8_0'
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"

namespace kvs::kernels {
namespace {

// KVSERVE_BENCH_THREADS overrides the thread count (default 2). On a shared
// machine use KVSERVE_BENCH_CPU_TIME=1 to rate by the benchmark thread's CPU
// time instead of wall time (meaningful with 1 thread).
int Threads() {
  const char* s = std::getenv("KVSERVE_BENCH_THREADS");
  return s != nullptr && std::atoi(s) > 0 ? std::atoi(s) : 2;
}
bool UseRealTime() {
  const char* s = std::getenv("KVSERVE_BENCH_CPU_TIME");
  return s == nullptr || s[0] != '1';
}
constexpr int64_t kHidden = 768, kKv = 256, kFfn = 2048, kVocab = 32000, kLayers = 12;

struct Shape {
  const char* name;
  int64_t rows, cols;
};
const Shape kShapes[] = {{"q_o", kHidden, kHidden}, {"k_v", kKv, kHidden},     {"gate_up", kFfn, kHidden},
                         {"down", kHidden, kFfn},   {"output", kVocab, kHidden}};
// Per layer: q, k, v, o, gate, up, down.
const Shape kLayerShapes[] = {{"q", kHidden, kHidden}, {"k", kKv, kHidden},   {"v", kKv, kHidden},
                              {"o", kHidden, kHidden}, {"gate", kFfn, kHidden}, {"up", kFfn, kHidden},
                              {"down", kHidden, kFfn}};

ThreadPool& Pool() {
  static ThreadPool pool(Threads());
  return pool;
}

// Quantized random weights, cached per (type, rows, cols).
const std::vector<uint8_t>& Weights(DType t, int64_t rows, int64_t cols) {
  static std::map<std::tuple<int, int64_t, int64_t>, std::unique_ptr<std::vector<uint8_t>>> cache;
  auto& slot = cache[{static_cast<int>(t), rows, cols}];
  if (!slot) {
    std::mt19937 rng(1);
    std::normal_distribution<float> normal(0.f, 0.05f);
    std::vector<float> row(static_cast<size_t>(cols));
    slot = std::make_unique<std::vector<uint8_t>>(static_cast<size_t>(RowBytes(t, cols) * rows));
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = normal(rng);
      QuantizeRow(t, row.data(), slot->data() + r * RowBytes(t, cols), cols);
    }
  }
  return *slot;
}

std::vector<float> Acts(int64_t m, int64_t cols) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * cols));
  for (float& v : x) v = normal(rng);
  return x;
}

void BenchMatMul(benchmark::State& state, const KernelTable* k, DType t, Shape s, int64_t m) {
  const std::vector<uint8_t>& w = Weights(t, s.rows, s.cols);
  const std::vector<float> x = Acts(m, s.cols);
  std::vector<float> y(static_cast<size_t>(m * s.rows));
  const MatView view{t, w.data(), s.rows, s.cols};
  for (auto _ : state) {
    MatMulWith(*k, view, x.data(), m, y.data(), Pool());
    benchmark::DoNotOptimize(y.data());
  }
  const double it = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * s.rows * s.cols * it / 1e9, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(w.size()) * it / 1e9, benchmark::Counter::kIsRate);
}

// All projections of the model for m tokens.
void BenchModel(benchmark::State& state, const KernelTable* k, DType t, int64_t m, bool fused) {
  struct Layer {
    std::vector<std::vector<uint8_t>> w;  // one copy per projection
  };
  std::vector<Layer> layers(kLayers);
  for (Layer& l : layers) {
    for (const Shape& s : kLayerShapes) l.w.push_back(Weights(t, s.rows, s.cols));  // distinct copies
  }
  const std::vector<uint8_t>& out_w = Weights(t, kVocab, kHidden);
  const std::vector<float> x = Acts(m, kFfn);
  std::vector<float> y(static_cast<size_t>(m * (kVocab + 2 * kFfn)));
  double flops = 0, bytes = 0;
  for (auto _ : state) {
    flops = bytes = 0;
    for (Layer& l : layers) {
      MatView v[std::size(kLayerShapes)];
      for (size_t p = 0; p < std::size(kLayerShapes); ++p) {
        const Shape& s = kLayerShapes[p];
        v[p] = MatView{t, l.w[p].data(), s.rows, s.cols};
        flops += 2.0 * m * s.rows * s.cols;
        bytes += static_cast<double>(l.w[p].size());
      }
      if (fused) {  // q/k/v and gate/up as the model would issue them
        float* ys[3] = {y.data(), y.data() + m * kHidden, y.data() + m * (kHidden + kKv)};
        MatMulManyWith(*k, v, ys, 3, x.data(), m, Pool());
        MatMulWith(*k, v[3], x.data(), m, y.data(), Pool());
        float* ys2[2] = {y.data(), y.data() + m * kFfn};
        MatMulManyWith(*k, v + 4, ys2, 2, x.data(), m, Pool());
        MatMulWith(*k, v[6], x.data(), m, y.data(), Pool());
      } else {
        for (size_t p = 0; p < std::size(kLayerShapes); ++p) MatMulWith(*k, v[p], x.data(), m, y.data(), Pool());
      }
    }
    // Logits for the last token only, as in prefill.
    MatMulWith(*k, MatView{t, out_w.data(), kVocab, kHidden}, x.data(), 1, y.data(), Pool());
    flops += 2.0 * kVocab * kHidden;
    bytes += static_cast<double>(out_w.size());
    benchmark::DoNotOptimize(y.data());
  }
  const double it = static_cast<double>(state.iterations());
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(m) * it, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * it / 1e9, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(bytes * it / 1e9, benchmark::Counter::kIsRate);
}

void RegisterAll() {
  const DType types[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0,
                         DType::kQ4_0, DType::kQ4_K, DType::kQ6_K};
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
    const KernelTable* k = GetKernelTable(isa);
    if (k == nullptr) continue;
    for (DType t : types) {
      for (int64_t m : {1, 512}) {
        for (const Shape& s : kShapes) {
          const std::string name = std::string("MatMul/") + IsaName(isa) + "/" + DTypeName(t) + "/" + s.name +
                                   "/m:" + std::to_string(m);
          auto* b = benchmark::RegisterBenchmark(name.c_str(), BenchMatMul, k, t, s, m);
          b->Unit(benchmark::kMillisecond);
          if (UseRealTime()) b->UseRealTime();
        }
        for (bool fused : {false, true}) {
          const std::string name = std::string(fused ? "ModelFused/" : "Model/") + IsaName(isa) + "/" +
                                   DTypeName(t) + "/m:" + std::to_string(m);
          auto* b = benchmark::RegisterBenchmark(name.c_str(), BenchModel, k, t, m, fused);
          b->Unit(benchmark::kMillisecond);
          if (UseRealTime()) b->UseRealTime();
        }
      }
    }
  }
}

}  // namespace
}  // namespace kvs::kernels

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  kvs::kernels::RegisterAll();
  std::printf("active kernels: %s, %d threads, rates per %s time\n",
              kvs::kernels::IsaName(kvs::kernels::ActiveKernels().isa), kvs::kernels::Threads(),
              kvs::kernels::UseRealTime() ? "wall" : "CPU");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
