// MatMul driver and the public entry points of kernels.h: quantizes the
// activations once per call and weight type (in the calling thread's
// scratch, shared read-only with the pool), then gives each pool thread one
// contiguous range of output rows, counted across all the matrices of the
// call; the variant's tile function does the cache blocking.
#include <algorithm>

#include "base/status.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/packed.h"
#include "kernels/scratch.h"

namespace kvs::kernels {
namespace {

// Below this many multiply-adds a call runs on the calling thread only: the
// fork-join costs more than the work.
constexpr int64_t kMinParallelMacs = 1 << 17;
// Activation rows per thread below which quantizing them is not split.
constexpr int64_t kMinParallelQuantRows = 16;
// Matrices one call can take (a layer's q/k/v or gate/up in practice).
constexpr int kMaxMats = 8;
// Most activation rows one pass of the tiles takes. Every weight panel runs
// against all m rows of a pass, so a pass's activations (m x cols: 23 MB
// in bf16, 46 MB in f32 for a 4,096-token batch through a 5,632-column
// ffn_down) must stay in cache; otherwise each 32-row panel streams them
// from memory again. 512 rows is llama.cpp's default micro-batch; a batch
// of up to 512 rows (pp512) is still one pass, reading each weight once.
// kvserve bench M-F16 pp4096 (BF16 weights), 2 threads: 123 -> 201 t/s.
constexpr int64_t kMaxPassRows = 512;

bool IsQuantized(WType t) { return t != WType::kF32 && t != WType::kF16 && t != WType::kBF16; }

// Everything the threads need, reached through one pointer so the
// std::function the pool takes stays in its small buffer (no allocation).
struct Job {
  int n = 0;
  TileArgs args[kMaxMats];   // per matrix, for all its rows
  TileFn fn[kMaxMats];
  int64_t first_group[kMaxMats + 1];  // prefix sums of row groups
  DType types[kMaxMats];
  int64_t granule = 1;
  int nth = 1;
  // Gated: matrices 0 (gate) and 1 (up) have the same rows; each thread
  // takes the same rows of both, then ys[0] = silu(ys[0]) * ys[1] on them.
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
};

// Matrix j's tile for rows [r0, r1).
void RunTile(const Job& job, int j, int64_t r0, int64_t r1) {
  const TileArgs& full = job.args[j];
  TileArgs a = full;
  a.w = full.packed ? full.w + r0 / kPanelRows * PanelBytes(job.types[j], full.cols) : full.w + r0 * full.row_bytes;
  a.rows = r1 - r0;
  a.y = full.y + r0;
  job.fn[j](a);
}

void RunShare(const Job& job, int tid) {
  if (tid >= job.nth) return;
  if (job.silu_mul != nullptr) {
    const int64_t total = job.first_group[1];
    const int64_t g0 = total * tid / job.nth, g1 = total * (tid + 1) / job.nth;
    if (g0 >= g1) return;
    const TileArgs& gate = job.args[0];
    const int64_t r0 = g0 * job.granule, r1 = std::min(gate.rows, g1 * job.granule);
    RunTile(job, 0, r0, r1);
    RunTile(job, 1, r0, r1);
    for (int64_t i = 0; i < gate.m; ++i) {
      float* g = gate.y + i * gate.ldy + r0;
      job.silu_mul(g, job.args[1].y + i * job.args[1].ldy + r0, g, r1 - r0);
    }
    return;
  }
  const int64_t total = job.first_group[job.n];
  const int64_t g0 = total * tid / job.nth, g1 = total * (tid + 1) / job.nth;
  for (int j = 0; j < job.n; ++j) {
    const int64_t lo = std::max(g0, job.first_group[j]), hi = std::min(g1, job.first_group[j + 1]);
    if (lo >= hi) continue;
    const int64_t r0 = (lo - job.first_group[j]) * job.granule;
    const int64_t r1 = std::min(job.args[j].rows, (hi - job.first_group[j]) * job.granule);
    RunTile(job, j, r0, r1);
  }
}


void MatMulImpl(const KernelTable& k, const MatView* ws, float* const* ys, int n, const float* x, int64_t m,
                ThreadPool& pool, bool gated) {
  KVS_CHECK_MSG(n >= 1 && n <= kMaxMats, "MatMulMany: {} matrices (1..{})", n, kMaxMats);
  const int64_t cols = ws[0].cols;
  WType wt[kMaxMats];
  int64_t macs = 0;
  for (int j = 0; j < n; ++j) {
    KVS_CHECK_MSG(ToWType(ws[j].type, &wt[j]), "MatMul: unsupported weight type {}", DTypeName(ws[j].type));
    KVS_CHECK_MSG(ws[j].cols == cols, "MatMulMany: matrices with {} and {} columns", cols, ws[j].cols);
    KVS_CHECK_MSG(cols > 0 && cols % Traits(ws[j].type).block_size == 0,
                  "MatMul: {} columns is not a whole number of {} blocks", cols, DTypeName(ws[j].type));
    macs += std::max<int64_t>(ws[j].rows, 0) * cols * m;
  }
  if (m <= 0 || macs == 0) return;
  if (m > kMaxPassRows) {
    // Rows are independent: each pass gives its rows the same sums, in the
    // same order, as one pass over all m would.
    float* yb[kMaxMats];
    for (int64_t b = 0; b < m; b += kMaxPassRows) {
      for (int j = 0; j < n; ++j) yb[j] = ys[j] + b * ws[j].rows;
      MatMulImpl(k, ws, yb, n, x + b * cols, std::min(kMaxPassRows, m - b), pool, gated);
    }
    return;
  }
  const int nth = macs < kMinParallelMacs ? 1 : pool.size();

  // Quantize the activations once per distinct weight type (types that
  // share a layout still differ in their aux terms).
  ActLayout layouts[kMaxMats];
  int64_t offsets[kMaxMats];
  int owner[kMaxMats];  // which earlier matrix's buffer matrix j uses, or -1
  int64_t total_bytes = 0;
  for (int j = 0; j < n; ++j) {
    owner[j] = -1;
    if (!IsQuantized(wt[j])) continue;
    for (int i = 0; i < j; ++i) {
      if (wt[i] == wt[j]) {
        owner[j] = owner[i] >= 0 ? owner[i] : i;
        break;
      }
    }
    if (owner[j] >= 0) continue;
    layouts[j] = MakeActLayout(wt[j], cols);
    offsets[j] = total_bytes;
    total_bytes += m * layouts[j].row_stride;
  }
  uint8_t* buf = total_bytes > 0 ? ThreadScratch(ScratchSlot::kActivations, static_cast<size_t>(total_bytes)) : nullptr;
  for (int j = 0; j < n; ++j) {
    if (!IsQuantized(wt[j]) || owner[j] >= 0) continue;
    const ActLayout& l = layouts[j];
    uint8_t* out = buf + offsets[j];
    if (nth > 1 && m >= kMinParallelQuantRows * nth) {
      pool.ParallelFor(m, [&](int64_t b, int64_t e) {
        k.quantize_acts(l, x + b * cols, cols, e - b, out + b * l.row_stride);
      });
    } else {
      k.quantize_acts(l, x, cols, m, out);
    }
  }

  // bf16 activations for the BF16 matrices, once (avx512bf16), in the
  // layout the BF16 tile reads.
  uint16_t* xb = nullptr;
  if (k.bf16_acts != nullptr && std::any_of(wt, wt + n, [](WType w) { return w == WType::kBF16; })) {
    const int64_t g = k.bf16_acts_rows, groups = (m + g - 1) / g;
    const int64_t cp = (cols + 31) / 32 * 32;
    xb = reinterpret_cast<uint16_t*>(ThreadScratch(ScratchSlot::kBf16Acts, static_cast<size_t>(groups * g * cp) * 2));
    if (nth > 1 && m >= kMinParallelQuantRows * nth) {
      pool.ParallelFor(groups, [&](int64_t b, int64_t e) { k.bf16_acts(x, cols, m, b * g, std::min(m, e * g), cols, xb); });
    } else {
      k.bf16_acts(x, cols, m, 0, m, cols, xb);
    }
  }

  Job job;
  job.n = n;
  job.granule = k.row_granule;
  job.first_group[0] = 0;
  for (int j = 0; j < n; ++j) {
    TileArgs& a = job.args[j];
    job.types[j] = ws[j].type;
    a.packed = ws[j].packed != nullptr &&
               (wt[j] == WType::kBF16 ? k.reads_packed_bf16 : k.reads_packed && IsQuantized(wt[j]));
    a.w = static_cast<const uint8_t*>(a.packed ? ws[j].packed : ws[j].data);
    a.row_bytes = RowBytes(ws[j].type, cols);
    a.rows = std::max<int64_t>(ws[j].rows, 0);
    KVS_CHECK_MSG(a.rows == 0 || a.w != nullptr, "MatMul: a {} matrix without rows under the {} kernels (its rows "
                  "were packed for another variant at load)", DTypeName(ws[j].type), IsaName(k.isa));
    a.cols = cols;
    a.m = m;
    a.x = x;
    a.ldx = cols;
    if (wt[j] == WType::kBF16) a.xb = xb;
    a.y = ys[j];
    a.ldy = ws[j].rows;
    if (IsQuantized(wt[j])) {
      const int src = owner[j] >= 0 ? owner[j] : j;
      a.acts = buf + offsets[src];
      a.layout = &layouts[src];
    }
    job.fn[j] = k.tile[static_cast<int>(wt[j])];
    job.first_group[j + 1] = job.first_group[j] + (a.rows + job.granule - 1) / job.granule;
  }
  if (gated) job.silu_mul = k.silu_mul;
  job.nth = static_cast<int>(std::min<int64_t>(nth, job.first_group[gated ? 1 : n]));
  if (job.nth == 1) {
    RunShare(job, 0);
  } else {
    pool.Run([j = &job](int tid, int) { RunShare(*j, tid); });
  }
}

}  // namespace

void MatMulManyWith(const KernelTable& k, const MatView* ws, float* const* ys, int n, const float* x,
                    int64_t m, ThreadPool& pool) {
  MatMulImpl(k, ws, ys, n, x, m, pool, false);
}

void GatedMatMulWith(const KernelTable& k, const MatView& gate, const MatView& up, const float* x, int64_t m,
                     float* y, float* up_out, ThreadPool& pool) {
  KVS_CHECK_MSG(gate.rows == up.rows, "GatedMatMul: gate has {} rows, up {}", gate.rows, up.rows);
  const MatView ws[2] = {gate, up};
  float* const ys[2] = {y, up_out};
  MatMulImpl(k, ws, ys, 2, x, m, pool, true);
}

void MatMulWith(const KernelTable& k, const MatView& w, const float* x, int64_t m, float* y,
                ThreadPool& pool) {
  MatMulManyWith(k, &w, &y, 1, x, m, pool);
}

void MatMul(const MatView& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  MatMulWith(ActiveKernels(), w, x, m, y, pool);
}

void MatMulMany(const MatView* ws, float* const* ys, int n, const float* x, int64_t m, ThreadPool& pool) {
  MatMulManyWith(ActiveKernels(), ws, ys, n, x, m, pool);
}

void GatedMatMul(const MatView& gate, const MatView& up, const float* x, int64_t m, float* y, float* up_out,
                 ThreadPool& pool) {
  GatedMatMulWith(ActiveKernels(), gate, up, x, m, y, up_out, pool);
}

void RmsNorm(const float* x, const float* w, float* out, int64_t n, float eps) {
  ActiveKernels().rms_norm(x, w, out, n, eps);
}
void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  ActiveKernels().silu_mul(gate, up, out, n);
}
void Add(const float* a, const float* b, float* out, int64_t n) { ActiveKernels().add(a, b, out, n); }
void Axpy(float a, const float* x, float* y, int64_t n) { ActiveKernels().axpy(a, x, y, n); }
float Dot(const float* a, const float* b, int64_t n) { return ActiveKernels().dot(a, b, n); }
void Softmax(float* x, int64_t n) { ActiveKernels().softmax(x, n); }
int64_t ArgMax(const float* x, int64_t n) { return ActiveKernels().argmax(x, n); }

const char* KernelVariantName() { return IsaName(ActiveKernels().isa); }
bool NativeBf16Dot() { return ActiveKernels().bf16_acts != nullptr; }

}  // namespace kvs::kernels
