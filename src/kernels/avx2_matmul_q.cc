// AVX2 quantized MatMul (every quantized weight type: Q8_0, Q4_0, Q4_1,
// Q5_0, IQ4_NL, IQ4_XS, Q2_K .. Q6_K) over the 16-row interleaved panels of packed.h (weights packed at load are read in
// place; unpacked weights are packed one panel at a time into scratch).
//
// A 64-byte chunk holds 4 codes of each of 16 rows; AVX2 takes it as two
// halves of 8 rows (one ymm each) and runs every kernel once per half. Per
// half and chunk, one maddubs multiplies 8 rows x 4 unsigned codes by 4
// broadcast activation codes (pairwise int16 sums) and one madd widens them
// to the 8 rows' int32 lanes, so no horizontal sums are needed. For K-quants
// the madd multiplies by the sub-block scale at the same time (int16 pairs
// of (sc, sc)), so Q4_K/Q5_K accumulate a whole super-block in integers.
// Q8_0 codes are made signed again and use the abs/sign trick (an unsigned
// 8-bit code times 127 twice overflows maddubs' int16); so do the IQ4 grid
// values (one pshufb per chunk half from the nibble indices). The codes' offsets
// (Q4_0's 8, Q6_K's 32, the K-quant mins) come from the activation sums the
// activation quantizer precomputed (ActLayout's aux terms).
#include <algorithm>

#include "kernels/avx2_util.h"
#include "kernels/isa_decls.h"
#include "kernels/packed.h"
#include "kernels/quant_formats.h"
#include "kernels/scratch.h"

namespace kvs::kernels::avx2 {
namespace {

template <DType M>
constexpr bool kAffineK = M == DType::kQ4_K || M == DType::kQ5_K;
// The panel layout's units (packed.h).
template <DType M>
constexpr bool kB32 = PanelHasBlock32Units(M);
template <DType M>
constexpr int64_t kUnitBytes = PanelUnitBytes(M);

constexpr int kMaxA = 4;  // activation rows per microkernel call

// Decode (m <= kMaxA) streams each panel from memory once, in the first of
// its two half passes (the second finds it in L2): that pass prefetches
// this many bytes ahead of the stream.
constexpr int64_t kPrefetchDistance = 4096;
template <int64_t kBytes>
inline void PrefetchAhead(const uint8_t* p) {
#pragma GCC unroll 64
  for (int64_t o = 0; o < kBytes; o += 64) Prefetch(p + kPrefetchDistance + o);
}


inline __m256i Bcast4(const int8_t* p) { return _mm256_set1_epi32(LoadI32(p)); }
// Half `h8` (rows 8*h8 .. 8*h8+7) of the chunk at p.
inline __m256i Load(const uint8_t* p, int h8) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * h8)); }
// 8 f16 (16 bytes) -> floats.
inline __m256 Halves8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 ToF(__m256i v) { return _mm256_cvtepi32_ps(v); }
// Pairwise int16 sums of u8 x s8 products widened to int32 and multiplied by
// the int16 `scale` pairs.
inline __m256i Dot4(__m256i w, __m256i x, __m256i scale) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), scale);
}
// The int16 pair sums alone. A maddubs sum of two products is at most
// 2 * c * 127 for codes below c, so int16 holds 8 of them for 4-bit codes
// (8 * 3810), 4 for 5-bit (4 * 7874) and 2 for 6-bit (2 * 16002): the
// kernels add that many before widening with one madd.
inline __m256i Pairs(__m256i w, __m256i x) { return _mm256_maddubs_epi16(w, x); }
inline __m256i Add16(__m256i a, __m256i b) { return _mm256_add_epi16(a, b); }

// The IQ4 grid values (signed) in both 128-bit lanes: pshufb's table for
// nibble indices.
inline __m256i IQ4Table() {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
  return _mm256_set_m128i(t, t);
}
// Signed weight bytes v (|v| <= 127) times activation bytes x, pairwise
// int16 sums: |v| times x with v's sign (at most 2 * 127 * 127 per pair, so
// each must be widened before the next is added).
inline __m256i SignedPairs(__m256i v, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(x, v));
}

// Bit `from` of every byte of h moved to bit `to` (other bits cleared);
// the 16-bit shifts never carry a byte's bits into `to` of its neighbour for
// the |from - to| <= 5 used here.
inline __m256i MoveBit(__m256i h, int from, int to) {
  const __m256i s = from >= to ? _mm256_srli_epi16(h, from - to) : _mm256_slli_epi16(h, to - from);
  return _mm256_and_si256(s, _mm256_set1_epi8(static_cast<char>(1 << to)));
}
// int32 lanes (|v| < 2^15) -> int16 pairs (v, v), madd's per-row multiplier.
inline __m256i ScalePairs(__m256i v) {
  return _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(v, 16));
}
// Each row's header word (f16 d | f16 dmin << 16) of the half at p -> floats.
inline void DMin8(const uint8_t* p, int h8, __m256* d, __m256* dmin) {
  const __m256i dd = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * h8));
  const __m256i lo16 = _mm256_and_si256(dd, _mm256_set1_epi32(0xFFFF)), hi16 = _mm256_srli_epi32(dd, 16);
  *d = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo16), _mm256_extracti128_si256(lo16, 1)));
  *dmin = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(hi16), _mm256_extracti128_si256(hi16, 1)));
}

// The 8 bytes at p (one per row of the half) as int32 lanes.
inline __m256i Bytes8(const uint8_t* p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))); }

// Codes of sub-block s, chunk c of a Q4_K/Q5_K super-block at p, half h8.
template <DType M>
inline __m256i CodesK4(const uint8_t* p, int s, int c, int h8) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i w = Load(p + kK4CodesOff + (8 * (s / 2) + c) * 64, h8);
  __m256i q = _mm256_and_si256(s % 2 ? _mm256_srli_epi16(w, 4) : w, m4);
  if constexpr (M == DType::kQ5_K) q = _mm256_or_si256(q, MoveBit(Load(p + kK5HighOff + 64 * c, h8), s, 4));
  return q;
}

// Codes for Q6_K elements 128h + 32k + 4c .. of the super-block at p, half h8.
inline __m256i CodesQ6K(const uint8_t* p, int h, int k, int c, int h8) {
  const uint8_t* x = p + (24 * h + 3 * c) * 64;
  if (k < 3) return _mm256_and_si256(Load(x + 64 * k, h8), _mm256_set1_epi8(0x3F));
  const __m256i a = _mm256_and_si256(_mm256_srli_epi16(Load(x, h8), 2), _mm256_set1_epi8(0x30));
  const __m256i b = _mm256_and_si256(_mm256_srli_epi16(Load(x + 64, h8), 4), _mm256_set1_epi8(0x0C));
  const __m256i c3 = _mm256_and_si256(_mm256_srli_epi16(Load(x + 128, h8), 6), _mm256_set1_epi8(0x03));
  return _mm256_or_si256(_mm256_or_si256(a, b), c3);
}

template <int A>
inline void Store(const __m256 (&sum)[A], float* y, int64_t ldy, int valid) {
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    if (valid >= 8) {
      _mm256_storeu_ps(y + i * ldy, sum[i]);
    } else {
      alignas(32) float tmp[8];
      _mm256_store_ps(tmp, sum[i]);
      for (int r = 0; r < valid; ++r) y[i * ldy + r] = tmp[r];
    }
  }
}

// ---- 32-element blocks (Q4_1 adds its offset times the activation block's
// sum). Block b of the panel at p, rows of half h8, added into sum.
template <DType M, int A>
inline void BlockB32(const uint8_t* p, const uint8_t* dw, const uint8_t* mw, int64_t b, int h8, const ActRowView* act,
                     __m256 (&sum)[A]) {
  const __m256i ones = _mm256_set1_epi16(1), m4 = _mm256_set1_epi8(0x0F), bias = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i lut = IQ4Table();
  __m256i acc[A];
  if constexpr (M == DType::kQ8_0) {
    KVS_UNROLL
    for (int i = 0; i < A; ++i) acc[i] = _mm256_setzero_si256();
    KVS_UNROLL
    for (int c = 0; c < 8; ++c) {
      const __m256i w = _mm256_xor_si256(Load(p + 64 * c, h8), bias);  // the signed codes
      const __m256i aw = _mm256_abs_epi8(w);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        acc[i] = _mm256_add_epi32(acc[i], Dot4(aw, _mm256_sign_epi8(Bcast4(act[i].qs + 32 * b + 4 * c), w), ones));
      }
    }
  } else if constexpr (M == DType::kIQ4_NL) {  // signed grid values, one widening per chunk half
    KVS_UNROLL
    for (int i = 0; i < A; ++i) acc[i] = _mm256_setzero_si256();
    KVS_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m256i w = Load(p + 64 * c, h8);
      const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(w, m4));
      const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(w, 4), m4));
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        const __m256i s = _mm256_add_epi32(
            _mm256_madd_epi16(SignedPairs(lo, Bcast4(act[i].qs + 32 * b + 4 * c)), ones),
            _mm256_madd_epi16(SignedPairs(hi, Bcast4(act[i].qs + 32 * b + 16 + 4 * c)), ones));
        acc[i] = _mm256_add_epi32(acc[i], s);
      }
    }
  } else if constexpr (M == DType::kQ5_0) {  // 5-bit codes: 4 products per int16 sum (see Pairs)
    const __m256i hb = Load(p + 256, h8);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) acc[i] = _mm256_set1_epi32(act[i].aux_i()[b]);  // -16 * sum(x)
    KVS_UNROLL
    for (int c0 = 0; c0 < 4; c0 += 2) {
      __m256i s16[A];
      KVS_UNROLL
      for (int c = c0; c < c0 + 2; ++c) {
        const __m256i w = Load(p + 64 * c, h8);
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(w, m4), MoveBit(hb, 2 * c, 4));
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(w, 4), m4), MoveBit(hb, 2 * c + 1, 4));
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const __m256i pr = Add16(Pairs(lo, Bcast4(act[i].qs + 32 * b + 4 * c)),
                                   Pairs(hi, Bcast4(act[i].qs + 32 * b + 16 + 4 * c)));
          s16[i] = c == c0 ? pr : Add16(s16[i], pr);
        }
      }
      KVS_UNROLL
      for (int i = 0; i < A; ++i) acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(s16[i], ones));
    }
  } else {  // 8 nibble products per row summed in int16, widened once
    __m256i s16[A];
    KVS_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m256i w = Load(p + 64 * c, h8);
      const __m256i lo = _mm256_and_si256(w, m4), hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        const __m256i pr = Add16(Pairs(lo, Bcast4(act[i].qs + 32 * b + 4 * c)),
                                 Pairs(hi, Bcast4(act[i].qs + 32 * b + 16 + 4 * c)));
        s16[i] = c == 0 ? pr : Add16(s16[i], pr);
      }
    }
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      acc[i] = _mm256_madd_epi16(s16[i], ones);
      if constexpr (M == DType::kQ4_0) acc[i] = _mm256_add_epi32(_mm256_set1_epi32(act[i].aux_i()[b]), acc[i]);
    }
  }
  const __m256 d = Halves8(dw + 32 * b + 16 * h8);
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    sum[i] = _mm256_fmadd_ps(ToF(acc[i]), _mm256_mul_ps(d, _mm256_set1_ps(act[i].d[b])), sum[i]);
    if constexpr (M == DType::kQ4_1) {
      sum[i] = _mm256_fmadd_ps(Halves8(mw + 32 * b + 16 * h8), _mm256_set1_ps(act[i].aux_f()[b]), sum[i]);
    }
  }
}

template <DType M, int A>
void MicroB32(const uint8_t* panel, int64_t nblk, int h8, const ActRowView* act, float* y, int64_t ldy, int valid,
              bool stream) {
  const uint8_t* dw = panel + nblk * kUnitBytes<M>;
  const uint8_t* mw = dw + 32 * nblk;  // Q4_1's offsets
  __m256 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* p = panel + b * kUnitBytes<M>;
    if (stream) PrefetchAhead<kUnitBytes<M>>(p);
    BlockB32<M, A>(p, dw, mw, b, h8, act, sum);
  }
  Store<A>(sum, y, ldy, valid);
}

// Decode with one or two activation rows: both halves of each block in one
// pass, so every 64-byte line is used whole as it arrives from memory (the
// two-pass kernel above reads each line's first half, then its second from
// cache).
template <DType M, int A>
void MicroB32Both(const uint8_t* panel, int64_t nblk, const ActRowView* act, float* y, int64_t ldy, int valid) {
  const uint8_t* dw = panel + nblk * kUnitBytes<M>;
  const uint8_t* mw = dw + 32 * nblk;
  __m256 sum0[A], sum1[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum0[i] = sum1[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* p = panel + b * kUnitBytes<M>;
    PrefetchAhead<kUnitBytes<M>>(p);
    BlockB32<M, A>(p, dw, mw, b, 0, act, sum0);
    BlockB32<M, A>(p, dw, mw, b, 1, act, sum1);
  }
  Store<A>(sum0, y, ldy, std::min(valid, 8));
  if (valid > 8) Store<A>(sum1, y + 8, ldy, valid - 8);
}

// ---- IQ4_XS: the block scale rides in the madd (int16 pairs (sc, sc)), a
// super-block sums in int32, then times d.
template <int A>
void MicroIQ4XS(const uint8_t* panel, int64_t nsb, int h8, const ActRowView* act, float* y, int64_t ldy, int valid,
                bool stream) {
  const uint8_t* dw = panel + nsb * kIQ4XSUnitBytes;
  const __m256i m4 = _mm256_set1_epi8(0x0F), lut = IQ4Table();
  __m256 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kIQ4XSUnitBytes;
    if (stream) PrefetchAhead<kIQ4XSUnitBytes>(p);
    __m256i isum[A];
    KVS_UNROLL
    for (int i = 0; i < A; ++i) isum[i] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      const __m256i sc = _mm256_cvtepi8_epi32(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kIQ4XSScalesOff + 16 * j + 8 * h8)));
      const __m256i sc2 = ScalePairs(sc);
      KVS_UNROLL
      for (int c = 0; c < 4; ++c) {
        const __m256i w = Load(p + (4 * j + c) * 64, h8);
        const __m256i lo = _mm256_shuffle_epi8(lut, _mm256_and_si256(w, m4));
        const __m256i hi = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(w, 4), m4));
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const int8_t* x = act[i].qs + 256 * sb + 32 * j + 4 * c;
          const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(SignedPairs(lo, Bcast4(x)), sc2),
                                             _mm256_madd_epi16(SignedPairs(hi, Bcast4(x + 16)), sc2));
          isum[i] = _mm256_add_epi32(isum[i], s);
        }
      }
    }
    const __m256 d = Halves8(dw + 32 * sb + 16 * h8);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      sum[i] = _mm256_fmadd_ps(ToF(isum[i]), _mm256_mul_ps(d, _mm256_set1_ps(act[i].d[sb])), sum[i]);
    }
  }
  Store<A>(sum, y, ldy, valid);
}

// ---- Q2_K / Q3_K: per 16-group (elements 128h + 32k + 16 half ..), the
// 2-bit codes of plane k (bits 2k..2k+1 of a chunk's bytes; Q3_K ORs in its
// 3rd bit) summed in int16 over the group's 4 chunks, widened by one madd
// with the group's scale pairs (sc, sc). Q3_K's values are the codes minus
// 4: -4 * sum(x) (the aux term) rides in the low int16 of each pair
// (|sum| <= 4 * 1778 + 8128). Q2_K's mins: float, per group.
template <DType M, int A>
void MicroLow2(const uint8_t* panel, int64_t nsb, int h8, const ActRowView* act, float* y, int64_t ldy, int valid,
               bool stream) {
  constexpr bool kQ3 = M == DType::kQ3_K;
  constexpr int64_t kCodes = kQ3 ? 0 : kQ2KCodesOff, kScales = kQ3 ? kQ3KScalesOff : kQ2KScalesOff;
  const __m256i m3 = _mm256_set1_epi8(0x03);
  const uint8_t* dw = panel + nsb * kUnitBytes<M>;  // Q3_K's d
  __m256 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kUnitBytes<M>;
    if (stream) PrefetchAhead<kUnitBytes<M>>(p);
    __m256i isum[A];
    __m256 msum[A];
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      isum[i] = _mm256_setzero_si256();
      msum[i] = _mm256_setzero_ps();
    }
    KVS_UNROLL  // constant shifts and chunk offsets
    for (int g = 0; g < 16; ++g) {
      const int h = g / 8, k = (g / 2) % 4, half = g % 2;
      const __m256i s8 = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kScales + 16 * g + 8 * h8)));
      const __m256i sc = kQ3 ? _mm256_sub_epi32(_mm256_xor_si256(s8, _mm256_set1_epi32(0x80)), _mm256_set1_epi32(0x80))
                             : _mm256_and_si256(s8, _mm256_set1_epi32(0xF));
      const __m256i sc2 = ScalePairs(sc);
      __m256i s16[A];
      KVS_UNROLL
      for (int cc = 0; cc < 4; ++cc) {
        const int c = 4 * half + cc;
        __m256i q = _mm256_and_si256(_mm256_srli_epi16(Load(p + kCodes + (8 * h + c) * 64, h8), 2 * k), m3);
        if constexpr (kQ3) q = _mm256_or_si256(q, MoveBit(Load(p + kQ3KHighOff + 64 * c, h8), 4 * h + k, 2));
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const __m256i pr = Pairs(q, Bcast4(act[i].qs + 256 * sb + 128 * h + 32 * k + 4 * c));
          s16[i] = cc == 0 ? pr : Add16(s16[i], pr);
        }
      }
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        const int32_t aux = act[i].aux_i()[16 * sb + g];
        if constexpr (kQ3) s16[i] = Add16(s16[i], _mm256_set1_epi32(aux & 0xFFFF));
        isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(s16[i], sc2));
        if constexpr (!kQ3) {
          msum[i] = _mm256_fmadd_ps(ToF(_mm256_srli_epi32(s8, 4)), _mm256_set1_ps(static_cast<float>(aux)), msum[i]);
        }
      }
    }
    if constexpr (kQ3) {
      const __m256 d = Halves8(dw + 32 * sb + 16 * h8);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        sum[i] = _mm256_fmadd_ps(ToF(isum[i]), _mm256_mul_ps(d, _mm256_set1_ps(act[i].d[sb])), sum[i]);
      }
    } else {
      __m256 d, dmin;
      DMin8(p, h8, &d, &dmin);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        const __m256 da = _mm256_set1_ps(act[i].d[sb]);
        sum[i] = _mm256_fmadd_ps(ToF(isum[i]), _mm256_mul_ps(d, da), sum[i]);
        sum[i] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, da), msum[i], sum[i]);
      }
    }
  }
  Store<A>(sum, y, ldy, valid);
}

// ---- Q4_K / Q5_K: the scale rides in the madd, a super-block sums in int32.
template <DType M, int A>
void MicroK4(const uint8_t* panel, int64_t nsb, int h8, const ActRowView* act, float* y, int64_t ldy, int valid,
             bool stream) {
  __m256 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kUnitBytes<M>;
    if (stream) PrefetchAhead<kUnitBytes<M>>(p);
    __m256i isum[A];
    __m256 msum[A];
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      isum[i] = _mm256_setzero_si256();
      msum[i] = _mm256_setzero_ps();
    }
    KVS_UNROLL  // constant shifts and chunk offsets
    for (int s = 0; s < 8; ++s) {
      const __m256i sc = Bytes8(p + kK4ScalesOff + 16 * s + 8 * h8), mn = Bytes8(p + kK4MinsOff + 16 * s + 8 * h8);
      const __m256i sc2 = ScalePairs(sc);  // (sc, sc) int16 pairs
      constexpr int kRun = M == DType::kQ4_K ? 8 : 4;  // chunks summed in int16 (see Pairs)
      __m256i s16[A];
      KVS_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m256i q = CodesK4<M>(p, s, c, h8);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const __m256i pr = Pairs(q, Bcast4(act[i].qs + 256 * sb + 32 * s + 4 * c));
          s16[i] = c % kRun == 0 ? pr : Add16(s16[i], pr);
          if (c % kRun == kRun - 1) isum[i] = _mm256_add_epi32(isum[i], _mm256_madd_epi16(s16[i], sc2));
        }
      }
      const __m256 mnf = ToF(mn);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) msum[i] = _mm256_fmadd_ps(mnf, _mm256_set1_ps(act[i].aux_f()[8 * sb + s]), msum[i]);
    }
    __m256 d, dmin;
    DMin8(p, h8, &d, &dmin);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      sum[i] = _mm256_fmadd_ps(ToF(isum[i]), _mm256_mul_ps(d, _mm256_set1_ps(act[i].d[sb])), sum[i]);
      sum[i] = _mm256_fnmadd_ps(dmin, msum[i], sum[i]);
    }
  }
  Store<A>(sum, y, ldy, valid);
}

// ---- Q6_K: int32 per 16-group, then its float scale.
template <int A>
void MicroQ6K(const uint8_t* panel, int64_t nsb, int h8, const ActRowView* act, float* y, int64_t ldy, int valid,
              bool stream) {
  const uint8_t* dw = panel + nsb * kUnitBytes<DType::kQ6_K>;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm256_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kUnitBytes<DType::kQ6_K>;
    if (stream) PrefetchAhead<kUnitBytes<DType::kQ6_K>>(p);
    const __m256 d = Halves8(dw + 32 * sb + 16 * h8);
    __m256 t[A];
    KVS_UNROLL
    for (int i = 0; i < A; ++i) t[i] = _mm256_setzero_ps();
    KVS_UNROLL  // constant shifts and chunk offsets
    for (int g = 0; g < 16; ++g) {
      const int h = g / 8, k = (g / 2) % 4, half = g % 2;  // elements 128h + 32k + 16half ..
      __m256i acc[A];
      KVS_UNROLL
      for (int i = 0; i < A; ++i) acc[i] = _mm256_set1_epi32(act[i].aux_i()[16 * sb + g]);
      KVS_UNROLL
      for (int cc = 0; cc < 4; cc += 2) {  // two chunks per int16 sum (see Pairs)
        const __m256i q0 = CodesQ6K(p, h, k, 4 * half + cc, h8), q1 = CodesQ6K(p, h, k, 4 * half + cc + 1, h8);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const int8_t* x = act[i].qs + 256 * sb + 16 * g + 4 * cc;
          acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(Add16(Pairs(q0, Bcast4(x)), Pairs(q1, Bcast4(x + 4))), ones));
        }
      }
      const __m128i s8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kQ6KScalesOff + 16 * g + 8 * h8));
      const __m256 scv = _mm256_mul_ps(d, ToF(_mm256_cvtepi8_epi32(s8)));
      KVS_UNROLL
      for (int i = 0; i < A; ++i) t[i] = _mm256_fmadd_ps(ToF(acc[i]), scv, t[i]);
    }
    KVS_UNROLL
    for (int i = 0; i < A; ++i) sum[i] = _mm256_fmadd_ps(t[i], _mm256_set1_ps(act[i].d[sb]), sum[i]);
  }
  Store<A>(sum, y, ldy, valid);
}

template <DType M, int A>
void Micro(const uint8_t* panel, int64_t units, int h8, const ActRowView* act, float* y, int64_t ldy, int valid,
           bool stream) {
  if constexpr (kB32<M>) {
    MicroB32<M, A>(panel, units, h8, act, y, ldy, valid, stream);
  } else if constexpr (M == DType::kIQ4_XS) {
    MicroIQ4XS<A>(panel, units, h8, act, y, ldy, valid, stream);
  } else if constexpr (M == DType::kQ2_K || M == DType::kQ3_K) {
    MicroLow2<M, A>(panel, units, h8, act, y, ldy, valid, stream);
  } else if constexpr (kAffineK<M>) {
    MicroK4<M, A>(panel, units, h8, act, y, ldy, valid, stream);
  } else {
    MicroQ6K<A>(panel, units, h8, act, y, ldy, valid, stream);
  }
}

template <DType M>
void TileQ(const TileArgs& t) {
  const int64_t pb = PanelBytes(M, t.cols);
  const int64_t units = kB32<M> ? t.cols / 32 : t.cols / 256;
  uint8_t* pack_buf = t.packed ? nullptr : ThreadScratch(ScratchSlot::kPanel, static_cast<size_t>(pb));
  for (int64_t r0 = 0; r0 < t.rows; r0 += kPanelRows) {
    const int valid = static_cast<int>(std::min<int64_t>(kPanelRows, t.rows - r0));
    const uint8_t* panel;
    if (t.packed) {
      panel = t.w + r0 / kPanelRows * pb;
    } else {
      PackPanel(M, t.w + r0 * t.row_bytes, t.row_bytes, valid, t.cols, pack_buf);
      panel = pack_buf;
    }
    if constexpr (kB32<M>) {
      if (t.m <= 2) {  // decode: both halves per pass
        ActRowView act[2];
        for (int i = 0; i < t.m; ++i) act[i] = ActRowView::At(t, i);
        if (t.m == 1) MicroB32Both<M, 1>(panel, units, act, t.y + r0, t.ldy, valid);
        else MicroB32Both<M, 2>(panel, units, act, t.y + r0, t.ldy, valid);
        continue;
      }
    }
    for (int h8 = 0; h8 < 2 && 8 * h8 < valid; ++h8) {
      const int hv = std::min(8, valid - 8 * h8);
      const bool stream = t.packed && h8 == 0 && t.m <= kMaxA;
      for (int64_t i0 = 0; i0 < t.m; i0 += kMaxA) {
        const int na = static_cast<int>(std::min<int64_t>(kMaxA, t.m - i0));
        ActRowView act[kMaxA];
        for (int i = 0; i < na; ++i) act[i] = ActRowView::At(t, i0 + i);
        float* y = t.y + i0 * t.ldy + r0 + 8 * h8;
        switch (na) {
          case 1: Micro<M, 1>(panel, units, h8, act, y, t.ldy, hv, stream); break;
          case 2: Micro<M, 2>(panel, units, h8, act, y, t.ldy, hv, stream); break;
          case 3: Micro<M, 3>(panel, units, h8, act, y, t.ldy, hv, stream); break;
          default: Micro<M, 4>(panel, units, h8, act, y, t.ldy, hv, stream); break;
        }
      }
    }
  }
}

}  // namespace

void TileQ8_0(const TileArgs& a) { TileQ<DType::kQ8_0>(a); }
void TileQ4_0(const TileArgs& a) { TileQ<DType::kQ4_0>(a); }
void TileQ4_1(const TileArgs& a) { TileQ<DType::kQ4_1>(a); }
void TileQ5_0(const TileArgs& a) { TileQ<DType::kQ5_0>(a); }
void TileIQ4_NL(const TileArgs& a) { TileQ<DType::kIQ4_NL>(a); }
void TileIQ4_XS(const TileArgs& a) { TileQ<DType::kIQ4_XS>(a); }
void TileQ2_K(const TileArgs& a) { TileQ<DType::kQ2_K>(a); }
void TileQ3_K(const TileArgs& a) { TileQ<DType::kQ3_K>(a); }
void TileQ4_K(const TileArgs& a) { TileQ<DType::kQ4_K>(a); }
void TileQ5_K(const TileArgs& a) { TileQ<DType::kQ5_K>(a); }
void TileQ6_K(const TileArgs& a) { TileQ<DType::kQ6_K>(a); }

}  // namespace kvs::kernels::avx2
