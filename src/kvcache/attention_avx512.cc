// AVX-512 instantiation of the tiled attention kernel (16 lanes, 32
// registers). Compiled with -mavx512f -mavx512bw -mavx512vl -mfma -mf16c;
// only called when the CPU has them.
#include "kernels/avx512_util.h"  // <immintrin.h> without GCC 12's false warnings

#include "kvcache/attention_kernel.h"

namespace kvs::kvcache::internal {
namespace {

struct V512 {
  using R = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;
  static R Zero() { return _mm512_setzero_ps(); }
  static R Load(const float* p) { return _mm512_loadu_ps(p); }
  static void Store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static R Set1(float x) { return _mm512_set1_ps(x); }
  static R Fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static R Mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static R Add(R a, R b) { return _mm512_add_ps(a, b); }
  static R Sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static R Max(R a, R b) { return _mm512_max_ps(a, b); }
  // a > b ? x : y, lane-wise.
  static R SelectGreater(R a, R b, R x, R y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), y, x); }
  static float ReduceMax(R v) { return _mm512_reduce_max_ps(v); }
  static float ReduceAdd(R v) { return _mm512_reduce_add_ps(v); }
  // out[0..3] = horizontal sums of a, b, c, d.
  static void Sum4(R a, R b, R c, R d, float* out) {
    // 128-bit blocks: [a0+a2, a1+a3, b0+b2, b1+b3], then [a, b, c, d] partials.
    const R ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    const R cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
    R t = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));  // within blocks: lanes + lanes two apart
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));  // + neighbour: every lane holds its block's sum
    const __m512i idx = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(idx, t)));
  }
  // 2^x for x <= 0 (and -inf): a degree-6 polynomial for 2^f, |f| <= 0.5
  // (relative error < 2e-7), scaled by 2^round(x) with vscalefps. Inputs
  // below -125 (masked scores, -inf) give ~2^-125: negligible, and still a
  // normal float (no denormal slow paths in the products that follow).
  static R Exp2(R x) {
    x = _mm512_max_ps(x, _mm512_set1_ps(-125.0f));
    const R n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const R f = _mm512_sub_ps(x, n);
    R p = _mm512_set1_ps(1.5403530393381609e-04f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146428443e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076284772e-03f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108664821580e-02f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650695910071e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718055994531e-01f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
  }
  static float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }
  static void F16ToF32(const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))));
    }
    for (; i < n; ++i) y[i] = ::kvs::F16ToF32(x[i]);
  }
  static void BF16ToF32(const uint16_t* x, float* y, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
      _mm512_storeu_ps(y + i, _mm512_castsi512_ps(_mm512_slli_epi32(v, 16)));
    }
    for (; i < n; ++i) y[i] = ::kvs::BF16ToF32(x[i]);
  }
  static void I8ToF32(const int8_t* x, float d, float* y) {  // 32 values
    const __m512 vd = _mm512_set1_ps(d);
    for (int i = 0; i < 32; i += 16) {
      const __m512i v = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
      _mm512_storeu_ps(y + i, _mm512_mul_ps(vd, _mm512_cvtepi32_ps(v)));
    }
  }
};

}  // namespace

KernelInfo KernelAvx512() { return MakeKernel<V512>("avx512"); }

}  // namespace kvs::kvcache::internal
