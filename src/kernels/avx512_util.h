// Inline AVX-512 (F/BW/VL/VNNI) helpers shared by the avx512_*.cc files.
// Include only from sources compiled with the AVX-512 flags (CMakeLists.txt).
#pragma once

// GCC 12's AVX-512 headers trip -Wuninitialized on their own
// _mm512_undefined_* helpers (GCC bug 105593); silence it for them only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

// Full unrolling of the short constant loops in the microkernels, so their
// accumulator arrays live in registers (GCC's -O2 heuristics do not do it).
#ifndef KVS_UNROLL
#define KVS_UNROLL _Pragma("GCC unroll 16")
#endif

namespace kvs::kernels::avx512 {

inline __mmask16 TailMask(int64_t n) { return static_cast<__mmask16>(n >= 16 ? 0xFFFF : (1u << n) - 1); }

// A T0 prefetch the optimizer cannot drop (GCC deletes loops whose only
// statements are __builtin_prefetch calls).
inline void Prefetch(const void* p) { asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p))); }

inline int32_t LoadI32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Two independent 8x8 transposes of 32-bit elements, one per 256-bit half:
// r[j] holds row j in its low half and row j+8 in its high half; afterwards
// r[c] holds column c of rows 0..7 (low half) and of rows 8..15 (high half).
inline void Transpose8x8x2(__m512i r[8]) {
  __m512i t[8], u[8];
  KVS_UNROLL
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  KVS_UNROLL
  for (int i = 0; i < 2; ++i) {
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
  const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
  KVS_UNROLL
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_permutex2var_epi64(u[i], lo, u[i + 4]);
    r[i + 4] = _mm512_permutex2var_epi64(u[i], hi, u[i + 4]);
  }
}

// 16x16 transpose of 32-bit elements: r[i] = row i -> r[c] = column c.
inline void Transpose16x16(__m512i r[16]) {
  __m512i t[16], u[16];
  KVS_UNROLL
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  KVS_UNROLL
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_unpacklo_epi64(t[4 * i + 0], t[4 * i + 2]);
    u[4 * i + 1] = _mm512_unpackhi_epi64(t[4 * i + 0], t[4 * i + 2]);
    u[4 * i + 2] = _mm512_unpacklo_epi64(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = _mm512_unpackhi_epi64(t[4 * i + 1], t[4 * i + 3]);
  }
  // u[4g + j], 128-bit lane L: column 4L + j of rows 4g..4g+3.
  KVS_UNROLL
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
    const __m512i w0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
    const __m512i v1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
    r[j] = _mm512_shuffle_i32x4(v0, v1, 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(v0, v1, 0xDD);
    r[4 + j] = _mm512_shuffle_i32x4(w0, w1, 0x88);
    r[12 + j] = _mm512_shuffle_i32x4(w0, w1, 0xDD);
  }
}

}  // namespace kvs::kernels::avx512
