// Avx2Lanes: the lane traits (kernels/lanes.h) for AVX2 + FMA + F16C, 8
// floats per vector, 16 registers. No mask registers: partial loads and
// stores of floats use vmaskmovps, 16-bit ones a small stack copy. Include
// only from sources compiled with -mavx2 -mfma -mf16c.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/avx2_util.h"
#include "kernels/lanes.h"

namespace kvs::kernels {

struct Avx2Lanes {
  using R = __m256;
  using I = __m256i;
  static constexpr int kLanes = 8;
  static constexpr int kRegisters = 16;

  static KVS_LANE R Zero() { return _mm256_setzero_ps(); }
  static KVS_LANE R Load(const float* p) { return _mm256_loadu_ps(p); }
  static KVS_LANE void Store(float* p, R v) { _mm256_storeu_ps(p, v); }
  static KVS_LANE R Set1(float x) { return _mm256_set1_ps(x); }
  static KVS_LANE R Add(R a, R b) { return _mm256_add_ps(a, b); }
  static KVS_LANE R Sub(R a, R b) { return _mm256_sub_ps(a, b); }
  static KVS_LANE R Mul(R a, R b) { return _mm256_mul_ps(a, b); }
  static KVS_LANE R Div(R a, R b) { return _mm256_div_ps(a, b); }
  static KVS_LANE R Fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  static KVS_LANE R Fnma(R a, R b, R c) { return _mm256_fnmadd_ps(a, b, c); }
  static KVS_LANE R Max(R a, R b) { return _mm256_max_ps(a, b); }
  static KVS_LANE R Min(R a, R b) { return _mm256_min_ps(a, b); }
  static KVS_LANE R Abs(R v) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), v); }
  static KVS_LANE R RoundNearest(R v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // C roundf (halfway cases away from zero), exactly: truncate, then step
  // away from zero when the dropped fraction (exact) is at least one half.
  static KVS_LANE R RoundAway(R v) {
    const R t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    const R frac = Abs(_mm256_sub_ps(v, t));
    const R step = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(v, _mm256_set1_ps(-0.0f)));
    const R up = _mm256_cmp_ps(frac, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    return _mm256_add_ps(t, _mm256_and_ps(up, step));
  }
  // No vscalefps: build 2^n in the exponent bits.
  static KVS_LANE R ScalePow2(R p, R n) {
    const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  }
  static KVS_LANE R SelectGreater(R a, R b, R x, R y) {
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_GT_OQ));
  }
  static KVS_LANE float ReduceMax(R v) { return avx2::HMax(v); }
  static KVS_LANE float ReduceAdd(R v) { return avx2::HSum(v); }
  // out[0..3] = horizontal sums of a, b, c, d.
  static KVS_LANE void Sum4(R a, R b, R c, R d, float* out) {
    const R t = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));  // [a b c d | a b c d] halves
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1)));
  }
  static KVS_LANE unsigned EqBits(R a, R b) {
    return static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)));
  }

  // ---- tails: lanes [0, n), 0 < n < 8.
  static KVS_LANE __m256i TailMask(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static KVS_LANE R LoadPartial(const float* p, int64_t n) { return _mm256_maskload_ps(p, TailMask(n)); }
  static KVS_LANE R LoadPartialOr(const float* p, int64_t n, R fill) {
    const __m256i m = TailMask(n);
    return _mm256_blendv_ps(fill, _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static KVS_LANE void StorePartial(float* p, R v, int64_t n) { _mm256_maskstore_ps(p, TailMask(n), v); }
  static KVS_LANE R AddPartial(R a, R b, int64_t n) {
    return _mm256_add_ps(a, _mm256_and_ps(b, _mm256_castsi256_ps(TailMask(n))));
  }

  // ---- storage types.
  static KVS_LANE R LoadF16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static KVS_LANE R LoadBF16(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static KVS_LANE R LoadI8(const int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static KVS_LANE void StoreF16(uint16_t* p, R v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  // f32 -> bf16 bits, rounding like F32ToBF16 (nearest-even, NaN quieted).
  static KVS_LANE void StoreBF16(uint16_t* p, R v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), lsb), 16);
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(64));
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan);
    const __m256i packed = _mm256_packus_epi32(r, r);  // lanes: [0..3 0..3 | 4..7 4..7]
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(_mm256_permute4x64_epi64(packed, 0x08)));
  }
  static KVS_LANE R LoadF16Partial(const uint16_t* p, int64_t n) {
    alignas(16) uint16_t b[8] = {};
    std::memcpy(b, p, static_cast<size_t>(n) * 2);
    return LoadF16(b);
  }
  static KVS_LANE R LoadBF16Partial(const uint16_t* p, int64_t n) {
    alignas(16) uint16_t b[8] = {};
    std::memcpy(b, p, static_cast<size_t>(n) * 2);
    return LoadBF16(b);
  }
  static KVS_LANE void StoreF16Partial(uint16_t* p, R v, int64_t n) {
    alignas(16) uint16_t b[8];
    StoreF16(b, v);
    std::memcpy(p, b, static_cast<size_t>(n) * 2);
  }
  static KVS_LANE void StoreBF16Partial(uint16_t* p, R v, int64_t n) {
    alignas(16) uint16_t b[8];
    StoreBF16(b, v);
    std::memcpy(p, b, static_cast<size_t>(n) * 2);
  }
  static KVS_LANE float HalfToFloat(uint16_t h) { return _cvtsh_ss(h); }

  // ---- int32 lanes (activation quantization).
  static KVS_LANE I Set1I32(int32_t x) { return _mm256_set1_epi32(x); }
  static KVS_LANE I AddI32(I a, I b) { return _mm256_add_epi32(a, b); }
  static KVS_LANE I MinI32(I a, I b) { return _mm256_min_epi32(a, b); }
  static KVS_LANE I CvttI32(R v) { return _mm256_cvttps_epi32(v); }
  static KVS_LANE int32_t ReduceAddI32(I v) { return avx2::HSumI32(v); }
  static KVS_LANE void StoreI8x32(int8_t* qs, const I* q) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs), avx2::PackI32ToI8(q[0], q[1], q[2], q[3]));
  }
};

}  // namespace kvs::kernels
