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

namespace kvs::kernels {

// kAvx512Bf16: the avx512 kernels, except BF16 weights through AVX512_BF16
// dot products on activations rounded to bf16 (avx512bf16_matmul.cc).
enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAvx512Bf16 = 3 };
inline constexpr int kNumIsas = 4;

// n rounded up to a multiple of 64 (bytes: cache-line aligned offsets).
inline constexpr int64_t RoundUp64(int64_t n) { return (n + 63) / 64 * 64; }
const char* IsaName(Isa isa);

// Weight types MatMul supports, as a dense index into per-type tables.
enum class WType { kF32 = 0, kF16, kBF16, kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K,
                   kQ5_0, kQ4_1, kIQ4_NL, kIQ4_XS, kQ3_K, kQ2_K };
inline constexpr int kNumWTypes = 14;
// False for types MatMul does not support.
bool ToWType(DType t, WType* out);

// Activation rows quantized for the integer dot product of one weight type.
// Every row occupies `row_stride` bytes (a multiple of 64) of one buffer:
//   [qs_off]  int8  qs[cols]           Q8_0 values (32-element weight
//                                      blocks) or Q8_K values (super-blocks)
//   [d_off]   float d[cols/act_block]  block scale; for Q8_0 the f16-rounded
//                                      scale, as the Q8_0 block stores it
//   [aux_off] per-group correction terms the kernels fold in:
//      Q8_0 weights: int32 [cols/32]  -128 * sum(qs of the block)
//      Q4_0 weights: int32 [cols/32]  -8 * sum(qs of the block)
//      Q6_K weights: int32 [cols/16]  -32 * sum(qs of the 16-group)
//      Q4_K, Q5_K:   float [cols/32]  d * sum(qs of the 32-group)
//      Q5_0 weights: int32 [cols/32]  -16 * sum(qs of the block)
//      IQ4_NL:       as Q8_0 (the grid values are stored + 128)
//      Q4_1 weights: float [cols/32]  d * sum(qs of the block) (ggml's q8_1 s)
//      IQ4_XS:       int32 [cols/32]  -128 * sum(qs of the 32-group) (as
//                    IQ4_NL; the AVX2 kernels use signed values, no aux)
//      Q3_K weights: int32 [cols/16]  -4 * sum(qs of the 16-group)
//      Q2_K weights: int32 [cols/16]  sum(qs of the 16-group)
// (The -c * sum terms let a kernel use unsigned codes q + c for signed ones.)
// All variants produce identical bytes for identical input.
struct ActLayout {
  WType wtype = WType::kQ8_0;
  int64_t cols = 0;
  int act_block = 32;   // elements per activation scale
  int aux_group = 32;   // elements per aux entry
  int64_t qs_off = 0;
  int64_t d_off = 0;
  int64_t aux_off = 0;
  int64_t row_stride = 0;
};
// Only for quantized weight types; cols a multiple of the weight block size.
ActLayout MakeActLayout(WType w, int64_t cols);

// Writes the aux terms of activation block b (act_block elements, scale d)
// into `row` from its code sums: for 32-element blocks sums[0] is the sum of
// the block's codes; for 256-element blocks sums[0..15] are the Q8_K bsums.
// Shared by every variant's activation quantizer so the bytes agree.
inline void WriteActAux(const ActLayout& l, int64_t b, float d, const int32_t* sums, uint8_t* row) {
  auto* ai = reinterpret_cast<int32_t*>(row + l.aux_off);
  auto* af = reinterpret_cast<float*>(row + l.aux_off);
  switch (l.wtype) {
    case WType::kQ8_0:
    case WType::kIQ4_NL: ai[b] = -128 * sums[0]; return;
    case WType::kQ5_0: ai[b] = -16 * sums[0]; return;
    case WType::kQ4_0: ai[b] = -8 * sums[0]; return;
    case WType::kQ4_1: af[b] = d * static_cast<float>(sums[0]); return;
    case WType::kQ6_K:
      for (int g = 0; g < 16; ++g) ai[16 * b + g] = -32 * sums[g];
      return;
    case WType::kQ3_K:
      for (int g = 0; g < 16; ++g) ai[16 * b + g] = -4 * sums[g];
      return;
    case WType::kQ2_K:
      for (int g = 0; g < 16; ++g) ai[16 * b + g] = sums[g];
      return;
    case WType::kIQ4_XS:
      for (int g = 0; g < 8; ++g) ai[8 * b + g] = -128 * (sums[2 * g] + sums[2 * g + 1]);
      return;
    default:  // Q4_K, Q5_K
      for (int g = 0; g < 8; ++g) af[8 * b + g] = d * static_cast<float>(sums[2 * g] + sums[2 * g + 1]);
      return;
  }
}

// One thread's share of a MatMul: weight rows [0, rows) starting at `w`
// against all m activation rows.
//   y[i * ldy + r] = dot(W row r, activation row i)
struct TileArgs {
  // [rows, row_bytes] first weight row of the tile, or with `packed` the
  // first of its panels (kernels/packed.h; the tile then starts at a
  // multiple of 16 rows).
  const uint8_t* w = nullptr;
  bool packed = false;
  int64_t row_bytes = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t m = 0;
  const float* x = nullptr;        // [m, ldx] f32 activations (float weight types)
  int64_t ldx = 0;
  // x as bf16 in the layout the variant's BF16 tile reads
  // (KernelTable::bf16_acts), or null for variants without one.
  const uint16_t* xb = nullptr;
  const uint8_t* acts = nullptr;   // [m, layout.row_stride] (quantized types)
  const ActLayout* layout = nullptr;
  float* y = nullptr;              // [m, ldy], pointing at column 0 of the tile
  int64_t ldy = 0;
};
using TileFn = void (*)(const TileArgs& args);

// Activation row i of a quantized tile (TileArgs::acts, laid out by
// *TileArgs::layout): its codes, block scales and aux terms.
struct ActRowView {
  const int8_t* qs;
  const float* d;
  const uint8_t* aux;
  const int32_t* aux_i() const { return reinterpret_cast<const int32_t*>(aux); }
  const float* aux_f() const { return reinterpret_cast<const float*>(aux); }
  static ActRowView At(const TileArgs& t, int64_t i) {
    const ActLayout& l = *t.layout;
    const uint8_t* row = t.acts + i * l.row_stride;
    return {reinterpret_cast<const int8_t*>(row + l.qs_off), reinterpret_cast<const float*>(row + l.d_off),
            row + l.aux_off};
  }
};

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
