// AVX2 variant: activation quantization, storage conversion and elementwise
// ops. The quantizers reproduce the scalar reference bit for bit (same
// division, same rounding rule, exact integer sums).
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "kernels/avx2_util.h"
#include "kernels/isa_decls.h"
#include "kernels/quant_formats.h"
#include "kernels/quant_ref.h"

namespace kvs::kernels::avx2 {
namespace {

// One Q8_0 block as quantize_row_q8_0_ref: qs[32], returns the f32 scale
// (before f16 rounding) and the sum of qs in *sum.
float QuantizeBlockQ8_0(const float* x, int8_t* qs, int32_t* sum) {
  __m256 v[4];
  __m256 amax = _mm256_setzero_ps();
  for (int j = 0; j < 4; ++j) {
    v[j] = _mm256_loadu_ps(x + 8 * j);
    amax = _mm256_max_ps(amax, Abs(v[j]));
  }
  const float d = HMax(amax) / 127;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  const __m256 vid = _mm256_set1_ps(id);
  __m256i q[4];
  for (int j = 0; j < 4; ++j) q[j] = _mm256_cvttps_epi32(RoundAway(_mm256_mul_ps(v[j], vid)));
  *sum = HSumI32(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), PackI32ToI8(q[0], q[1], q[2], q[3]));
  return d;
}

// One Q8_K block as quantize_row_q8_K_ref; returns d, fills qs[256] and
// bsums[16].
float QuantizeBlockQ8_K(const float* x, int8_t* qs, int32_t* bsums) {
  __m256 amax_v = _mm256_setzero_ps();
  for (int j = 0; j < 32; ++j) amax_v = _mm256_max_ps(amax_v, Abs(_mm256_loadu_ps(x + 8 * j)));
  const float amax = HMax(amax_v);
  if (amax == 0) {
    std::memset(qs, 0, 256);
    for (int g = 0; g < 16; ++g) bsums[g] = 0;
    return 0.f;
  }
  // The reference keeps the first element of largest magnitude (its sign
  // decides the sign of d).
  float max = 0;
  const __m256 target = _mm256_set1_ps(amax);
  for (int j = 0; j < 32; ++j) {
    const int mask = _mm256_movemask_ps(_mm256_cmp_ps(Abs(_mm256_loadu_ps(x + 8 * j)), target, _CMP_EQ_OQ));
    if (mask != 0) {
      max = x[8 * j + __builtin_ctz(static_cast<unsigned>(mask))];
      break;
    }
  }
  const float iscale = -127.f / max;
  const __m256 vis = _mm256_set1_ps(iscale);
  const __m256i top = _mm256_set1_epi32(127);
  for (int g = 0; g < 8; ++g) {
    __m256i q[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 32 * g + 8 * j), vis);
      q[j] = _mm256_min_epi32(_mm256_cvttps_epi32(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), top);
    }
    bsums[2 * g] = HSumI32(_mm256_add_epi32(q[0], q[1]));
    bsums[2 * g + 1] = HSumI32(_mm256_add_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs + 32 * g), PackI32ToI8(q[0], q[1], q[2], q[3]));
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

// f32 -> bf16 bits for 8 values, rounding like F32ToBF16.
__m128i ToBF16(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
  const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
  const __m256i packed = _mm256_packus_epi32(r, r);  // lanes: [0..3 0..3 | 4..7 4..7]
  return _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08));
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
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
      }
      for (; i < n; ++i) out[i] = F32ToF16(x[i]);
      return;
    }
    case DType::kBF16: {
      auto* out = static_cast<uint16_t*>(y);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), ToBF16(_mm256_loadu_ps(x + i)));
      }
      for (; i < n; ++i) out[i] = F32ToBF16(x[i]);
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
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
      }
      for (; i < n; ++i) y[i] = F16ToF32(in[i]);
      return;
    }
    case DType::kBF16: {
      const auto* in = static_cast<const uint16_t*>(x);
      int64_t i = 0;
      for (; i + 8 <= n; i += 8) {
        const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i)));
        _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
      }
      for (; i < n; ++i) y[i] = BF16ToF32(in[i]);
      return;
    }
    case DType::kQ8_0: {
      const auto* in = static_cast<const BlockQ8_0*>(x);
      for (int64_t b = 0; b < n / 32; ++b) {
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(in[b].d));
        for (int j = 0; j < 32; j += 8) {
          const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(in[b].qs + j));
          _mm256_storeu_ps(y + 32 * b + j, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), d));
        }
      }
      return;
    }
    default:
      DequantizeRowRef(t, x, y, n);
  }
}

void RmsNorm(const float* x, const float* w, float* out, int64_t n, float eps) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      const __m256 v = _mm256_loadu_ps(x + i + 8 * j);
      acc[j] = _mm256_fmadd_ps(v, v, acc[j]);
    }
  }
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    acc[0] = _mm256_fmadd_ps(v, v, acc[0]);
  }
  float ss = HSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / static_cast<float>(n) + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * scale * w[i];
}

namespace {
__m256 SiluMul8(__m256 g, __m256 u) {
  const __m256 e = Exp(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}
}  // namespace

// The tail goes through the same vector formula, so every element's result
// is the same whichever slice of an array a call covers (GatedMatMul relies
// on it).
void SiluMul(const float* gate, const float* up, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, SiluMul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  }
  if (i < n) {
    alignas(32) float g[8] = {}, u[8] = {};
    for (int64_t j = i; j < n; ++j) {
      g[j - i] = gate[j];
      u[j - i] = up[j];
    }
    _mm256_store_ps(g, SiluMul8(_mm256_load_ps(g), _mm256_load_ps(u)));
    for (int64_t j = i; j < n; ++j) out[j] = g[j - i];
  }
}

void Add(const float* a, const float* b, float* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) out[i] = a[i] + b[i];
}

void Axpy(float a, const float* x, float* y, int64_t n) {
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * x[i];
}

float Dot(const float* a, const float* b, int64_t n) {
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) {
      acc[j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8 * j), _mm256_loadu_ps(b + i + 8 * j), acc[j]);
    }
  }
  for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc[0]);
  float sum = HSum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void Softmax(float* x, int64_t n) {
  if (n <= 0) return;
  __m256 vmax = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float max = HMax(vmax);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 vm = _mm256_set1_ps(max);
  __m256 vsum = _mm256_setzero_ps();
  i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    vsum = _mm256_add_ps(vsum, e);
  }
  float sum = HSum(vsum);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  const __m256 vi = _mm256_set1_ps(inv);
  i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
  for (; i < n; ++i) x[i] *= inv;
}

// Two passes: the maximum (MAXPS keeps its second operand when the first is
// NaN, so NaNs in x are skipped), then the first element equal to it.
int64_t ArgMax(const float* x, int64_t n) {
  if (std::isnan(x[0])) return 0;
  __m256 vmax = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(_mm256_loadu_ps(x + i), vmax);
  float max = HMax(vmax);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 vm = _mm256_set1_ps(max);
  for (i = 0; i + 8 <= n; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vm, _CMP_EQ_OQ));
    if (eq != 0) return i + __builtin_ctz(static_cast<unsigned>(eq));
  }
  for (; i < n; ++i) {
    if (x[i] == max) return i;
  }
  return 0;  // unreachable: the maximum is one of the values
}

}  // namespace kvs::kernels::avx2
