// Row-at-a-time SIMD MatMul tiles for the weight types without a packed
// panel layout (Q5_0, Q3_K, Q2_K). Written once with
// 256-bit integer intrinsics and included by avx2_matmul_q2.cc and
// avx512_matmul_q2.cc, which define KVS_ROWDOT_ISA (the variant's namespace)
// and KVS_ROWDOT_VNNI (1: vpdpbusd replaces maddubs + madd). Everything
// here has internal linkage, so the two copies, compiled with different ISA
// flags, never mix.
//
// Each block's (super-block's) integer dot product is reduced to one int32
// before it is scaled, in the scalar kernels' order, so the results equal
// the scalar variant's bit for bit (lanes of offset codes can be far larger
// than the signed terms, so scaling lanes apart would lose accuracy).
//
// Why rows and not panels: these types are rare in practice and their
// panels would each need their own packing; one weight row's blocks are
// decoded to bytes once per group of up to four activation rows and
// multiplied by Q8_0 / Q8_K activation codes (ggml's scheme). For prefill,
// Q5_0 / Q3_K rows are rewritten losslessly as Q8_0 / Q6_K and go through
// those types' panel kernels (see RdTileOrTranscode); Q2_K rows are
// dequantized to f32 for the float GEMM (RdTileOrDequant). The codes'
// offsets and the Q2_K mins use the activation sums the activation
// quantizer precomputed (ActLayout's aux terms). (Q4_1, IQ4_NL and IQ4_XS
// have packed panels: avx*_matmul_q.cc.)
#ifndef KVS_ROWDOT_ISA
#error "define KVS_ROWDOT_ISA (avx2 or avx512) before including rowdot_q_impl.h"
#endif

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/dispatch.h"
#include "kernels/packed.h"
#include "kernels/quant_formats.h"
#include "kernels/scratch.h"

namespace kvs::kernels::KVS_ROWDOT_ISA {
namespace {

constexpr int kRowMaxA = 4;  // activation rows per weight-row pass

struct RdAct {
  const int8_t* qs;
  const float* d;
  const uint8_t* aux;
  int32_t aux_i(int64_t j) const {
    int32_t v;
    std::memcpy(&v, aux + 4 * j, 4);
    return v;
  }
  float aux_f(int64_t j) const {
    float v;
    std::memcpy(&v, aux + 4 * j, 4);
    return v;
  }
};

inline float RdHalf(uint16_t h) { return _cvtsh_ss(h); }

inline int32_t RdHSumI(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

inline __m256i RdLoad32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// acc + the 4-element sums of u (unsigned bytes) x s (signed bytes), per
// int32 lane. maddubs' int16 pair sums cannot saturate for u <= 127.
inline __m256i RdDot(__m256i acc, __m256i u, __m256i s) {
#if KVS_ROWDOT_VNNI
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

// The same sums over 32 bytes, lanes 0-3 (bytes 0-15) times s0 and lanes
// 4-7 (bytes 16-31) times s1 (two 16-element sub-blocks with their scales).
inline __m256i RdDotScaled(__m256i u, __m256i s, int s0, int s1) {
#if KVS_ROWDOT_VNNI
  return _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s),
                            _mm256_setr_epi32(s0, s0, s0, s0, s1, s1, s1, s1));
#else
  const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(s1)), _mm_set1_epi16(static_cast<int16_t>(s0)));
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc);
#endif
}

// 16 bytes of nibbles -> 32 bytes: low nibbles first, then the high ones
// (the element order of every 32-element nibble block).
inline __m256i RdNibbles(const uint8_t* p) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i m4 = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

// Bit j of the 32-bit qh -> 0x10 in byte j (Q5_0's 5th bits).
inline __m256i RdBit4(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, 4);
  const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int32_t>(bits)),
                                        _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                                         2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i sel = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, sel), sel), _mm256_set1_epi8(0x10));
}

// Signed weight bytes w (|w| <= 127) times activation bytes: with VNNI as
// the unsigned w + 128 (the caller adds the -128 * sum(x) aux), otherwise
// as |w| times x with w's sign.
inline __m256i RdDotSigned(__m256i acc, __m256i w, __m256i x) {
#if KVS_ROWDOT_VNNI
  return _mm256_dpbusd_epi32(acc, _mm256_xor_si256(w, _mm256_set1_epi8(static_cast<char>(0x80))), x);
#else
  return RdDot(acc, _mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
#endif
}
constexpr bool kRdSignedUsesAux = KVS_ROWDOT_VNNI != 0;

// ---- 32-element blocks (Q8_0 activations)

template <int A>
void RowQ5_0(const uint8_t* wrow, int64_t nblk, const RdAct* act, float* out) {
  const auto* w = reinterpret_cast<const BlockQ5_0*>(wrow);
  float sum[A] = {};
  for (int64_t b = 0; b < nblk; ++b) {
    const __m256i codes =
        _mm256_sub_epi8(_mm256_or_si256(RdNibbles(w[b].qs), RdBit4(w[b].qh)), _mm256_set1_epi8(16));  // signed
    const float dw = RdHalf(w[b].d);
    for (int i = 0; i < A; ++i) {
      const int32_t off = kRdSignedUsesAux ? act[i].aux_i(b) : 0;
      const int32_t isum = off + RdHSumI(RdDotSigned(_mm256_setzero_si256(), codes, RdLoad32(act[i].qs + 32 * b)));
      sum[i] += static_cast<float>(isum) * (dw * act[i].d[b]);
    }
  }
  for (int i = 0; i < A; ++i) out[i] = sum[i];
}

// ---- 256-element super-blocks (Q8_K activations)

// Codes of elements 128h + 32k + l (l < 32) of a Q2_K / Q3_K super-block:
// bits 2k of the 32 qs bytes of half h.
inline __m256i RdCodes2(__m256i qs, int k) {
  return _mm256_and_si256(_mm256_srli_epi16(qs, 2 * k), _mm256_set1_epi8(0x03));
}

template <int A>
void RowQ3_K(const uint8_t* wrow, int64_t nsb, const RdAct* act, float* out) {
  const auto* w = reinterpret_cast<const BlockQ3_K*>(wrow);
  float sum[A] = {};
  for (int64_t b = 0; b < nsb; ++b) {
    int sc[16];
    for (int g = 0; g < 16; ++g) sc[g] = GetScaleQ3K(g, w[b].scales) - 32;
    __m256i isum[A];
    int32_t off[A];  // sum over groups of scale * (-4 * sum(x)); the aux is -32 * sum(x)
    for (int i = 0; i < A; ++i) {
      isum[i] = _mm256_setzero_si256();
      off[i] = 0;
      for (int g = 0; g < 16; ++g) off[i] += sc[g] * (act[i].aux_i(16 * b + g) / 8);
    }
    const __m256i hm = RdLoad32(w[b].hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = RdLoad32(w[b].qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + k)));
        const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), _mm256_set1_epi8(4));
        const __m256i codes = _mm256_or_si256(RdCodes2(qs, k), high);  // q + 4, in [0, 7]
        const int g = 8 * h + 2 * k;
        for (int i = 0; i < A; ++i) {
          const __m256i x = RdLoad32(act[i].qs + 256 * b + 128 * h + 32 * k);
          isum[i] = _mm256_add_epi32(isum[i], RdDotScaled(codes, x, sc[g], sc[g + 1]));
        }
      }
    }
    const float dw = RdHalf(w[b].d);
    for (int i = 0; i < A; ++i) sum[i] += act[i].d[b] * dw * static_cast<float>(off[i] + RdHSumI(isum[i]));
  }
  for (int i = 0; i < A; ++i) out[i] = sum[i];
}

// Q2_K's 16 4-bit scales (low nibbles) or mins (high nibbles) of a
// super-block as int32: groups 0-7 in v[0], 8-15 in v[1].
inline void RdNibbles16(const uint8_t* p, bool high, __m256i v[2]) {
  __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if (high) b = _mm_srli_epi16(b, 4);
  b = _mm_and_si128(b, _mm_set1_epi8(0x0F));
  v[0] = _mm256_cvtepu8_epi32(b);
  v[1] = _mm256_cvtepu8_epi32(_mm_srli_si128(b, 8));
}

// The sums of u x s over 32 bytes with lanes 0-3 scaled by group 2k of
// sc (int32 scales of 8 groups) and lanes 4-7 by group 2k + 1.
inline __m256i RdDotScaledPair(__m256i u, __m256i s, __m256i sc, int k) {
  const __m256i idx = _mm256_setr_epi32(2 * k, 2 * k, 2 * k, 2 * k, 2 * k + 1, 2 * k + 1, 2 * k + 1, 2 * k + 1);
  const __m256i pair = _mm256_permutevar8x32_epi32(sc, idx);
#if KVS_ROWDOT_VNNI
  return _mm256_mullo_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s), pair);
#else
  // As int16 pairs: the scale in both halves of each int32 lane.
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_or_si256(pair, _mm256_slli_epi32(pair, 16)));
#endif
}

template <int A>
void RowQ2_K(const uint8_t* wrow, int64_t nsb, const RdAct* act, float* out) {
  const auto* w = reinterpret_cast<const BlockQ2_K*>(wrow);
  float sum[A] = {};
  for (int64_t b = 0; b < nsb; ++b) {
    // The scales and mins as vectors once per super-block (integer sums:
    // the same int32 totals as a scalar loop, so the same floats).
    __m256i sc[2], mn[2];
    RdNibbles16(w[b].scales, false, sc);
    RdNibbles16(w[b].scales, true, mn);
    __m256i isum[A];
    for (int i = 0; i < A; ++i) isum[i] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = RdLoad32(w[b].qs + 32 * h);
      for (int k = 0; k < 4; ++k) {
        const __m256i codes = RdCodes2(qs, k);
        for (int i = 0; i < A; ++i) {
          const __m256i x = RdLoad32(act[i].qs + 256 * b + 128 * h + 32 * k);
          isum[i] = _mm256_add_epi32(isum[i], RdDotScaledPair(codes, x, sc[h], k));
        }
      }
    }
    const float dw = RdHalf(w[b].d), dmin = RdHalf(w[b].dmin);
    for (int i = 0; i < A; ++i) {
      // sum over groups of min * sum(x)
      const uint8_t* aux = act[i].aux + 4 * 16 * b;
      const __m256i m = _mm256_add_epi32(_mm256_mullo_epi32(mn[0], RdLoad32(aux)),
                                         _mm256_mullo_epi32(mn[1], RdLoad32(aux + 32)));
      sum[i] += act[i].d[b] * dw * static_cast<float>(RdHSumI(isum[i])) -
                act[i].d[b] * dmin * static_cast<float>(RdHSumI(m));
    }
  }
  for (int i = 0; i < A; ++i) out[i] = sum[i];
}

using RdRowFn = void (*)(const uint8_t*, int64_t, const RdAct*, float*);

// Every weight row of the tile against every activation row, up to
// kRowMaxA activation rows per pass over the weight row (which then stays in
// L1 for the next group).
template <RdRowFn F1, RdRowFn F2, RdRowFn F3, RdRowFn F4>
void RdTile(const TileArgs& t, int64_t units) {
  const ActLayout& l = *t.layout;
  for (int64_t r = 0; r < t.rows; ++r) {
    const uint8_t* wrow = t.w + r * t.row_bytes;
    for (int64_t i0 = 0; i0 < t.m; i0 += kRowMaxA) {
      const int na = static_cast<int>(std::min<int64_t>(kRowMaxA, t.m - i0));
      RdAct act[kRowMaxA];
      for (int i = 0; i < na; ++i) {
        const uint8_t* row = t.acts + (i0 + i) * l.row_stride;
        act[i] = {reinterpret_cast<const int8_t*>(row + l.qs_off), reinterpret_cast<const float*>(row + l.d_off),
                  row + l.aux_off};
      }
      float out[kRowMaxA];
      switch (na) {
        case 1: F1(wrow, units, act, out); break;
        case 2: F2(wrow, units, act, out); break;
        case 3: F3(wrow, units, act, out); break;
        default: F4(wrow, units, act, out); break;
      }
      for (int i = 0; i < na; ++i) t.y[(i0 + i) * t.ldy + r] = out[i];
    }
  }
}

// ---- Prefill: Q5_0 blocks are Q8_0 blocks (the same f16 d and
// signed 8-bit values), and Q3_K super-blocks are Q6_K ones (the same d,
// 6-bit scales sc - 32, codes v + 32 for v in [-4, 3]); with more than
// kRowMaxA activation rows, 16 rows at a time are rewritten losslessly in
// that type and the variant's packed-panel kernel runs on them (the
// activation layouts are the same), which is several times faster than the
// row kernels once the rewrite is amortized over the activation rows.

void Q5_0ToQ8_0(const uint8_t* src, int64_t nblk, uint8_t* dst) {
  const auto* in = reinterpret_cast<const BlockQ5_0*>(src);
  auto* o = reinterpret_cast<BlockQ8_0*>(dst);
  for (int64_t b = 0; b < nblk; ++b) {
    const __m256i codes =
        _mm256_sub_epi8(_mm256_or_si256(RdNibbles(in[b].qs), RdBit4(in[b].qh)), _mm256_set1_epi8(16));
    o[b].d = in[b].d;
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[b].qs), codes);
  }
}

void Q3_KToQ6_K(const uint8_t* src, int64_t nsb, uint8_t* dst) {
  const auto* in = reinterpret_cast<const BlockQ3_K*>(src);
  auto* o = reinterpret_cast<BlockQ6_K*>(dst);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = 0; b < nsb; ++b) {
    o[b].d = in[b].d;
    for (int g = 0; g < 16; ++g) o[b].scales[g] = static_cast<int8_t>(GetScaleQ3K(g, in[b].scales) - 32);
    const __m256i hm = RdLoad32(in[b].hmask);
    for (int h = 0; h < 2; ++h) {
      const __m256i qs = RdLoad32(in[b].qs + 32 * h);
      __m256i e[4];  // Q6_K codes v + 32 (v = low - 4 + 4 * high bit) of elements 128h + 32k + l
      for (int k = 0; k < 4; ++k) {
        const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << (4 * h + k)));
        const __m256i high = _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(hm, bit), bit), _mm256_set1_epi8(4));
        e[k] = _mm256_add_epi8(_mm256_or_si256(RdCodes2(qs, k), high), _mm256_set1_epi8(28));
      }
      auto lo4 = [&](__m256i v) { return _mm256_and_si256(v, m4); };
      auto hi4 = [&](__m256i v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), m4); };  // 1 or 2
      const __m256i ql0 = _mm256_or_si256(lo4(e[0]), _mm256_slli_epi16(lo4(e[2]), 4));
      const __m256i ql1 = _mm256_or_si256(lo4(e[1]), _mm256_slli_epi16(lo4(e[3]), 4));
      const __m256i qh = _mm256_or_si256(_mm256_or_si256(hi4(e[0]), _mm256_slli_epi16(hi4(e[1]), 2)),
                                         _mm256_or_si256(_mm256_slli_epi16(hi4(e[2]), 4), _mm256_slli_epi16(hi4(e[3]), 6)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[b].ql + 64 * h), ql0);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[b].ql + 64 * h + 32), ql1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o[b].qh + 32 * h), qh);
    }
  }
}

using RdTranscodeFn = void (*)(const uint8_t*, int64_t, uint8_t*);

// The tile through the row kernels (few activation rows) or rewritten in
// kTo, 16 rows at a time, through that type's tile `target`.
template <RdRowFn F1, RdRowFn F2, RdRowFn F3, RdRowFn F4, RdTranscodeFn kConvert, DType kTo>
void RdTileOrTranscode(const TileArgs& t, int64_t units, TileFn target) {
  if (t.m <= kRowMaxA) {
    RdTile<F1, F2, F3, F4>(t, units);
    return;
  }
  const int64_t rb = RowBytes(kTo, t.cols);
  uint8_t* rows = ThreadScratch(ScratchSlot::kTranscode, static_cast<size_t>(kPanelRows * rb));
  for (int64_t r0 = 0; r0 < t.rows; r0 += kPanelRows) {
    const int64_t n = std::min<int64_t>(kPanelRows, t.rows - r0);
    for (int64_t r = 0; r < n; ++r) kConvert(t.w + (r0 + r) * t.row_bytes, units, rows + r * rb);
    TileArgs a = t;
    a.w = rows;
    a.packed = false;
    a.row_bytes = rb;
    a.rows = n;
    a.y = t.y + r0;
    target(a);
  }
}

// The tile through the row kernels (few activation rows) or, for prefill,
// for Q2_K (no packed layout yet: its per-16 offsets): 32 rows
// at a time dequantized to f32 (the reference's floats) and multiplied by
// the f32 activations with the variant's float GEMM (TileF32). The row
// kernels run at ~30 GFLOP/s a core for any m; the float GEMM at ~180
// (kernels_bench MatMul/<isa>/Q2_K/gate_up/m:512). The products then use
// the f32 activations rather than their Q8 codes: more accurate, and
// within float rounding of dequant(W) . x.
template <RdRowFn F1, RdRowFn F2, RdRowFn F3, RdRowFn F4>
void RdTileOrDequant(const TileArgs& t, int64_t units, DType type) {
  if (t.m < kDequantGemmMinM) {  // see UsesDequantGemm
    RdTile<F1, F2, F3, F4>(t, units);
    return;
  }
  constexpr int64_t kRows = 32;  // the float GEMM's panel height
  // [kRows, cols] f32, per thread: 720 KiB for a 5,632-wide down
  // projection, 3.5 MiB for a 28,672-wide one
  auto* rows = reinterpret_cast<float*>(
      ThreadScratch(ScratchSlot::kTranscode, static_cast<size_t>(kRows * t.cols) * sizeof(float)));
  for (int64_t r0 = 0; r0 < t.rows; r0 += kRows) {
    const int64_t n = std::min<int64_t>(kRows, t.rows - r0);
    for (int64_t r = 0; r < n; ++r) DequantizeRow(type, t.w + (r0 + r) * t.row_bytes, rows + r * t.cols, t.cols);
    TileArgs a = t;
    a.w = reinterpret_cast<const uint8_t*>(rows);
    a.packed = false;
    a.row_bytes = t.cols * static_cast<int64_t>(sizeof(float));
    a.rows = n;
    a.y = t.y + r0;
    TileF32(a);
  }
}

#define KVS_ROWDOT_TILE(K, units) RdTile<K<1>, K<2>, K<3>, K<4>>(a, units)
#define KVS_ROWDOT_TILE_D(K, units, type) RdTileOrDequant<K<1>, K<2>, K<3>, K<4>>(a, units, type)
#define KVS_ROWDOT_TILE_T(K, units, conv, to, target) \
  RdTileOrTranscode<K<1>, K<2>, K<3>, K<4>, conv, to>(a, units, target)

}  // namespace

void TileQ5_0(const TileArgs& a) { KVS_ROWDOT_TILE_T(RowQ5_0, a.cols / 32, Q5_0ToQ8_0, DType::kQ8_0, TileQ8_0); }
void TileQ3_K(const TileArgs& a) { KVS_ROWDOT_TILE_T(RowQ3_K, a.cols / 256, Q3_KToQ6_K, DType::kQ6_K, TileQ6_K); }
void TileQ2_K(const TileArgs& a) { KVS_ROWDOT_TILE_D(RowQ2_K, a.cols / 256, DType::kQ2_K); }

#undef KVS_ROWDOT_TILE
#undef KVS_ROWDOT_TILE_T
#undef KVS_ROWDOT_TILE_D

}  // namespace kvs::kernels::KVS_ROWDOT_ISA
