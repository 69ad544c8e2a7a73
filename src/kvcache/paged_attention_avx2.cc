// AVX2/FMA/F16C variant of the attention inner loop. Compiled with
// -mavx2 -mfma -mf16c; only called when the CPU has them.
#include <immintrin.h>

#include "base/fp16.h"
#include "kvcache/paged_attention_impl.h"

namespace kvs::kvcache::internal {
namespace {

inline float HSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v);
  __m128 hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

struct Avx2Ops {
  static float Dot(const float* a, const float* b, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
      s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    float s = HSum(_mm256_add_ps(s0, s1));
    for (; i < n; ++i) s += a[i] * b[i];
    return s;
  }
  static void Axpy(float w, const float* x, float* y, int64_t n) {
    const __m256 vw = _mm256_set1_ps(w);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(y + i, _mm256_fmadd_ps(vw, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    }
    for (; i < n; ++i) y[i] += w * x[i];
  }
  static void Scale(float* y, float c, int64_t n) {
    const __m256 vc = _mm256_set1_ps(c);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(vc, _mm256_loadu_ps(y + i)));
    for (; i < n; ++i) y[i] *= c;
  }
  static void F16ToF32(const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i))));
    }
    for (; i < n; ++i) y[i] = ::kvs::F16ToF32(x[i]);
  }
  static void BF16ToF32(const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
      __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
      _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; ++i) y[i] = ::kvs::BF16ToF32(x[i]);
  }
  static void I8ToF32(const int8_t* x, float d, float* y) {
    const __m256 vd = _mm256_set1_ps(d);
    for (int i = 0; i < 32; i += 8) {
      __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i)));
      _mm256_storeu_ps(y + i, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(v)));
    }
  }
};

void AttendAvx2Impl(const AttendArgs& a) { AttendImpl<Avx2Ops>(a); }

}  // namespace

AttendFn AttendAvx2() { return &AttendAvx2Impl; }

}  // namespace kvs::kvcache::internal
