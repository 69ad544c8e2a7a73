// MatMul driver and the public entry points of kernels.h: quantizes the
// activations once per call (in the calling thread's scratch, shared
// read-only with the pool), then gives each pool thread one contiguous range
// of weight rows; the variant's tile function does the cache blocking.
#include <algorithm>

#include "base/status.h"
#include "kernels/dispatch.h"
#include "kernels/kernels.h"
#include "kernels/scratch.h"

namespace kvs::kernels {
namespace {

// Below this many multiply-adds a call runs on the calling thread only: the
// fork-join costs more than the work.
constexpr int64_t kMinParallelMacs = 1 << 17;
// Activation rows per thread below which quantizing them is not split.
constexpr int64_t kMinParallelQuantRows = 16;

bool IsQuantized(WType t) { return t != WType::kF32 && t != WType::kF16 && t != WType::kBF16; }

}  // namespace

void MatMulWith(const KernelTable& k, const MatView& w, const float* x, int64_t m, float* y,
                ThreadPool& pool) {
  WType wt;
  KVS_CHECK_MSG(ToWType(w.type, &wt), "MatMul: unsupported weight type {}", DTypeName(w.type));
  KVS_CHECK_MSG(w.cols > 0 && w.cols % Traits(w.type).block_size == 0,
                "MatMul: {} columns is not a whole number of {} blocks", w.cols, DTypeName(w.type));
  if (m <= 0 || w.rows <= 0) return;

  TileArgs base;
  base.row_bytes = RowBytes(w.type, w.cols);
  base.cols = w.cols;
  base.m = m;
  base.x = x;
  base.ldx = w.cols;
  base.ldy = w.rows;

  const int64_t macs = w.rows * w.cols * m;
  int nth = macs < kMinParallelMacs ? 1 : pool.size();

  ActLayout layout;
  if (IsQuantized(wt)) {
    layout = MakeActLayout(wt, w.cols);
    uint8_t* buf = ThreadScratch(ScratchSlot::kActivations,
                                 static_cast<size_t>(m * layout.row_stride));
    if (nth > 1 && m >= kMinParallelQuantRows * nth) {
      pool.ParallelFor(m, [&](int64_t b, int64_t e) {
        k.quantize_acts(layout, x + b * w.cols, w.cols, e - b, buf + b * layout.row_stride);
      });
    } else {
      k.quantize_acts(layout, x, w.cols, m, buf);
    }
    base.acts = buf;
    base.layout = &layout;
  }

  // Everything the threads need, captured through one pointer so the
  // std::function the pool takes stays in its small buffer (no allocation).
  struct Split {
    TileArgs base;
    TileFn fn;
    const uint8_t* data;
    float* y;
    int64_t rows, groups, granule;
    int nth;
  } split{base, k.tile[static_cast<int>(wt)], static_cast<const uint8_t*>(w.data), y, w.rows, 0,
          k.row_granule, 0};
  split.groups = (w.rows + split.granule - 1) / split.granule;
  split.nth = static_cast<int>(std::min<int64_t>(nth, split.groups));
  auto run = [s = &split](int tid, int) {
    if (tid >= s->nth) return;
    const int64_t r0 = s->groups * tid / s->nth * s->granule;
    const int64_t r1 = std::min(s->rows, s->groups * (tid + 1) / s->nth * s->granule);
    if (r0 >= r1) return;
    TileArgs a = s->base;
    a.w = s->data + r0 * a.row_bytes;
    a.rows = r1 - r0;
    a.y = s->y + r0;
    s->fn(a);
  };
  if (split.nth == 1) {
    run(0, 1);
  } else {
    pool.Run(run);
  }
}

void MatMul(const MatView& w, const float* x, int64_t m, float* y, ThreadPool& pool) {
  MatMulWith(ActiveKernels(), w, x, m, y, pool);
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

const char* KernelVariantName() { return IsaName(ActiveKernels().isa); }

}  // namespace kvs::kernels
