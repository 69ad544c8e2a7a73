// Declarations of the functions each instruction-set variant defines
// (namespaces scalar, avx2, avx512; avx512bf16 only its BF16 tile and
// activation converter). dispatch.cc puts them into the
// KernelTables; the AVX variants live in files compiled with per-file ISA
// flags and must only be called when the CPU supports them.
#pragma once

#include <cstdint>

#include "base/dtype.h"
#include "kernels/tile.h"

#define KVS_DECLARE_ISA_KERNELS(ns)                                                       \
  namespace ns {                                                                          \
  void TileF32(const TileArgs& a);                                                        \
  void TileF16(const TileArgs& a);                                                        \
  void TileBF16(const TileArgs& a);                                                       \
  void TileQ8_0(const TileArgs& a);                                                       \
  void TileQ4_0(const TileArgs& a);                                                       \
  void TileQ4_K(const TileArgs& a);                                                       \
  void TileQ5_K(const TileArgs& a);                                                       \
  void TileQ6_K(const TileArgs& a);                                                       \
  void TileQ5_0(const TileArgs& a);                                                       \
  void TileQ4_1(const TileArgs& a);                                                       \
  void TileIQ4_NL(const TileArgs& a);                                                     \
  void TileIQ4_XS(const TileArgs& a);                                                     \
  void TileQ3_K(const TileArgs& a);                                                       \
  void TileQ2_K(const TileArgs& a);                                                       \
  void QuantizeActs(const ActLayout& layout, const float* x, int64_t ldx, int64_t m,      \
                    uint8_t* buf);                                                        \
  void RmsNorm(const float* x, const float* w, float* out, int64_t n, float eps);         \
  void SiluMul(const float* gate, const float* up, float* out, int64_t n);                \
  void Add(const float* a, const float* b, float* out, int64_t n);                        \
  void Axpy(float a, const float* x, float* y, int64_t n);                                \
  float Dot(const float* a, const float* b, int64_t n);                                   \
  void Softmax(float* x, int64_t n);                                                      \
  void ConvertFromF32(DType t, const float* x, void* y, int64_t n);                       \
  void DequantizeRow(DType t, const void* x, float* y, int64_t n);                        \
  int64_t ArgMax(const float* x, int64_t n);                                              \
  }

namespace kvs::kernels {
KVS_DECLARE_ISA_KERNELS(scalar)
KVS_DECLARE_ISA_KERNELS(avx2)
KVS_DECLARE_ISA_KERNELS(avx512)
namespace avx512bf16 {
void TileBF16(const TileArgs& a);
void Bf16Acts(const float* x, int64_t ldx, int64_t m, int64_t i0, int64_t i1, int64_t cols, uint16_t* xb);
// Activation rows per group of Bf16Acts' layout.
inline constexpr int64_t kBf16ActsRows = 12;
}  // namespace avx512bf16
}  // namespace kvs::kernels

#undef KVS_DECLARE_ISA_KERNELS
