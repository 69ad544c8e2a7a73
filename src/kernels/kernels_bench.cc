// Kernel benchmarks (Google Benchmark), 2 threads unless KVSERVE_BENCH_THREADS
// says otherwise:
//
//   Stream/read, Stream/triad           the machine's memory bandwidth, STREAM
//                                       style: a 1 GiB array summed (read) and
//                                       a = b + s*c over 3 x 256 MiB, split
//                                       over the pool; reports GB/s. Decode
//                                       reads weights, so `read` is its bound.
//                                       Buffers use 2 MiB pages as the model's
//                                       packed weights do; Stream/read_4k_pages
//                                       is `read` over ordinary pages.
//   MatMul/<isa>/<type>/<shape>/m:<m>   one projection of the S model; GFLOP/s
//                                       and GB/s of weight bytes streamed
//   Model/<S|M>/<isa>/<type>/m:<m>      every projection of every layer (+ the
//                                       output layer for one token) with q/k/v
//                                       through MatMulMany and gate/up through
//                                       GatedMatMul, as the model issues them; distinct weight
//                                       copies per layer so decode streams the
//                                       model from DRAM; weights packed at
//                                       "load" like the model does. Reports
//                                       tok/s of the matmul work alone and
//                                       GB/s of weights.
//   Ops/<isa>/<op>/n:<n>                one element-wise, normalisation or
//                                       conversion op of the kernel table on
//                                       one row of n floats (L1-resident; the
//                                       odd n has a tail); single-threaded.
//
// Shapes: S = 125M Llama (hidden 768, 12 layers, 12/4 heads, FFN 2048, vocab
// 32000), M = 1.1B (TinyLlama: hidden 2048, 22 layers, 32/4 heads, FFN 5632).
// Run e.g.: kernels_bench --benchmark_filter='Model/M/avx512/Q4_K/m:1'
// KVSERVE_BENCH_CPU_TIME=1 rates by the benchmark thread's CPU time (use with
// KVSERVE_BENCH_THREADS=1 on a busy machine).
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "base/bench_util.h"
#include "base/huge_buffer.h"
#include "base/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/packed.h"

namespace kvs::kernels {
namespace {

using testing::BenchPool;
using testing::BenchThreads;
using testing::BenchUseRealTime;

// Huge pages, as the model's packed weights (base/huge_buffer.h); `small`
// gives 4 KiB pages, to show what the TLB costs a stream.
struct Buffer {
  HugeBuffer huge;
  std::unique_ptr<uint8_t, decltype(&std::free)> small{nullptr, &std::free};
  uint8_t* get() const { return small ? small.get() : huge.data(); }
};
Buffer Alloc(size_t n, bool small_pages = false) {
  Buffer b;
  if (small_pages) {
    b.small.reset(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64)));
    if (!b.small) std::abort();
  } else {
    b.huge = HugeBuffer(n);
  }
  std::memset(b.get(), 1, n);  // commit the pages
  return b;
}

// ---- STREAM-like bandwidth (AVX2 loads: every x86 CPU kvserve vectorises for).

// Sums n floats (n a multiple of 128) read as four sequential streams, one
// per quarter of the range, the way a decode thread reads its weight panels
// and scales side by side: one stream alone leaves the memory system idle
// between the core's misses and reads ~15 % below what the kernels reach.
__attribute__((target("avx2"))) float SumRange(const float* a, int64_t n) {
  const int64_t q = n / 4;
  __m256 s[8];
  for (__m256& v : s) v = _mm256_setzero_ps();
  for (int64_t i = 0; i < q; i += 16) {
    for (int k = 0; k < 4; ++k) {
      s[2 * k] = _mm256_add_ps(s[2 * k], _mm256_load_ps(a + k * q + i));
      s[2 * k + 1] = _mm256_add_ps(s[2 * k + 1], _mm256_load_ps(a + k * q + i + 8));
    }
  }
  __m256 t = s[0];
  for (int k = 1; k < 8; ++k) t = _mm256_add_ps(t, s[k]);
  alignas(32) float o[8];
  _mm256_store_ps(o, t);
  return o[0] + o[1] + o[2] + o[3] + o[4] + o[5] + o[6] + o[7];
}

__attribute__((target("avx2,fma"))) void TriadRange(float* a, const float* b, const float* c, float s, int64_t n) {
  const __m256 vs = _mm256_set1_ps(s);
  for (int64_t i = 0; i < n; i += 8) {
    _mm256_stream_ps(a + i, _mm256_fmadd_ps(_mm256_load_ps(c + i), vs, _mm256_load_ps(b + i)));
  }
}

void BenchStreamRead(benchmark::State& state, bool small_pages) {
  constexpr int64_t kFloats = int64_t{1} << 28;  // 1 GiB
  static Buffer huge_buf, small_buf;
  Buffer& buf = small_pages ? small_buf : huge_buf;
  if (buf.get() == nullptr) buf = Alloc(kFloats * sizeof(float), small_pages);
  const auto* a = reinterpret_cast<const float*>(buf.get());
  float sink = 0;
  for (auto _ : state) {
    float part[64] = {};
    BenchPool().Run([&](int tid, int nth) {
      const int64_t per = kFloats / nth / 128 * 128;
      part[tid] = SumRange(a + tid * per, per);
    });
    sink += part[0];
  }
  benchmark::DoNotOptimize(sink);
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kFloats * 4) * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

void BenchStreamTriad(benchmark::State& state) {
  constexpr int64_t kFloats = int64_t{1} << 26;  // 256 MiB per array
  static Buffer a = Alloc(kFloats * 4), b = Alloc(kFloats * 4), c = Alloc(kFloats * 4);
  for (auto _ : state) {
    BenchPool().Run([&](int tid, int nth) {
      const int64_t per = kFloats / nth / 8 * 8;
      TriadRange(reinterpret_cast<float*>(a.get()) + tid * per, reinterpret_cast<const float*>(b.get()) + tid * per,
                 reinterpret_cast<const float*>(c.get()) + tid * per, 3.f, per);
    });
  }
  state.counters["GB/s"] = benchmark::Counter(3.0 * kFloats * 4 * static_cast<double>(state.iterations()) / 1e9,
                                              benchmark::Counter::kIsRate);
}

// ---- MatMul

struct ModelShape {
  const char* name;
  int64_t hidden, kv, ffn, vocab, layers;
};
constexpr ModelShape kS{"S", 768, 256, 2048, 32000, 12};
constexpr ModelShape kM{"M", 2048, 256, 5632, 32000, 22};

// Quantized random weights, one matrix per (type, rows, cols, copy).
std::vector<uint8_t> RandomWeights(DType t, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 0.05f);
  std::vector<float> row(static_cast<size_t>(cols));
  std::vector<uint8_t> out(static_cast<size_t>(RowBytes(t, cols) * rows));
  const int64_t rb = RowBytes(t, cols);
  // 64 distinct rows, repeated: quantizing K-quants is slow, and the values
  // do not change the speed.
  for (int64_t r = 0; r < rows; ++r) {
    if (r < 64) {
      for (float& v : row) v = normal(rng);
      QuantizeRow(t, row.data(), out.data() + r * rb, cols);
    } else {
      std::memcpy(out.data() + r * rb, out.data() + (r % 64) * rb, static_cast<size_t>(rb));
    }
  }
  return out;
}

// A matrix as the model holds it: original rows and, when the active
// variant reads them, the packed copy.
struct Matrix {
  std::vector<uint8_t> rows;
  Buffer packed;
  MatView view;
};
std::unique_ptr<Matrix> MakeMatrix(const KernelTable& k, DType t, int64_t rows, int64_t cols, uint32_t seed) {
  auto m = std::make_unique<Matrix>();
  m->rows = RandomWeights(t, rows, cols, seed);
  m->view = MatView{t, m->rows.data(), rows, cols};
  const int64_t n = PackedLayoutBytes(t, rows, cols);
  if (n > 0 && k.reads_packed) {
    m->packed = Alloc(static_cast<size_t>(n));
    PackWeights(m->view, m->packed.get(), BenchPool());
    m->view.packed = m->packed.get();
    m->rows = std::vector<uint8_t>(m->rows.begin(), m->rows.begin() + 1);  // the kernels never read them
    m->rows.shrink_to_fit();
  }
  return m;
}

std::vector<float> Acts(int64_t m, int64_t cols) {
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(m * cols));
  for (float& v : x) v = normal(rng);
  return x;
}

double WeightBytes(const MatView& v) { return static_cast<double>(RowBytes(v.type, v.cols) * v.rows); }

void BenchMatMul(benchmark::State& state, const KernelTable* k, DType t, int64_t rows, int64_t cols, int64_t m) {
  const auto w = MakeMatrix(*k, t, rows, cols, 1);
  const std::vector<float> x = Acts(m, cols);
  std::vector<float> y(static_cast<size_t>(m * rows));
  for (auto _ : state) {
    MatMulWith(*k, w->view, x.data(), m, y.data(), BenchPool());
    benchmark::DoNotOptimize(y.data());
  }
  const double it = static_cast<double>(state.iterations());
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * m * rows * cols * it / 1e9, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(WeightBytes(w->view) * it / 1e9, benchmark::Counter::kIsRate);
}

void BenchModel(benchmark::State& state, const KernelTable* k, DType t, ModelShape s, int64_t m) {
  struct Layer {
    std::unique_ptr<Matrix> q, kk, v, o, gate, up, down;
  };
  std::vector<Layer> layers(static_cast<size_t>(s.layers));
  uint32_t seed = 1;
  double bytes = 0, flops = 0;
  for (Layer& l : layers) {
    l.q = MakeMatrix(*k, t, s.hidden, s.hidden, seed++);
    l.kk = MakeMatrix(*k, t, s.kv, s.hidden, seed++);
    l.v = MakeMatrix(*k, t, s.kv, s.hidden, seed++);
    l.o = MakeMatrix(*k, t, s.hidden, s.hidden, seed++);
    l.gate = MakeMatrix(*k, t, s.ffn, s.hidden, seed++);
    l.up = MakeMatrix(*k, t, s.ffn, s.hidden, seed++);
    l.down = MakeMatrix(*k, t, s.hidden, s.ffn, seed++);
    for (const Matrix* w : {l.q.get(), l.kk.get(), l.v.get(), l.o.get(), l.gate.get(), l.up.get(), l.down.get()}) {
      bytes += WeightBytes(w->view);
      flops += 2.0 * m * w->view.rows * w->view.cols;
    }
  }
  const auto out = MakeMatrix(*k, t, s.vocab, s.hidden, seed++);
  bytes += WeightBytes(out->view);
  flops += 2.0 * s.vocab * s.hidden;
  const std::vector<float> x = Acts(m, s.ffn);
  std::vector<float> y(static_cast<size_t>(m * (s.vocab + 2 * s.ffn)));
  for (auto _ : state) {
    for (Layer& l : layers) {
      const MatView qkv[3] = {l.q->view, l.kk->view, l.v->view};
      float* ys[3] = {y.data(), y.data() + m * s.hidden, y.data() + m * (s.hidden + s.kv)};
      MatMulManyWith(*k, qkv, ys, 3, x.data(), m, BenchPool());
      MatMulWith(*k, l.o->view, x.data(), m, y.data(), BenchPool());
      GatedMatMulWith(*k, l.gate->view, l.up->view, x.data(), m, y.data(), y.data() + m * s.ffn, BenchPool());
      MatMulWith(*k, l.down->view, x.data(), m, y.data(), BenchPool());
    }
    MatMulWith(*k, out->view, x.data(), 1, y.data(), BenchPool());  // logits of the last token
    benchmark::DoNotOptimize(y.data());
  }
  const double it = static_cast<double>(state.iterations());
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(m) * it, benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(flops * it / 1e9, benchmark::Counter::kIsRate);
  state.counters["GB/s"] = benchmark::Counter(bytes * it / 1e9, benchmark::Counter::kIsRate);
}

// One call of a row op of the kernel table per iteration; the row stays in
// L1, so this times the op's instructions, not memory.
void BenchOp(benchmark::State& state, const KernelTable* k, std::string op, int64_t n) {
  std::vector<float> a = Acts(1, n), b = Acts(2, n), w = Acts(3, n), out(static_cast<size_t>(n));
  std::vector<uint8_t> bytes(static_cast<size_t>(RowBytes(DType::kF32, n) + 1024));
  const DType conv = op.find("f16") != std::string::npos    ? DType::kF16
                     : op.find("bf16") != std::string::npos ? DType::kBF16
                                                            : DType::kQ8_0;
  const ActLayout layout = MakeActLayout(op == "quantize_acts_q8k" ? WType::kQ4_K : WType::kQ8_0, n);
  if (op.rfind("dequantize", 0) == 0) k->convert_from_f32(conv, a.data(), bytes.data(), n);
  std::vector<uint8_t> acts(static_cast<size_t>(layout.row_stride));
  for (auto _ : state) {
    if (op == "rms_norm") {
      k->rms_norm(a.data(), w.data(), out.data(), n, 1e-5f);
    } else if (op == "silu_mul") {
      k->silu_mul(a.data(), b.data(), out.data(), n);
    } else if (op == "add") {
      k->add(a.data(), b.data(), out.data(), n);
    } else if (op == "axpy") {
      k->axpy(0.5f, a.data(), out.data(), n);
    } else if (op == "dot") {
      benchmark::DoNotOptimize(k->dot(a.data(), b.data(), n));
    } else if (op == "softmax") {
      std::memcpy(out.data(), a.data(), static_cast<size_t>(n) * 4);
      k->softmax(out.data(), n);
    } else if (op == "argmax") {
      benchmark::DoNotOptimize(k->argmax(a.data(), n));
    } else if (op.rfind("convert", 0) == 0) {
      k->convert_from_f32(conv, a.data(), bytes.data(), n);
    } else if (op.rfind("dequantize", 0) == 0) {
      k->dequantize_row(conv, bytes.data(), out.data(), n);
    } else {
      k->quantize_acts(layout, a.data(), n, 1, acts.data());
    }
    benchmark::ClobberMemory();
  }
  state.counters["elem/s"] = benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

void RegisterAll() {
  auto finish = [](benchmark::internal::Benchmark* b) {
    b->Unit(benchmark::kMillisecond);
    if (BenchUseRealTime()) b->UseRealTime();
  };
  finish(benchmark::RegisterBenchmark("Stream/read", BenchStreamRead, false));
  finish(benchmark::RegisterBenchmark("Stream/read_4k_pages", BenchStreamRead, true));
  finish(benchmark::RegisterBenchmark("Stream/triad", BenchStreamTriad));
  const DType types[] = {DType::kF32,  DType::kF16,  DType::kBF16,   DType::kQ8_0,   DType::kQ4_0,
                         DType::kQ4_K, DType::kQ5_K, DType::kQ6_K,   DType::kQ5_0,   DType::kQ4_1,
                         DType::kIQ4_NL, DType::kIQ4_XS, DType::kQ3_K, DType::kQ2_K};
  struct Proj {
    const char* name;
    int64_t rows, cols;
  };
  const Proj projs[] = {{"q_o", kS.hidden, kS.hidden}, {"k_v", kS.kv, kS.hidden}, {"gate_up", kS.ffn, kS.hidden},
                        {"down", kS.hidden, kS.ffn},   {"output", kS.vocab, kS.hidden}};
  for (Isa isa : {Isa::kAvx512Bf16, Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
    const KernelTable* k = GetKernelTable(isa);
    if (k == nullptr) continue;
    for (const char* op : {"rms_norm", "silu_mul", "add", "axpy", "dot", "softmax", "argmax", "convert_f16",
                           "convert_bf16", "convert_q8_0", "dequantize_f16", "dequantize_bf16", "dequantize_q8_0",
                           "quantize_acts_q8_0", "quantize_acts_q8k"}) {
      const bool blocks = std::string(op).find("q8") != std::string::npos;
      for (int64_t n : {int64_t{2048}, blocks ? int64_t{5632} : int64_t{5633}}) {
        const std::string name = std::string("Ops/") + IsaName(isa) + "/" + op + "/n:" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), BenchOp, k, std::string(op), n);
      }
    }
    for (DType t : types) {
      for (int64_t m : {1, 512}) {
        for (const Proj& p : projs) {
          const std::string name = std::string("MatMul/") + IsaName(isa) + "/" + DTypeName(t) + "/" + p.name +
                                   "/m:" + std::to_string(m);
          finish(benchmark::RegisterBenchmark(name.c_str(), BenchMatMul, k, t, p.rows, p.cols, m));
        }
        for (const ModelShape& s : {kS, kM}) {
          const std::string name = std::string("Model/") + s.name + "/" + IsaName(isa) + "/" + DTypeName(t) +
                                   "/m:" + std::to_string(m);
          finish(benchmark::RegisterBenchmark(name.c_str(), BenchModel, k, t, s, m));
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
              kvs::kernels::IsaName(kvs::kernels::ActiveKernels().isa), kvs::testing::BenchThreads(),
              kvs::testing::BenchUseRealTime() ? "wall" : "CPU");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
