// Scalar reference quantizers and dequantizers, one pair per block type.
// The quantizers reproduce the bytes of llama.cpp's non-imatrix reference
// quantizers (quantize_row_*_ref) under IEEE single-precision arithmetic
// without FP contraction (how ggml-base is compiled); the dequantizers
// reproduce ggml's dequantize_row_* floats. n is a multiple of the block
// size. Pure functions; reentrant.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "kernels/quant_formats.h"

namespace kvs::kernels {

// ggml's round-to-nearest-even via the 1.5*2^23 magic constant. Exact for
// |v| < 2^22; beyond that it returns what the bit trick yields, like ggml.
inline int NearestInt(float v) {
  const float t = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Groups whose largest magnitude is below this are quantized as zeros
// (ggml's GROUP_MAX_EPS).
inline constexpr float kGroupMaxEps = 1e-15f;

// The value of x[0..n) with the largest magnitude, signed (the first one on a
// tie; 0 when all are 0); *amax is its magnitude.
inline float SignedAbsMax(const float* x, int n, float* amax) {
  float max = 0;
  *amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > *amax) {
      *amax = ax;
      max = x[i];
    }
  }
  return max;
}

// ggml's make_qkx2_quants (shared by the K-quant quantizers): an affine fit
// x[i] ~ scale * L[i] - *the_min, L in [0, nmax]; returns scale. Laux is n
// bytes of scratch.
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L, float* the_min,
                     uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

void QuantizeRowQ8_0Ref(const float* x, BlockQ8_0* y, int64_t n);
void QuantizeRowQ4_0Ref(const float* x, BlockQ4_0* y, int64_t n);
void QuantizeRowQ4_KRef(const float* x, BlockQ4_K* y, int64_t n);
void QuantizeRowQ5_KRef(const float* x, BlockQ5_K* y, int64_t n);
void QuantizeRowQ6_KRef(const float* x, BlockQ6_K* y, int64_t n);
void QuantizeRowQ8_KRef(const float* x, BlockQ8_K* y, int64_t n);
// quant_ref_ext.cc. IQ4_NL and IQ4_XS follow llama.cpp's quantize_iq4_nl /
// quantize_iq4_xs without an importance matrix (what llama-quantize runs;
// its quantize_row_iq4_nl_ref skips the scale search).
void QuantizeRowQ5_0Ref(const float* x, BlockQ5_0* y, int64_t n);
void QuantizeRowQ4_1Ref(const float* x, BlockQ4_1* y, int64_t n);
void QuantizeRowIQ4_NLRef(const float* x, BlockIQ4_NL* y, int64_t n);
void QuantizeRowIQ4_XSRef(const float* x, BlockIQ4_XS* y, int64_t n);
void QuantizeRowQ3_KRef(const float* x, BlockQ3_K* y, int64_t n);
void QuantizeRowQ2_KRef(const float* x, BlockQ2_K* y, int64_t n);

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, int64_t n);
void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, int64_t n);
void DequantizeRowQ4_K(const BlockQ4_K* x, float* y, int64_t n);
void DequantizeRowQ5_K(const BlockQ5_K* x, float* y, int64_t n);
void DequantizeRowQ6_K(const BlockQ6_K* x, float* y, int64_t n);
void DequantizeRowQ8_K(const BlockQ8_K* x, float* y, int64_t n);
void DequantizeRowQ5_0(const BlockQ5_0* x, float* y, int64_t n);
void DequantizeRowQ4_1(const BlockQ4_1* x, float* y, int64_t n);
void DequantizeRowIQ4_NL(const BlockIQ4_NL* x, float* y, int64_t n);
void DequantizeRowIQ4_XS(const BlockIQ4_XS* x, float* y, int64_t n);
void DequantizeRowQ3_K(const BlockQ3_K* x, float* y, int64_t n);
void DequantizeRowQ2_K(const BlockQ2_K* x, float* y, int64_t n);

// The scalar DequantizeRow for any supported type (F32, F16, BF16, Q8_0,
// Q4_0, Q5_0, Q4_1, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_K).
void DequantizeRowRef(DType t, const void* x, float* y, int64_t n);

}  // namespace kvs::kernels
