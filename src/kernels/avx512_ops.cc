// AVX-512 variant: activation quantization, storage conversion and
// elementwise ops, with masked loads/stores for tails. The quantizers
// reproduce the scalar reference bit for bit.
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/avx512_util.h"
#include "kernels/isa_decls.h"
#include "kernels/quant_formats.h"
#include "kernels/quant_ref.h"

namespace kvs::kernels::avx512 {
namespace {

// One Q8_0 block as quantize_row_q8_0_ref; returns the f32 scale (before f16
// rounding) and the sum of the codes in *sum.
float QuantizeBlockQ8_0(const float* x, int8_t* qs, int32_t* sum) {
  const __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
  const float d = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1))) / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  const __m512 vid = _mm512_set1_ps(id);
  const __m512i q0 = _mm512_cvttps_epi32(RoundAway(_mm512_mul_ps(v0, vid)));
  const __m512i q1 = _mm512_cvttps_epi32(RoundAway(_mm512_mul_ps(v1, vid)));
  *sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(q1));
  return d;
}

// One Q8_K block as quantize_row_q8_K_ref; returns d, fills qs and bsums.
float QuantizeBlockQ8_K(const float* x, int8_t* qs, int32_t* bsums) {
  __m512 amax_v = _mm512_setzero_ps();
  for (int j = 0; j < 16; ++j) amax_v = _mm512_max_ps(amax_v, _mm512_abs_ps(_mm512_loadu_ps(x + 16 * j)));
  const float amax = _mm512_reduce_max_ps(amax_v);
  if (amax == 0) {
    std::memset(qs, 0, 256);
    for (int g = 0; g < 16; ++g) bsums[g] = 0;
    return 0.f;
  }
  float max = 0;  // the first element of largest magnitude, with its sign
  const __m512 target = _mm512_set1_ps(amax);
  for (int j = 0; j < 16; ++j) {
    const __mmask16 hit = _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + 16 * j)), target, _CMP_EQ_OQ);
    if (hit != 0) {
      max = x[16 * j + __builtin_ctz(static_cast<unsigned>(hit))];
      break;
    }
  }
  const float iscale = -127.f / max;
  const __m512 vis = _mm512_set1_ps(iscale);
  const __m512i top = _mm512_set1_epi32(127);
  for (int g = 0; g < 16; ++g) {
    const __m512 v = _mm512_roundscale_ps(_mm512_mul_ps(_mm512_loadu_ps(x + 16 * g), vis),
                                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512i q = _mm512_min_epi32(_mm512_cvttps_epi32(v), top);
    bsums[g] = _mm512_reduce_add_epi32(q);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16 * g), _mm512_cvtsepi32_epi8(q));
  }
  return 1 / iscale;
}

void QuantizeActRow(const ActLayout& l, const float* x, uint8_t* row) {
  auto* qs = reinterpret_cast<int8_t*>(row + l.qs_off);
  auto* d = reinterpret_cast<float*>(row + l.d_off);
  if (l.act_block == 32) {
    for (int64_t b = 0; b < l.cols / 32; ++b) {
      int32_t sum;
      d[b] = F16ToF32(F32ToF16(QuantizeBlockQ8_0(x + 32 * b, qs + 32 * b, &sum)));
      WriteActAux(l, b, d[b], &sum, row);
    }
    return;
  }
  for (int64_t b = 0; b < l.cols / 256; ++b) {
    int32_t bsums[16];
    d[b] = QuantizeBlockQ8_K(x + 256 * b, qs + 256 * b, bsums);
    WriteActAux(l, b, d[b], bsums, row);
  }
}

// f32 -> bf16 bits for 16 values, rounding like F32ToBF16.
__m256i ToBF16(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
  const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
  const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
}

}  // namespace

void QuantizeActs(const ActLayout& layout, const float* x, int64_t ldx, int64_t m, uint8_t* buf) {
  for (int64_t i = 0; i < m; ++i) QuantizeActRow(layout, x + i * ldx, buf + i * layout.row_stride);
}

void ConvertFromF32(DType t, const float* x, void* y, int64_t n) {
  switch (t) {
    case DType::kF32:
      std::memcpy(y, x, static_cast<size_t>(n) * 4);
      return;
    case DType::kF16: {
      auto* out = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = TailMask(n - i);
        const __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        _mm256_mask_storeu_epi16(out + i, m, h);
      }
      return;
    }
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(y);
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = TailMask(n - i);
        _mm256_mask_storeu_epi16(out + i, m, ToBF16(_mm512_maskz_loadu_ps(m, x + i)));
      }
      return;
    }
    case DType::kQ8_0: {
      auto* out = static_cast<BlockQ8_0*>(y);
      for (int64_t b = 0; b < n / 32; ++b) {
        int32_t sum;
        out[b].d = F32ToF16(QuantizeBlockQ8_0(x + 32 * b, out[b].qs, &sum));
      }
      return;
    }
    default:
      QuantizeRow(t, x, y, n);
  }
}

void DequantizeRow(DType t, const void* x, float* y, int64_t n) {
  switch (t) {
    case DType::kF16: {
      const auto* in = static_cast<const uint16_t*>(x);
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = TailMask(n - i);
        _mm512_mask_storeu_ps(y + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, in + i)));
      }
      return;
    }
    case DType::kBF16: {
      const auto* in = static_cast<const uint16_t*>(x);
      for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = TailMask(n - i);
        const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, in + i));
        _mm512_mask_storeu_ps(y + i, m, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
      }
      return;
    }
    case DType::kQ8_0: {
      const auto* in = static_cast<const BlockQ8_0*>(x);
      for (int64_t b = 0; b < n / 32; ++b) {
        const __m512 d = _mm512_set1_ps(_cvtsh_ss(in[b].d));
        for (int j = 0; j < 32; j += 16) {
          const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in[b].qs + j));
          _mm512_storeu_ps(y + 32 * b + j, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d));
        }
      }
      return;
    }
    default:
      DequantizeRowRef(t, x, y, n);
  }
}

void RmsNorm(const float* x, const float* w, float* out, int64_t n, float eps) {
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    acc[0] = _mm512_fmadd_ps(a, a, acc[0]);
    acc[1] = _mm512_fmadd_ps(b, b, acc[1]);
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(TailMask(n - i), x + i);
    acc[0] = _mm512_fmadd_ps(a, a, acc[0]);
  }
  const float ss = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
  const __m512 vs = _mm512_set1_ps(1.0f / std::sqrt(ss / static_cast<float>(n) + eps));
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 v = _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs), _mm512_maskz_loadu_ps(m, w + i));
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 s = _mm512_div_ps(g, _mm512_add_ps(one, Exp(_mm512_sub_ps(_mm512_setzero_ps(), g))));
    _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, up + i)));
  }
}

void Add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(out + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
  }
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  const __m512 va = _mm512_set1_ps(a);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 r = _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i));
    _mm512_mask_storeu_ps(y + i, m, r);
  }
}

float Dot(const float* a, const float* b, int64_t n) {
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    acc[0] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc[0]);
    acc[1] = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc[1]);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    acc[0] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc[0]);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  __m512 vmax = _mm512_set1_ps(x[0]);
  for (int64_t i = 0; i < n; i += 16) {
    vmax = _mm512_mask_max_ps(vmax, TailMask(n - i), vmax, _mm512_maskz_loadu_ps(TailMask(n - i), x + i));
  }
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  __m512 vsum = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    const __m512 e = Exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vm));
    _mm512_mask_storeu_ps(x + i, m, e);
    vsum = _mm512_mask_add_ps(vsum, m, vsum, e);
  }
  const __m512 vi = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(vsum));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = TailMask(n - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vi));
  }
}

// Two passes: the maximum (MAXPS keeps its second operand when the first is
// NaN, so NaNs in x are skipped), then the first lane equal to it.
int64_t ArgMax(const float* x, int64_t n) {
  if (std::isnan(x[0])) return 0;
  __m512 vmax = _mm512_set1_ps(x[0]);
  for (int64_t i = 0; i < n; i += 16) {
    vmax = _mm512_mask_max_ps(vmax, TailMask(n - i), _mm512_maskz_loadu_ps(TailMask(n - i), x + i), vmax);
  }
  const __m512 vm = _mm512_set1_ps(_mm512_reduce_max_ps(vmax));
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 eq = _mm512_mask_cmp_ps_mask(TailMask(n - i), _mm512_maskz_loadu_ps(TailMask(n - i), x + i), vm, _CMP_EQ_OQ);
    if (eq != 0) return i + __builtin_ctz(eq);
  }
  return 0;  // unreachable: the maximum is one of the values
}

}  // namespace kvs::kernels::avx512
