// The contract between MatMul's driver (dispatch.cc, matmul.cc) and each
// instruction-set variant's tiles and activation quantizers: the weight
// types, the byte layout of quantized activation rows, and the arguments of
// one tile. Variants include this (through isa_decls.h), never the driver.
// Plain data and pure functions: thread-safe.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace kvs::kernels {

// n rounded up to a multiple of 64 (bytes: cache-line aligned offsets).
inline constexpr int64_t RoundUp64(int64_t n) { return (n + 63) / 64 * 64; }

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

}  // namespace kvs::kernels
