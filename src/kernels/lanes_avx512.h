// Avx512Lanes: the lane traits (kernels/lanes.h) for AVX-512 F/BW/VL (+ FMA,
// F16C), 16 floats per vector, 32 registers. Tails are masked loads and
// stores; 2^n is vscalefps. Include only from sources compiled with at least
// -mavx512f -mavx512bw -mavx512vl (kvcache's attention has no VNNI flag, so
// nothing here may need it).
#pragma once

#include <cstdint>

#include "kernels/avx512_util.h"  // <immintrin.h> without GCC 12's false warnings
#include "kernels/lanes.h"

namespace kvs::kernels {

struct Avx512Lanes {
  using R = __m512;
  using I = __m512i;
  static constexpr int kLanes = 16;
  static constexpr int kRegisters = 32;

  static KVS_LANE R Zero() { return _mm512_setzero_ps(); }
  static KVS_LANE R Load(const float* p) { return _mm512_loadu_ps(p); }
  static KVS_LANE void Store(float* p, R v) { _mm512_storeu_ps(p, v); }
  static KVS_LANE R Set1(float x) { return _mm512_set1_ps(x); }
  static KVS_LANE R Add(R a, R b) { return _mm512_add_ps(a, b); }
  static KVS_LANE R Sub(R a, R b) { return _mm512_sub_ps(a, b); }
  static KVS_LANE R Mul(R a, R b) { return _mm512_mul_ps(a, b); }
  static KVS_LANE R Div(R a, R b) { return _mm512_div_ps(a, b); }
  static KVS_LANE R Fma(R a, R b, R c) { return _mm512_fmadd_ps(a, b, c); }
  static KVS_LANE R Fnma(R a, R b, R c) { return _mm512_fnmadd_ps(a, b, c); }
  static KVS_LANE R Max(R a, R b) { return _mm512_max_ps(a, b); }
  static KVS_LANE R Min(R a, R b) { return _mm512_min_ps(a, b); }
  static KVS_LANE R Abs(R v) { return _mm512_abs_ps(v); }
  static KVS_LANE R RoundNearest(R v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // C roundf (halfway cases away from zero), exactly.
  static KVS_LANE R RoundAway(R v) {
    const R t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const R frac = _mm512_abs_ps(_mm512_sub_ps(v, t));
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN));
    const R step = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(_mm512_set1_ps(1.0f)), sign));
    const __mmask16 up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm512_mask_add_ps(t, up, t, step);
  }
  static KVS_LANE R ScalePow2(R p, R n) { return _mm512_scalef_ps(p, n); }
  static KVS_LANE R SelectGreater(R a, R b, R x, R y) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), y, x);
  }
  static KVS_LANE float ReduceMax(R v) { return _mm512_reduce_max_ps(v); }
  static KVS_LANE float ReduceAdd(R v) { return _mm512_reduce_add_ps(v); }
  // out[0..3] = horizontal sums of a, b, c, d.
  static KVS_LANE void Sum4(R a, R b, R c, R d, float* out) {
    // 128-bit blocks: [a0+a2, a1+a3, b0+b2, b1+b3], then [a, b, c, d] partials.
    const R ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    const R cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
    R t = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0x4E));  // within blocks: lanes + lanes two apart
    t = _mm512_add_ps(t, _mm512_permute_ps(t, 0xB1));  // + neighbour: every lane holds its block's sum
    const __m512i idx = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 12, 8, 4, 0);
    _mm_storeu_ps(out, _mm512_castps512_ps128(_mm512_permutexvar_ps(idx, t)));
  }
  static KVS_LANE unsigned EqBits(R a, R b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }

  // ---- tails: lanes [0, n), 0 < n < 16, as masked loads and stores.
  static KVS_LANE R LoadPartial(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(TailMask(n), p); }
  static KVS_LANE R LoadPartialOr(const float* p, int64_t n, R fill) {
    return _mm512_mask_loadu_ps(fill, TailMask(n), p);
  }
  static KVS_LANE void StorePartial(float* p, R v, int64_t n) { _mm512_mask_storeu_ps(p, TailMask(n), v); }
  static KVS_LANE R AddPartial(R a, R b, int64_t n) { return _mm512_mask_add_ps(a, TailMask(n), a, b); }

  // ---- storage types.
  static KVS_LANE R LoadF16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static KVS_LANE R LoadBF16(const uint16_t* p) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
  static KVS_LANE R LoadI8(const int8_t* p) {
    return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }
  static KVS_LANE __m256i ToF16(R v) { return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // f32 -> bf16 bits, rounding like F32ToBF16 (nearest-even, NaN quieted).
  static KVS_LANE __m256i ToBF16(R v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i abs = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(abs, _mm512_set1_epi32(0x7f800000));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7fff)), lsb), 16);
    const __m512i quiet = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(64));
    return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(nan, rounded, quiet));
  }
  static KVS_LANE void StoreF16(uint16_t* p, R v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), ToF16(v)); }
  static KVS_LANE void StoreBF16(uint16_t* p, R v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), ToBF16(v)); }
  static KVS_LANE R LoadF16Partial(const uint16_t* p, int64_t n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(TailMask(n), p));
  }
  static KVS_LANE R LoadBF16Partial(const uint16_t* p, int64_t n) {
    const __m512i v = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(TailMask(n), p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
  }
  static KVS_LANE void StoreF16Partial(uint16_t* p, R v, int64_t n) { _mm256_mask_storeu_epi16(p, TailMask(n), ToF16(v)); }
  static KVS_LANE void StoreBF16Partial(uint16_t* p, R v, int64_t n) {
    _mm256_mask_storeu_epi16(p, TailMask(n), ToBF16(v));
  }
  static KVS_LANE float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

  // ---- int32 lanes (activation quantization).
  static KVS_LANE I Set1I32(int32_t x) { return _mm512_set1_epi32(x); }
  static KVS_LANE I AddI32(I a, I b) { return _mm512_add_epi32(a, b); }
  static KVS_LANE I MinI32(I a, I b) { return _mm512_min_epi32(a, b); }
  static KVS_LANE I CvttI32(R v) { return _mm512_cvttps_epi32(v); }
  static KVS_LANE int32_t ReduceAddI32(I v) { return _mm512_reduce_add_epi32(v); }
  static KVS_LANE void StoreI8x32(int8_t* qs, const I* q) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtsepi32_epi8(q[0]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtsepi32_epi8(q[1]));
  }

 private:
  static KVS_LANE __mmask16 TailMask(int64_t n) { return avx512::TailMask(n); }
};

}  // namespace kvs::kernels
