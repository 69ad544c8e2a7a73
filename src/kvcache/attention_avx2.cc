// AVX2 instantiation of the tiled attention kernel (8 lanes, 16 registers).
// Compiled with -mavx2 -mfma -mf16c; only called when the CPU has them.
#include <immintrin.h>

#include "kvcache/attention_kernel.h"

namespace kvs::kvcache::internal {
namespace {

struct V256 {
  using R = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;
  static R Zero() { return _mm256_setzero_ps(); }
  static R Load(const float* p) { return _mm256_loadu_ps(p); }
  static void Store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static R Set1(float x) { return _mm256_set1_ps(x); }
  static R Fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static R Mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static R Add(R a, R b) { return _mm256_add_ps(a, b); }
  static R Sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static R Max(R a, R b) { return _mm256_max_ps(a, b); }
  static R SelectGreater(R a, R b, R x, R y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_GT_OQ)); }
  static float ReduceMax(R v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  static float ReduceAdd(R v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  // out[0..3] = horizontal sums of a, b, c, d.
  static void Sum4(R a, R b, R c, R d, float* out) {
    const R t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));  // [a b c d | a b c d] halves
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  // 2^x for x <= 0 (and -inf); see V512::Exp2 in attention_avx512.cc.
  static R Exp2(R x) {
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    const R n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const R f = _mm256_sub_ps(x, n);
    R p = _mm256_set1_ps(1.5252733804059840e-05f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393381609e-04f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146428443e-03f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076284772e-03f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108664821580e-02f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650695910071e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718055994531e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  }
  static float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
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
      const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
      _mm256_storeu_ps(y + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
    }
    for (; i < n; ++i) y[i] = ::kvs::BF16ToF32(x[i]);
  }
  static void I8ToF32(const int8_t* x, float d, float* y) {  // 32 values
    const __m256 vd = _mm256_set1_ps(d);
    for (int i = 0; i < 32; i += 8) {
      const __m256i v = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i)));
      _mm256_storeu_ps(y + i, _mm256_mul_ps(vd, _mm256_cvtepi32_ps(v)));
    }
  }
};

}  // namespace

KernelInfo KernelAvx2() { return MakeKernel<V256>("avx2"); }

}  // namespace kvs::kvcache::internal
