// Kernel variants and how MatMul drives them (internal to kernels/ and its
// tests). Each instruction-set variant (scalar, AVX2+FMA+F16C,
// AVX-512F/BW/VL+VNNI) provides a KernelTable of plain function pointers;
// ActiveKernels() picks the best one the CPU supports once, at first use.
// Tests and benchmarks call GetKernelTable(isa) to run a specific variant.
// Thread-safety: tables are immutable after construction; every function in
// them is reentrant.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/dtype.h"
#include "base/thread_pool.h"
#include "kernels/kernels.h"
#include "kernels/tile.h"

namespace kvs::kernels {

// kAvx512Bf16: the avx512 kernels, except BF16 weights through AVX512_BF16
// dot products on activations rounded to bf16 (avx512bf16_matmul.cc).
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };
inline constexpr int kNumIsas = 4;

const char* IsaName(Isa isa);

struct KernelTable {
  Isa isa = Isa::kScalar;
  // Rows a tile's row count should be a multiple of, except for the last
  // (a multiple of kPanelRows when the variant reads packed panels).
  int row_granule = 1;
  // The quantized tiles accept packed panels (MatView::packed).
  bool reads_packed = false;
  // The BF16 tile reads BF16 panels (kernels/packed.h) when a matrix has
  // them, and needs no rows then.
  bool reads_packed_bf16 = false;
  TileFn tile[kNumWTypes] = {};
  // x [m, ldx] -> buf [m, layout.row_stride]
  // Set when the BF16 tile reads bf16 activations (avx512bf16), converted
  // once per MatMul call: rows [i0, i1) of x [m, ldx] into xb, in the
  // layout the tile reads for an m-row call. xb holds
  // RoundUp(m, bf16_acts_rows) x RoundUp32(cols) values; threads split the
  // rows at multiples of bf16_acts_rows (rows of one group share lines).
  void (*bf16_acts)(const float* x, int64_t ldx, int64_t m, int64_t i0, int64_t i1, int64_t cols,
                    uint16_t* xb) = nullptr;
  int64_t bf16_acts_rows = 1;
  void (*quantize_acts)(const ActLayout& layout, const float* x, int64_t ldx, int64_t m,
                        uint8_t* buf) = nullptr;
  void (*rms_norm)(const float* x, const float* w, float* out, int64_t n, float eps) = nullptr;
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
  void (*add)(const float* a, const float* b, float* out, int64_t n) = nullptr;
  void (*axpy)(float a, const float* x, float* y, int64_t n) = nullptr;
  float (*dot)(const float* a, const float* b, int64_t n) = nullptr;
  void (*softmax)(float* x, int64_t n) = nullptr;
  int64_t (*argmax)(const float* x, int64_t n) = nullptr;
  // F32, F16, BF16, Q8_0; same bytes as QuantizeRow.
  void (*convert_from_f32)(DType t, const float* x, void* y, int64_t n) = nullptr;
  // Any type DequantizeRow accepts; same floats as the reference.
  void (*dequantize_row)(DType t, const void* x, float* y, int64_t n) = nullptr;
};

// nullptr when this CPU (or KVSERVE_ISA / KVSERVE_FORCE_SCALAR) rules the
// variant out.
const KernelTable* GetKernelTable(Isa isa);
// The best supported variant, chosen once.
const KernelTable& ActiveKernels();

// MatMul / MatMulMany through a given variant (same contracts).
void MatMulWith(const KernelTable& k, const MatView& w, const float* x, int64_t m, float* y,
                ThreadPool& pool);
void MatMulManyWith(const KernelTable& k, const MatView* ws, float* const* ys, int n, const float* x,
                    int64_t m, ThreadPool& pool);
void GatedMatMulWith(const KernelTable& k, const MatView& gate, const MatView& up, const float* x, int64_t m,
                     float* y, float* up_out, ThreadPool& pool);

}  // namespace kvs::kernels
