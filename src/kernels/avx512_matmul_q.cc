// AVX-512 VNNI quantized MatMul (every quantized weight type: Q8_0, Q4_0,
// Q4_1, Q5_0, IQ4_NL, IQ4_XS, Q2_K .. Q6_K) over the 16-row interleaved
// panels of packed.h: weights packed at load are read in place; unpacked
// weights are packed one panel at a time into scratch.
//
// One vpdpbusd multiplies a 64-byte chunk (16 rows x 4 unsigned codes) by 4
// broadcast activation codes and accumulates into the 16 rows' int32 lanes,
// so no horizontal sums are needed. The codes' offsets (Q8_0's +128, Q4_0's
// 8, Q6_K's 32, the IQ4 grid values' +128, the Q4_1 / K-quant mins) come
// from the per-group activation sums the activation quantizer precomputes
// (ActLayout's aux terms). IQ4_NL / IQ4_XS nibbles are grid indices: one
// vpshufb per chunk half turns them into grid values + 128.
//
// Two kernel shapes for Q4_K, Q5_K and Q6_K:
//   decode (m <= kDecodeMaxM): every activation row at once over the panel,
//     K-quant scales decoded inline per super-block, so the weights are read
//     exactly once, as one sequential stream per thread;
//   batch (larger m): K-quant scales expanded once per panel into float
//     vectors and codes decoded to bytes, then reused from L1/L2 by groups of
//     kMaxA activation rows (register tiling: 16 rows x kMaxA accumulators).
// The other types have one kernel for every m (decode groups of up to
// kDecodeMaxM rows, batch groups of kMaxA), decoding codes inline.
#include <algorithm>

#include "kernels/avx512_util.h"
#include "kernels/isa_decls.h"
#include "kernels/packed.h"
#include "kernels/quant_formats.h"
#include "kernels/scratch.h"

namespace kvs::kernels::avx512 {
namespace {

template <DType M>
constexpr bool kAffineK = M == DType::kQ4_K || M == DType::kQ5_K;
// The panel layout's units (packed.h).
template <DType M>
constexpr bool kB32 = PanelHasBlock32Units(M);
template <DType M>
constexpr int64_t kUnitBytes = PanelUnitBytes(M);

constexpr int kMaxA = 8;        // activation rows per batch microkernel call
constexpr int kDecodeMaxM = 4;  // up to this many rows: the decode kernels
#ifndef KVS_PF_DIST
#define KVS_PF_DIST 4096
#endif
constexpr int64_t kPrefetchDistance = KVS_PF_DIST;  // bytes ahead of the decode stream

#ifndef KVS_PF_STEP
#define KVS_PF_STEP 64
#endif
// Prefetches the `bytes` (multiple of 64) that follow p by kPrefetchDistance.
template <int64_t kBytes>
inline void PrefetchAhead(const uint8_t* p) {
  if constexpr (kPrefetchDistance > 0) {
#pragma GCC unroll 64
    for (int64_t o = 0; o < kBytes; o += KVS_PF_STEP) Prefetch(p + kPrefetchDistance + o);
  }
}


inline __m512i Bcast4(const int8_t* p) { return _mm512_set1_epi32(LoadI32(p)); }
inline __m512i Load(const uint8_t* p) { return _mm512_load_si512(p); }
// 16 f16 (32 bytes, 32-byte aligned) -> floats.
inline __m512 Halves(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 ToF(__m512i v) { return _mm512_cvtepi32_ps(v); }

// Bit `from` of every byte of h moved to bit `to` (other bits cleared);
// the 16-bit shifts never carry a byte's bits into `to` of its neighbour for
// the |from - to| <= 5 used here.
inline __m512i MoveBit(__m512i h, int from, int to) {
  const __m512i s = from >= to ? _mm512_srli_epi16(h, from - to) : _mm512_slli_epi16(h, to - from);
  return _mm512_and_si512(s, _mm512_set1_epi8(static_cast<char>(1 << to)));
}
// Each row's header word (f16 d | f16 dmin << 16) at p -> floats.
inline void DMin16(const uint8_t* p, __m512* d, __m512* dmin) {
  const __m512i dd = _mm512_load_si512(p);
  *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dd));
  *dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dd, 16)));
}

// The IQ4 grid values + 128 (unsigned), in every 128-bit lane: vpshufb's
// table for nibble indices.
inline __m512i IQ4Table() {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
  return _mm512_broadcast_i32x4(_mm_xor_si128(t, _mm_set1_epi8(static_cast<char>(0x80))));
}
// Low and high nibbles of the chunk w: as they are, or (kLut) as grid values.
template <bool kLut>
inline void Nibbles(__m512i w, __m512i lut, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  *lo = _mm512_and_si512(w, m4);
  *hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), m4);
  if constexpr (kLut) {
    *lo = _mm512_shuffle_epi8(lut, *lo);
    *hi = _mm512_shuffle_epi8(lut, *hi);
  }
}

// (a & b) | c
inline __m512i AndOr(__m512i a, __m512i b, __m512i c) { return _mm512_ternarylogic_epi32(a, b, c, 0xEA); }

// The 16 rows' codes of sub-blocks 2g (*lo) and 2g + 1 (*hi), chunk c
// (elements 32s + 4c ..) of a Q4_K/Q5_K super-block at p. Q4_K's high
// nibbles stay in place: *hi is 16 x the code (kHiScale undoes it).
template <DType M>
constexpr float kHiScale = M == DType::kQ4_K ? 1.0f / 16 : 1.0f;
template <DType M>
inline void CodesK4(const uint8_t* p, int g, int c, __m512i* lo, __m512i* hi) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  const __m512i w = Load(p + kK4CodesOff + (8 * g + c) * 64);
  if constexpr (M == DType::kQ4_K) {
    *lo = _mm512_and_si512(w, m4);
    *hi = _mm512_andnot_si512(m4, w);
  } else {
    const __m512i h = Load(p + kK5HighOff + 64 * c);
    *lo = AndOr(w, m4, MoveBit(h, 2 * g, 4));
    *hi = AndOr(_mm512_srli_epi16(w, 4), m4, MoveBit(h, 2 * g + 1, 4));
  }
}

// Sub-block s's scales or mins of the 16 rows (bytes at p) as floats.
inline __m512 Bytes16(const uint8_t* p) {
  return ToF(_mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 SignedBytes16(const uint8_t* p) {
  return ToF(_mm512_cvtepi8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p))));
}

// Q6_K codes of elements 128h + 32k + 4c .. for k = 0..3 of the super-block
// at p; q[3] is 4 x the code (scale the group by 1/4).
inline void CodesQ6K(const uint8_t* p, int h, int c, __m512i q[4]) {
  const __m512i m6 = _mm512_set1_epi8(0x3F);
  const __m512i x0 = Load(p + (24 * h + 3 * c) * 64), x1 = Load(p + (24 * h + 3 * c + 1) * 64),
                x2 = Load(p + (24 * h + 3 * c + 2) * 64);
  q[0] = _mm512_and_si512(x0, m6);
  q[1] = _mm512_and_si512(x1, m6);
  q[2] = _mm512_and_si512(x2, m6);
  const __m512i t = _mm512_andnot_si512(m6, x0);
  q[3] = AndOr(_mm512_srli_epi16(x2, 4), _mm512_set1_epi8(0x0C), AndOr(_mm512_srli_epi16(x1, 2), _mm512_set1_epi8(0x30), t));
}

template <int A>
inline void Store(const __m512 (&sum)[A], float* y, int64_t ldy, __mmask16 mask) {
  KVS_UNROLL
  for (int i = 0; i < A; ++i) _mm512_mask_storeu_ps(y + i * ldy, mask, sum[i]);
}

// vpdpbusd accumulates in place (latency ~5 cycles), so one accumulator per
// block would make each block a serial chain; with few activation rows the
// chunks are spread over kSplit<A> accumulators and summed at the end.
template <int A>
constexpr int kSplit = A == 1 ? 4 : (A == 2 ? 2 : 1);

template <int A, int S>
inline void ZeroAcc(__m512i (&acc)[A][S]) {
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    KVS_UNROLL
    for (int j = 0; j < S; ++j) acc[i][j] = _mm512_setzero_si512();
  }
}

template <int S>
inline __m512i SumAcc(const __m512i (&acc)[S]) {
  if constexpr (S == 1) return acc[0];
  else if constexpr (S == 2) return _mm512_add_epi32(acc[0], acc[1]);
  else return _mm512_add_epi32(_mm512_add_epi32(acc[0], acc[1]), _mm512_add_epi32(acc[2], acc[3]));
}

// ---- 32-element blocks: one kernel for every m (the block scale is one
// f16 per row; Q4_1 adds its offset times the activation block's sum).
template <DType M, int A>
void MicroB32(const uint8_t* panel, int64_t nblk, const ActRowView* act, float* y, int64_t ldy, __mmask16 mask) {
  constexpr int S = kSplit<A>;
  const uint8_t* dw = panel + nblk * kUnitBytes<M>;
  const uint8_t* mw = dw + 32 * nblk;  // Q4_1's offsets
  const __m512i lut = IQ4Table();
  __m512 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* p = panel + b * kUnitBytes<M>;
    if (A <= kDecodeMaxM) PrefetchAhead<kUnitBytes<M>>(p);
    __m512i acc[A][S];
    ZeroAcc(acc);
    if constexpr (M != DType::kQ4_1) {  // the codes' offset (the aux term)
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        acc[i][0] = _mm512_set1_epi32(act[i].aux_i()[b]);
      }
    }
    if constexpr (M == DType::kQ8_0) {
      KVS_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m512i w = Load(p + 64 * c);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          acc[i][c % S] = _mm512_dpbusd_epi32(acc[i][c % S], w, Bcast4(act[i].qs + 32 * b + 4 * c));
        }
      }
    } else {
      KVS_UNROLL
      for (int c = 0; c < 4; ++c) {
        __m512i lo, hi;
        Nibbles<M == DType::kIQ4_NL>(Load(p + 64 * c), lut, &lo, &hi);
        if constexpr (M == DType::kQ5_0) {
          const __m512i h = Load(p + 256);
          lo = _mm512_or_si512(lo, MoveBit(h, 2 * c, 4));
          hi = _mm512_or_si512(hi, MoveBit(h, 2 * c + 1, 4));
        }
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          acc[i][(2 * c) % S] = _mm512_dpbusd_epi32(acc[i][(2 * c) % S], lo, Bcast4(act[i].qs + 32 * b + 4 * c));
          acc[i][(2 * c + 1) % S] =
              _mm512_dpbusd_epi32(acc[i][(2 * c + 1) % S], hi, Bcast4(act[i].qs + 32 * b + 16 + 4 * c));
        }
      }
    }
    const __m512 d = Halves(dw + 32 * b);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      sum[i] = _mm512_fmadd_ps(ToF(SumAcc(acc[i])), _mm512_mul_ps(d, _mm512_set1_ps(act[i].d[b])), sum[i]);
      if constexpr (M == DType::kQ4_1) {
        sum[i] = _mm512_fmadd_ps(Halves(mw + 32 * b), _mm512_set1_ps(act[i].aux_f()[b]), sum[i]);
      }
    }
  }
  Store<A>(sum, y, ldy, mask);
}

// ---- IQ4_XS: 32-element blocks as IQ4_NL's, each block's int32 sum times
// its 6-bit scale, the super-block's sum times d; one kernel for every m.
template <int A>
void MicroIQ4XS(const uint8_t* panel, int64_t nsb, const ActRowView* act, float* y, int64_t ldy, __mmask16 mask) {
  constexpr int S = kSplit<A>;
  const uint8_t* dw = panel + nsb * kIQ4XSUnitBytes;
  const __m512i lut = IQ4Table();
  __m512 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kIQ4XSUnitBytes;
    if (A <= kDecodeMaxM) PrefetchAhead<kIQ4XSUnitBytes>(p);
    __m512 t[A];
    KVS_UNROLL
    for (int i = 0; i < A; ++i) t[i] = _mm512_setzero_ps();
    for (int j = 0; j < 8; ++j) {
      __m512i acc[A][S];
      ZeroAcc(acc);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) acc[i][0] = _mm512_set1_epi32(act[i].aux_i()[8 * sb + j]);
      KVS_UNROLL
      for (int c = 0; c < 4; ++c) {
        __m512i lo, hi;
        Nibbles<true>(Load(p + (4 * j + c) * 64), lut, &lo, &hi);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const int8_t* x = act[i].qs + 256 * sb + 32 * j + 4 * c;
          acc[i][(2 * c) % S] = _mm512_dpbusd_epi32(acc[i][(2 * c) % S], lo, Bcast4(x));
          acc[i][(2 * c + 1) % S] = _mm512_dpbusd_epi32(acc[i][(2 * c + 1) % S], hi, Bcast4(x + 16));
        }
      }
      const __m512 sc = SignedBytes16(p + kIQ4XSScalesOff + 16 * j);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) t[i] = _mm512_fmadd_ps(ToF(SumAcc(acc[i])), sc, t[i]);
    }
    const __m512 d = Halves(dw + 32 * sb);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) sum[i] = _mm512_fmadd_ps(t[i], _mm512_mul_ps(d, _mm512_set1_ps(act[i].d[sb])), sum[i]);
  }
  Store<A>(sum, y, ldy, mask);
}

// ---- Q2_K / Q3_K: 2-bit code planes (plane k of a chunk: bits 2k..2k+1
// of each byte, elements 128h + 32k + 4c + i), plus Q3_K's 3rd bits; 16-
// groups 8h + 2k + c / 4, each group's int32 sum times its scale. Q3_K's
// values are the codes minus 4: the accumulators start at -4 * sum(x), the
// aux term. One kernel for every m; with few activation rows the four
// planes of a chunk run side by side.
template <DType M, int A>
void MicroLow2(const uint8_t* panel, int64_t nsb, const ActRowView* act, float* y, int64_t ldy, __mmask16 mask) {
  constexpr bool kQ3 = M == DType::kQ3_K;
  constexpr int J = A <= 4 ? 4 : 1;  // planes per pass (registers: J x A accumulators)
  constexpr int64_t kCodes = kQ3 ? 0 : kQ2KCodesOff, kScales = kQ3 ? kQ3KScalesOff : kQ2KScalesOff;
  const __m512i m3 = _mm512_set1_epi8(0x03);
  const uint8_t* dw = panel + nsb * kUnitBytes<M>;  // Q3_K's d
  __m512 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kUnitBytes<M>;
    if (A <= kDecodeMaxM) PrefetchAhead<kUnitBytes<M>>(p);
    __m512 t[A], msum[A];
    KVS_UNROLL
    for (int i = 0; i < A; ++i) t[i] = msum[i] = _mm512_setzero_ps();
    KVS_UNROLL  // constant shifts and chunk offsets
    for (int hq = 0; hq < 4; ++hq) {  // h = hq / 2, chunks c = 4 (hq % 2) ..
      const int h = hq / 2, half = hq % 2;
      KVS_UNROLL
      for (int k0 = 0; k0 < 4; k0 += J) {
        __m512i acc[J][A];
        KVS_UNROLL
        for (int j = 0; j < J; ++j) {
          KVS_UNROLL
          for (int i = 0; i < A; ++i) {
            acc[j][i] = kQ3 ? _mm512_set1_epi32(act[i].aux_i()[16 * sb + 8 * h + 2 * (k0 + j) + half])
                            : _mm512_setzero_si512();
          }
        }
        KVS_UNROLL
        for (int cc = 0; cc < 4; ++cc) {
          const int c = 4 * half + cc;
          const __m512i w = Load(p + kCodes + (8 * h + c) * 64);
          __m512i hb;
          if constexpr (kQ3) hb = Load(p + kQ3KHighOff + 64 * c);
          KVS_UNROLL
          for (int j = 0; j < J; ++j) {
            const int k = k0 + j;
            const __m512i lo = k == 0 ? w : _mm512_srli_epi16(w, 2 * k);
            __m512i q;
            if constexpr (kQ3) q = AndOr(lo, m3, MoveBit(hb, 4 * h + k, 2));
            else q = _mm512_and_si512(lo, m3);
            KVS_UNROLL
            for (int i = 0; i < A; ++i) {
              acc[j][i] = _mm512_dpbusd_epi32(acc[j][i], q, Bcast4(act[i].qs + 256 * sb + 128 * h + 32 * k + 4 * c));
            }
          }
        }
        KVS_UNROLL
        for (int j = 0; j < J; ++j) {
          const int g = 8 * h + 2 * (k0 + j) + half;
          if constexpr (kQ3) {
            const __m512 sc = SignedBytes16(p + kScales + 16 * g);
            KVS_UNROLL
            for (int i = 0; i < A; ++i) t[i] = _mm512_fmadd_ps(ToF(acc[j][i]), sc, t[i]);
          } else {
            const __m512i b = _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(p + kScales + 16 * g)));
            const __m512 sc = ToF(_mm512_and_si512(b, _mm512_set1_epi32(0xF))), mn = ToF(_mm512_srli_epi32(b, 4));
            KVS_UNROLL
            for (int i = 0; i < A; ++i) {
              t[i] = _mm512_fmadd_ps(ToF(acc[j][i]), sc, t[i]);
              msum[i] = _mm512_fmadd_ps(mn, _mm512_set1_ps(static_cast<float>(act[i].aux_i()[16 * sb + g])), msum[i]);
            }
          }
        }
      }
    }
    if constexpr (kQ3) {
      const __m512 d = Halves(dw + 32 * sb);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) sum[i] = _mm512_fmadd_ps(t[i], _mm512_mul_ps(d, _mm512_set1_ps(act[i].d[sb])), sum[i]);
    } else {
      __m512 d, dmin;
      DMin16(p, &d, &dmin);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        const __m512 da = _mm512_set1_ps(act[i].d[sb]);
        sum[i] = _mm512_fmadd_ps(t[i], _mm512_mul_ps(d, da), sum[i]);
        sum[i] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, da), msum[i], sum[i]);
      }
    }
  }
  Store<A>(sum, y, ldy, mask);
}

// ---- Q4_K / Q5_K decode: scales read per super-block; sub-blocks 2g and
// 2g + 1 come from one load of a code chunk and run side by side.
template <DType M, int A>
void DecodeK4(const uint8_t* panel, int64_t nsb, const ActRowView* act, float* y, int64_t ldy, __mmask16 mask) {
  constexpr int S = (kSplit<A> + 1) / 2;  // accumulators per sub-block
  const __m512 hi_scale = _mm512_set1_ps(kHiScale<M>);
  __m512 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kUnitBytes<M>;
    PrefetchAhead<kUnitBytes<M>>(p);
    __m512 t[A], msum[A];
    KVS_UNROLL
    for (int i = 0; i < A; ++i) t[i] = msum[i] = _mm512_setzero_ps();
    KVS_UNROLL
    for (int g = 0; g < 4; ++g) {
      __m512i lo_acc[A][S], hi_acc[A][S];
      ZeroAcc(lo_acc);
      ZeroAcc(hi_acc);
      KVS_UNROLL
      for (int c = 0; c < 8; ++c) {
        __m512i lo, hi;
        CodesK4<M>(p, g, c, &lo, &hi);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const int8_t* x = act[i].qs + 256 * sb + 64 * g + 4 * c;
          lo_acc[i][c % S] = _mm512_dpbusd_epi32(lo_acc[i][c % S], lo, Bcast4(x));
          hi_acc[i][c % S] = _mm512_dpbusd_epi32(hi_acc[i][c % S], hi, Bcast4(x + 32));
        }
      }
      const __m512 sc_lo = Bytes16(p + kK4ScalesOff + 32 * g);
      const __m512 sc_hi = _mm512_mul_ps(Bytes16(p + kK4ScalesOff + 32 * g + 16), hi_scale);
      const __m512 mn_lo = Bytes16(p + kK4MinsOff + 32 * g), mn_hi = Bytes16(p + kK4MinsOff + 32 * g + 16);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        t[i] = _mm512_fmadd_ps(ToF(SumAcc(lo_acc[i])), sc_lo, t[i]);
        t[i] = _mm512_fmadd_ps(ToF(SumAcc(hi_acc[i])), sc_hi, t[i]);
        msum[i] = _mm512_fmadd_ps(mn_lo, _mm512_set1_ps(act[i].aux_f()[8 * sb + 2 * g]), msum[i]);
        msum[i] = _mm512_fmadd_ps(mn_hi, _mm512_set1_ps(act[i].aux_f()[8 * sb + 2 * g + 1]), msum[i]);
      }
    }
    __m512 d, dmin;
    DMin16(p, &d, &dmin);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      sum[i] = _mm512_fmadd_ps(t[i], _mm512_mul_ps(d, _mm512_set1_ps(act[i].d[sb])), sum[i]);
      sum[i] = _mm512_fnmadd_ps(dmin, msum[i], sum[i]);
    }
  }
  Store<A>(sum, y, ldy, mask);
}

// ---- Q6_K decode: per half of a 32-element run (4 chunks), the four
// 16-groups k = 0..3 run side by side.
template <int A>
void DecodeQ6K(const uint8_t* panel, int64_t nsb, const ActRowView* act, float* y, int64_t ldy, __mmask16 mask) {
  const uint8_t* dw = panel + nsb * kUnitBytes<DType::kQ6_K>;
  __m512 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kUnitBytes<DType::kQ6_K>;
    PrefetchAhead<kUnitBytes<DType::kQ6_K>>(p);
    __m512 t[A];
    KVS_UNROLL
    for (int i = 0; i < A; ++i) t[i] = _mm512_setzero_ps();
    KVS_UNROLL
    for (int hh = 0; hh < 4; ++hh) {  // h = hh / 2, half = hh % 2: chunks c = 4 half .. 4 half + 3
      const int h = hh / 2, half = hh % 2;
      __m512i acc[4][A];
      KVS_UNROLL
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * h + 2 * k + half;
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const __m512i aux = _mm512_set1_epi32(act[i].aux_i()[16 * sb + g]);
          acc[k][i] = k == 3 ? _mm512_slli_epi32(aux, 2) : aux;
        }
      }
      KVS_UNROLL
      for (int cc = 0; cc < 4; ++cc) {
        const int c = 4 * half + cc;
        __m512i q[4];
        CodesQ6K(p, h, c, q);
        KVS_UNROLL
        for (int k = 0; k < 4; ++k) {
          KVS_UNROLL
          for (int i = 0; i < A; ++i) acc[k][i] = _mm512_dpbusd_epi32(acc[k][i], q[k], Bcast4(act[i].qs + 256 * sb + 128 * h + 32 * k + 4 * c));
        }
      }
      KVS_UNROLL
      for (int k = 0; k < 4; ++k) {
        __m512 scv = SignedBytes16(p + kQ6KScalesOff + 16 * (8 * h + 2 * k + half));
        if (k == 3) scv = _mm512_mul_ps(scv, _mm512_set1_ps(0.25f));
        KVS_UNROLL
        for (int i = 0; i < A; ++i) t[i] = _mm512_fmadd_ps(ToF(acc[k][i]), scv, t[i]);
      }
    }
    const __m512 d = Halves(dw + 32 * sb);
    KVS_UNROLL
    for (int i = 0; i < A; ++i) sum[i] = _mm512_fmadd_ps(t[i], _mm512_mul_ps(d, _mm512_set1_ps(act[i].d[sb])), sum[i]);
  }
  Store<A>(sum, y, ldy, mask);
}

// ---- K-quant batch kernels: scales expanded once per panel, then reused by
// every group of kMaxA activation rows; the codes, which take one to several
// operations each to unpack, are also decoded once per panel to bytes
// (DecodeCodes), so the microkernel is loads and vpdpbusd (+20 % for Q4_K,
// +60 % for Q5_K and Q6_K on a 125M model's prefill).
// Q4_K/Q5_K: per sub-block (sb*8 + s), 32 floats: d*sc (16), -dmin*m (16).
// Q6_K: per 16-group (sb*16 + g), 16 floats d*sc.

// Codes of 32-element block j (element 32j + 4c + i of panel row r) at
// codes[(j * 8 + c) * 64 + 4r + i], values as stored (Q6_K: 0..63).
template <DType M>
void DecodeCodes(const uint8_t* panel, int64_t nsb, uint8_t* codes) {
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kUnitBytes<M>;
    uint8_t* o = codes + sb * 8 * 512;
    KVS_UNROLL
    for (int c = 0; c < 8; ++c) {
      if constexpr (M == DType::kQ6_K) {
        KVS_UNROLL
        for (int h = 0; h < 2; ++h) {
          __m512i q[4];
          CodesQ6K(p, h, c, q);
          q[3] = _mm512_and_si512(_mm512_srli_epi16(q[3], 2), _mm512_set1_epi8(0x3F));
          KVS_UNROLL
          for (int k = 0; k < 4; ++k) _mm512_store_si512(o + ((4 * h + k) * 8 + c) * 64, q[k]);
        }
      } else {
        KVS_UNROLL
        for (int g = 0; g < 4; ++g) {
          __m512i lo, hi;
          CodesK4<M>(p, g, c, &lo, &hi);
          if constexpr (M == DType::kQ4_K) hi = _mm512_srli_epi16(hi, 4);  // the code, not 16 x
          _mm512_store_si512(o + (2 * g * 8 + c) * 64, lo);
          _mm512_store_si512(o + ((2 * g + 1) * 8 + c) * 64, hi);
        }
      }
    }
  }
}
template <DType M>
constexpr int64_t kExpandFloats = kAffineK<M> ? 8 * 32 : 16 * 16;  // per super-block

template <DType M>
void ExpandScales(const uint8_t* panel, int64_t nsb, float* out) {
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* p = panel + sb * kUnitBytes<M>;
    float* o = out + sb * kExpandFloats<M>;
    if constexpr (kAffineK<M>) {
      __m512 d, dmin;
      DMin16(p, &d, &dmin);
      KVS_UNROLL
      for (int s = 0; s < 8; ++s) {
        _mm512_store_ps(o + 32 * s, _mm512_mul_ps(d, Bytes16(p + kK4ScalesOff + 16 * s)));
        _mm512_store_ps(o + 32 * s + 16, _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(dmin, Bytes16(p + kK4MinsOff + 16 * s))));
      }
    } else {
      const __m512 d = Halves(panel + nsb * kUnitBytes<M> + 32 * sb);
      KVS_UNROLL
      for (int g = 0; g < 16; ++g) _mm512_store_ps(o + 16 * g, _mm512_mul_ps(d, SignedBytes16(p + kQ6KScalesOff + 16 * g)));
    }
  }
}

// `codes`: DecodeCodes' output for the panel.
template <DType M, int A>
void BatchK(const uint8_t* codes, int64_t nsb, const float* scales, const ActRowView* act,
            float* y, int64_t ldy, __mmask16 mask) {
  __m512 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm512_setzero_ps();
  for (int64_t sb = 0; sb < nsb; ++sb) {
    const uint8_t* cb = codes + sb * 8 * 512;
    const float* e = scales + sb * kExpandFloats<M>;
    __m512 t[A];  // this super-block's sum before the activation scale
    KVS_UNROLL
    for (int i = 0; i < A; ++i) t[i] = _mm512_setzero_ps();
    for (int j = 0; j < 8; ++j) {  // 32-element block
      const int8_t* x[A];
      KVS_UNROLL
      for (int i = 0; i < A; ++i) x[i] = act[i].qs + 256 * sb + 32 * j;
      if constexpr (kAffineK<M>) {
        __m512i acc[A];
        KVS_UNROLL
        for (int i = 0; i < A; ++i) acc[i] = _mm512_setzero_si512();
        KVS_UNROLL
        for (int c = 0; c < 8; ++c) {
          const __m512i q = Load(cb + (8 * j + c) * 64);
          KVS_UNROLL
          for (int i = 0; i < A; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], q, Bcast4(x[i] + 4 * c));
        }
        const __m512 scv = _mm512_load_ps(e + 32 * j), mnv = _mm512_load_ps(e + 32 * j + 16);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          t[i] = _mm512_fmadd_ps(ToF(acc[i]), scv, t[i]);
          sum[i] = _mm512_fmadd_ps(mnv, _mm512_set1_ps(act[i].aux_f()[8 * sb + j]), sum[i]);
        }
      } else {  // Q6_K: two 16-groups per block
        KVS_UNROLL
        for (int half = 0; half < 2; ++half) {
          const int g = 2 * j + half;
          __m512i acc[A];
          KVS_UNROLL
          for (int i = 0; i < A; ++i) acc[i] = _mm512_set1_epi32(act[i].aux_i()[16 * sb + g]);
          KVS_UNROLL
          for (int cc = 0; cc < 4; ++cc) {
            const __m512i q = Load(cb + (8 * j + 4 * half + cc) * 64);
            KVS_UNROLL
            for (int i = 0; i < A; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], q, Bcast4(x[i] + 16 * half + 4 * cc));
          }
          const __m512 scv = _mm512_load_ps(e + 16 * g);
          KVS_UNROLL
          for (int i = 0; i < A; ++i) t[i] = _mm512_fmadd_ps(ToF(acc[i]), scv, t[i]);
        }
      }
    }
    KVS_UNROLL
    for (int i = 0; i < A; ++i) sum[i] = _mm512_fmadd_ps(t[i], _mm512_set1_ps(act[i].d[sb]), sum[i]);
  }
  Store<A>(sum, y, ldy, mask);
}

// Runs kernel K<A> with A = n (1..4 or kMaxA: see TileQ's groups).
#define KVS_DISPATCH_A(n, CALL) \
  switch (n) {                  \
    case 1: CALL(1); break;     \
    case 2: CALL(2); break;     \
    case 3: CALL(3); break;     \
    case 4: CALL(4); break;     \
    default: CALL(8); break;    \
  }

template <DType M>
void TileQ(const TileArgs& t) {
  const int64_t pb = PanelBytes(M, t.cols);
  const int64_t units = kB32<M> ? t.cols / 32 : t.cols / 256;
  uint8_t* pack_buf = t.packed ? nullptr : ThreadScratch(ScratchSlot::kPanel, static_cast<size_t>(pb));
  // The K-quants' batch path expands scales and decodes codes per panel.
  constexpr bool kLow2 = M == DType::kQ2_K || M == DType::kQ3_K;
  constexpr bool kK = !kB32<M> && M != DType::kIQ4_XS && !kLow2;
  float* expanded = nullptr;
  uint8_t* codes = nullptr;
  if (kK && t.m > kDecodeMaxM) {
    expanded = reinterpret_cast<float*>(
        ThreadScratch(ScratchSlot::kAux, static_cast<size_t>(units * kExpandFloats<M>) * sizeof(float)));
    codes = ThreadScratch(ScratchSlot::kCodes, static_cast<size_t>(units * 8 * 512));
  }
  for (int64_t r0 = 0; r0 < t.rows; r0 += kPanelRows) {
    const int valid = static_cast<int>(std::min<int64_t>(kPanelRows, t.rows - r0));
    const __mmask16 mask = TailMask(valid);
    const uint8_t* panel;
    if (t.packed) {
      panel = t.w + r0 / kPanelRows * pb;
    } else {
      PackPanel(M, t.w + r0 * t.row_bytes, t.row_bytes, valid, t.cols, pack_buf);
      panel = pack_buf;
    }
    if (expanded != nullptr) ExpandScales<M>(panel, units, expanded);
    if (codes != nullptr) DecodeCodes<M>(panel, units, codes);
    // Groups of kMaxA activation rows, the rest (or all of decode) in
    // groups of at most kDecodeMaxM: kernels exist for A = 1..4 and 8 only
    // (fewer instantiations; a 5-7 row rest costs one more pass over a
    // panel already in cache).
    int na = 0;
    for (int64_t i0 = 0; i0 < t.m; i0 += na) {
      na = static_cast<int>(t.m - i0 >= kMaxA && t.m > kDecodeMaxM ? kMaxA
                                                                    : std::min<int64_t>(kDecodeMaxM, t.m - i0));
      ActRowView act[kMaxA];
      for (int i = 0; i < na; ++i) act[i] = ActRowView::At(t, i0 + i);
      float* y = t.y + i0 * t.ldy + r0;
      if constexpr (kB32<M>) {
#define KVS_CALL(A) MicroB32<M, A>(panel, units, act, y, t.ldy, mask)
        KVS_DISPATCH_A(na, KVS_CALL)
#undef KVS_CALL
      } else if constexpr (M == DType::kIQ4_XS) {
#define KVS_CALL(A) MicroIQ4XS<A>(panel, units, act, y, t.ldy, mask)
        KVS_DISPATCH_A(na, KVS_CALL)
#undef KVS_CALL
      } else if constexpr (kLow2) {
#define KVS_CALL(A) MicroLow2<M, A>(panel, units, act, y, t.ldy, mask)
        KVS_DISPATCH_A(na, KVS_CALL)
#undef KVS_CALL
      } else if (expanded == nullptr) {
        switch (na) {
#define KVS_CALL(A)                                                             \
  if constexpr (kAffineK<M>) DecodeK4<M, A>(panel, units, act, y, t.ldy, mask); \
  else DecodeQ6K<A>(panel, units, act, y, t.ldy, mask)
          case 1: KVS_CALL(1); break;
          case 2: KVS_CALL(2); break;
          case 3: KVS_CALL(3); break;
          default: KVS_CALL(4); break;
#undef KVS_CALL
        }
      } else {
#define KVS_CALL(A) BatchK<M, A>(codes, units, expanded, act, y, t.ldy, mask)
        KVS_DISPATCH_A(na, KVS_CALL)
#undef KVS_CALL
      }
    }
  }
}

#undef KVS_DISPATCH_A

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

}  // namespace kvs::kernels::avx512
