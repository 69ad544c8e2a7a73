// AVX-512 BF16 MatMul for BF16 weights: the "avx512bf16" variant's BF16 tile
// (CPUs with AVX512_BF16: Zen 4/5, Cooper Lake, Sapphire Rapids and later).
//
// Why: vdpbf16ps multiplies 32 bf16 pairs and adds them into 16 f32 lanes,
// twice the multiply-adds of an f32 FMA per instruction, so a prefill-sized
// GEMM runs up to 2x faster than converting the weights to f32 (the avx512
// variant's path, already near the f32 FMA peak). The activations are
// rounded to bf16 (round to nearest even) first: the products of two bf16
// values are exact in f32 and are summed in f32. This is what llama.cpp does
// for BF16 weights (its vec_dot type for BF16 is BF16). F16 weights can take
// this path when the model loader converts them to BF16 (opt-in: it rounds
// each weight to 8 mantissa bits).
//
// Layouts (all bf16 as uint16_t):
//   xb     [m][cp]            the activations, cp = cols rounded up to 32,
//                             zero beyond cols (so tails add 0 x 0);
//                             converted once per MatMul call (Bf16Acts)
//                             when m < kPanelMinM
//   panel  [npairs][32] u32   pair p of 32 weight rows: columns k0 + 2p and
//                             k0 + 2p + 1 of row r in u32 r (low half first,
//                             as in memory), zero beyond the matrix
//   xg     [ceil(m / 12)][cp / 2][12] u32   for m >= kPanelMinM, instead
//                             of xb: the activations' pairs grouped by 12
//                             rows (rows past m unset and never read);
//                             also written once per MatMul call (Bf16Acts)
//   packed [cp / 2][16] u32 per 16 rows: the BF16 panels of packed.h,
//                             written once at load (TileArgs::packed); the
//                             microkernel then reads two of them (rows 0-15
//                             and 16-31) in place of a per-call panel, and
//                             small m reads them too
// Small m: each row's 32-column vectors are dotted with every activation row
// (the weights are read once, memory bound). Larger m: 32-row panels of kKc
// columns, a 12 x 32 register-blocked microkernel (24 accumulators, 2 weight
// loads and 12 pair broadcasts per 2 columns). The broadcasts of a pair step
// read 48 contiguous bytes of xg: from 12 rows of xb they took 12 address
// registers, and the compiler spilled and reloaded three of them every step
// (kernels_bench Model/M BF16 m:512, one core: 181-214 -> 238-323 GFLOP/s).
#include <algorithm>

#include "base/status.h"
#include "kernels/avx512_util.h"
#include "kernels/isa_decls.h"
#include "kernels/scratch.h"

namespace kvs::kernels::avx512bf16 {
namespace {

using avx512::TailMask;
using avx512::Transpose16x16;

constexpr int kR = 32;          // weight rows per panel (2 vectors)
constexpr int kA = 12;          // activation rows per microkernel call
constexpr int64_t kKc = 256;    // columns per panel (16 KiB of pairs)
constexpr int64_t kPanelMinM = 4;

inline __m512bh AsBh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

inline __mmask32 TailMask32(int64_t n) { return n >= 32 ? 0xFFFFFFFFu : static_cast<__mmask32>((1u << n) - 1); }

// One block of kR weight rows from r0 of a tile of `rows`: the masks of the
// two 16-row halves a microkernel stores (m1 is empty for a lone last half).
struct RowBlock {
  int64_t valid;  // rows of the block that exist, 1..kR
  __mmask16 m0, m1;
};
inline RowBlock BlockAt(int64_t rows, int64_t r0) {
  const int64_t valid = std::min<int64_t>(kR, rows - r0);
  return {valid, TailMask(valid), TailMask(std::max<int64_t>(0, valid - 16))};
}

// The two 16-row panels (packed at load, panel_u32 u32 each) of the block at
// r0; a lone last panel is read twice and its second products go unstored.
struct PanelPair {
  const uint32_t* w0;
  const uint32_t* w1;
};
inline PanelPair PanelsAt(const uint32_t* w, int64_t panel_u32, int64_t r0, const RowBlock& b) {
  const uint32_t* w0 = w + r0 / 16 * panel_u32;
  return {w0, b.valid > 16 ? w0 + panel_u32 : w0};
}

// xb[i][0..cp) = bf16(x[i][0..cols)), zero after cols.
void ConvertActs(const float* x, int64_t ldx, int64_t m, int64_t cols, int64_t cp, uint16_t* xb) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xi = x + i * ldx;
    uint16_t* out = xb + i * cp;
    for (int64_t k = 0; k < cp; k += 32) {
      const __m512 lo = _mm512_maskz_loadu_ps(TailMask(std::max<int64_t>(0, cols - k)), xi + k);
      const __m512 hi = _mm512_maskz_loadu_ps(TailMask(std::max<int64_t>(0, cols - k - 16)), xi + k + 16);
      const __m512bh b = _mm512_cvtne2ps_pbh(hi, lo);  // elements 0..15 from lo, 16..31 from hi
      _mm512_store_si512(out + k, reinterpret_cast<const __m512i&>(b));
    }
  }
}

// out[i * ldo] = dot(row, xb_i) for A activation rows; the row is read once.
template <int A>
void DotRow(const uint16_t* row, int64_t cols, const uint16_t* xb, int64_t cp, float* out, int64_t ldo) {
  constexpr int U = A == 1 ? 4 : (A == 2 ? 2 : 1);  // unroll to hide the dot-product latency
  __m512 acc[A][U];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    KVS_UNROLL
    for (int u = 0; u < U; ++u) acc[i][u] = _mm512_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 * U <= cols; k += 32 * U) {
    KVS_UNROLL
    for (int u = 0; u < U; ++u) {
      const __m512bh w = AsBh(_mm512_loadu_si512(row + k + 32 * u));
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        acc[i][u] = _mm512_dpbf16_ps(acc[i][u], w, AsBh(_mm512_load_si512(xb + i * cp + k + 32 * u)));
      }
    }
  }
  for (; k < cols; k += 32) {
    const __m512bh w = AsBh(_mm512_maskz_loadu_epi16(TailMask32(cols - k), row + k));
    KVS_UNROLL
    for (int i = 0; i < A; ++i) acc[i][0] = _mm512_dpbf16_ps(acc[i][0], w, AsBh(_mm512_load_si512(xb + i * cp + k)));
  }
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    __m512 s = acc[i][0];
    KVS_UNROLL
    for (int u = 1; u < U; ++u) s = _mm512_add_ps(s, acc[i][u]);
    out[i * ldo] = _mm512_reduce_add_ps(s);
  }
}

void DirectTile(const TileArgs& t, const uint16_t* xb, int64_t cp) {
  for (int64_t r = 0; r < t.rows; ++r) {
    const auto* row = reinterpret_cast<const uint16_t*>(t.w + r * t.row_bytes);
    int64_t i = 0;
    for (; i + 3 <= t.m; i += 3) DotRow<3>(row, t.cols, xb + i * cp, cp, t.y + i * t.ldy + r, t.ldy);
    if (t.m - i == 2) DotRow<2>(row, t.cols, xb + i * cp, cp, t.y + i * t.ldy + r, t.ldy);
    if (t.m - i == 1) DotRow<1>(row, t.cols, xb + i * cp, cp, t.y + i * t.ldy + r, t.ldy);
  }
}

// panel[p][r] = the u32 of columns (k0 + 2p, k0 + 2p + 1) of rows[r], for p
// in [0, ceil(kn / 2)); a column at or past k0 + kn reads as zero.
void PackPanel(const uint16_t* const rows[kR], int64_t k0, int64_t kn, uint32_t* panel) {
  const int64_t npairs = (kn + 1) / 2;
  for (int64_t p0 = 0; p0 < npairs; p0 += 16) {
    const __mmask32 m = TailMask32(kn - 2 * p0);
    const int64_t pairs = std::min<int64_t>(16, npairs - p0);
    for (int half = 0; half < 2; ++half) {
      __m512i v[16];
      KVS_UNROLL
      for (int r = 0; r < 16; ++r) v[r] = _mm512_maskz_loadu_epi16(m, rows[16 * half + r] + k0 + 2 * p0);
      Transpose16x16(v);  // v[j]: pair p0 + j of the 16 rows
      for (int j = 0; j < pairs; ++j) _mm512_store_si512(panel + (p0 + j) * kR + 16 * half, v[j]);
    }
  }
}

// x: [npairs][kA] pairs of the A activation rows (GroupActs' layout).
// w0 / w1: pair p of weight rows 0..15 / 16..31 at u32 p * WS (WS = kR in
// a panel packed per call, 16 in the BF16 panels packed at load).
template <int A, int WS>
void Micro(const uint32_t* w0p, const uint32_t* w1p, int64_t npairs, const uint32_t* x, float* y, int64_t ldy,
           __mmask16 m0, __mmask16 m1, bool accumulate) {
  __m512 acc[A][2];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t p = 0; p < npairs; ++p) {
    const __m512bh w0 = AsBh(_mm512_load_si512(w0p + p * WS));
    const __m512bh w1 = AsBh(_mm512_load_si512(w1p + p * WS));
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      const __m512bh xb = AsBh(_mm512_set1_epi32(static_cast<int>(x[p * kA + i])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], w0, xb);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], w1, xb);
    }
  }
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    float* yi = y + i * ldy;
    if (accumulate) {
      acc[i][0] = _mm512_add_ps(acc[i][0], _mm512_maskz_loadu_ps(m0, yi));
      acc[i][1] = _mm512_add_ps(acc[i][1], _mm512_maskz_loadu_ps(m1, yi + 16));
    }
    _mm512_mask_storeu_ps(yi, m0, acc[i][0]);
    _mm512_mask_storeu_ps(yi + 16, m1, acc[i][1]);
  }
}

// Micro over activation rows [i0, i0 + min(kA, m - i0)) of xg.
template <int WS>
void MicroRows(const uint32_t* w0p, const uint32_t* w1p, int64_t npairs, const uint32_t* x, int64_t rows_left,
               float* y, int64_t ldy, __mmask16 m0, __mmask16 m1, bool acc) {
  switch (std::min<int64_t>(kA, rows_left)) {
    case 1: Micro<1, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 2: Micro<2, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 3: Micro<3, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 4: Micro<4, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 5: Micro<5, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 6: Micro<6, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 7: Micro<7, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 8: Micro<8, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 9: Micro<9, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 10: Micro<10, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    case 11: Micro<11, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
    default: Micro<12, WS>(w0p, w1p, npairs, x, y, ldy, m0, m1, acc); break;
  }
}

// xg: the activations grouped by kA rows (Bf16Acts' layout for m >= kPanelMinM).
void PanelTile(const TileArgs& t, const uint32_t* xg, int64_t cp) {
  auto* panel = reinterpret_cast<uint32_t*>(ThreadScratch(ScratchSlot::kPanel, kKc / 2 * kR * sizeof(uint32_t)));
  const int64_t ldx = cp / 2;  // pairs per row
  for (int64_t r0 = 0; r0 < t.rows; r0 += kR) {
    const RowBlock b = BlockAt(t.rows, r0);
    const uint16_t* rows[kR];
    for (int r = 0; r < kR; ++r) {
      rows[r] = reinterpret_cast<const uint16_t*>(t.w + std::min<int64_t>(r0 + r, t.rows - 1) * t.row_bytes);
    }
    for (int64_t k0 = 0; k0 < t.cols; k0 += kKc) {
      const int64_t kn = std::min(kKc, t.cols - k0), npairs = (kn + 1) / 2;
      PackPanel(rows, k0, kn, panel);
      for (int64_t i0 = 0; i0 < t.m; i0 += kA) {
        MicroRows<kR>(panel, panel + 16, npairs, xg + i0 * ldx + k0 / 2 * kA, t.m - i0, t.y + i0 * t.ldy + r0,
                      t.ldy, b.m0, b.m1, k0 > 0);
      }
    }
  }
}

// The same over BF16 panels packed at load (t.w: the tile's first panel):
// the same sums in the same order, without the per-call packing.
void PackedPanelTile(const TileArgs& t, const uint32_t* xg, int64_t cp) {
  const int64_t ldx = cp / 2;           // pairs per activation row
  const int64_t panel_u32 = cp / 2 * 16;  // u32 per 16-row panel
  const auto* w = reinterpret_cast<const uint32_t*>(t.w);
  for (int64_t r0 = 0; r0 < t.rows; r0 += kR) {
    const RowBlock b = BlockAt(t.rows, r0);
    const PanelPair pp = PanelsAt(w, panel_u32, r0, b);
    for (int64_t k0 = 0; k0 < t.cols; k0 += kKc) {
      const int64_t kn = std::min(kKc, t.cols - k0), npairs = (kn + 1) / 2;
      for (int64_t i0 = 0; i0 < t.m; i0 += kA) {
        MicroRows<16>(pp.w0 + k0 / 2 * 16, pp.w1 + k0 / 2 * 16, npairs, xg + i0 * ldx + k0 / 2 * kA, t.m - i0,
                      t.y + i0 * t.ldy + r0, t.ldy, b.m0, b.m1, k0 > 0);
      }
    }
  }
}

// Small m over BF16 panels: xb [m][cp] rows (Bf16Acts' layout for m <
// kPanelMinM); each panel pair is read once for all A rows. Two pairs a
// step in separate sums, so that one row's dot products do not wait on
// each other's latency.
template <int A>
void PackedDot(const uint32_t* w0p, const uint32_t* w1p, int64_t npairs, const uint16_t* xb, int64_t cp, float* y,
               int64_t ldy, __mmask16 m0, __mmask16 m1) {
  const uint32_t* x[A];
  __m512 acc[A][2][2];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    x[i] = reinterpret_cast<const uint32_t*>(xb + i * cp);
    acc[i][0][0] = acc[i][0][1] = acc[i][1][0] = acc[i][1][1] = _mm512_setzero_ps();
  }
  int64_t p = 0;
  for (; p + 2 <= npairs; p += 2) {
    KVS_UNROLL
    for (int u = 0; u < 2; ++u) {
      const __m512bh w0 = AsBh(_mm512_load_si512(w0p + (p + u) * 16));
      const __m512bh w1 = AsBh(_mm512_load_si512(w1p + (p + u) * 16));
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        const __m512bh xv = AsBh(_mm512_set1_epi32(static_cast<int>(x[i][p + u])));
        acc[i][u][0] = _mm512_dpbf16_ps(acc[i][u][0], w0, xv);
        acc[i][u][1] = _mm512_dpbf16_ps(acc[i][u][1], w1, xv);
      }
    }
  }
  for (; p < npairs; ++p) {
    const __m512bh w0 = AsBh(_mm512_load_si512(w0p + p * 16));
    const __m512bh w1 = AsBh(_mm512_load_si512(w1p + p * 16));
    KVS_UNROLL
    for (int i = 0; i < A; ++i) {
      const __m512bh xv = AsBh(_mm512_set1_epi32(static_cast<int>(x[i][p])));
      acc[i][0][0] = _mm512_dpbf16_ps(acc[i][0][0], w0, xv);
      acc[i][0][1] = _mm512_dpbf16_ps(acc[i][0][1], w1, xv);
    }
  }
  KVS_UNROLL
  for (int i = 0; i < A; ++i) {
    _mm512_mask_storeu_ps(y + i * ldy, m0, _mm512_add_ps(acc[i][0][0], acc[i][1][0]));
    _mm512_mask_storeu_ps(y + i * ldy + 16, m1, _mm512_add_ps(acc[i][0][1], acc[i][1][1]));
  }
}

void PackedDirectTile(const TileArgs& t, const uint16_t* xb, int64_t cp) {
  const int64_t panel_u32 = cp / 2 * 16, npairs = cp / 2;  // pairs past cols are zero in both
  const auto* w = reinterpret_cast<const uint32_t*>(t.w);
  for (int64_t r0 = 0; r0 < t.rows; r0 += kR) {
    const RowBlock b = BlockAt(t.rows, r0);
    const PanelPair pp = PanelsAt(w, panel_u32, r0, b);
    float* y = t.y + r0;
    int64_t i = 0;
    for (; i + 3 <= t.m; i += 3) PackedDot<3>(pp.w0, pp.w1, npairs, xb + i * cp, cp, y + i * t.ldy, t.ldy, b.m0, b.m1);
    if (t.m - i == 2) PackedDot<2>(pp.w0, pp.w1, npairs, xb + i * cp, cp, y + i * t.ldy, t.ldy, b.m0, b.m1);
    if (t.m - i == 1) PackedDot<1>(pp.w0, pp.w1, npairs, xb + i * cp, cp, y + i * t.ldy, t.ldy, b.m0, b.m1);
  }
}

}  // namespace

static_assert(kBf16ActsRows == kA, "Bf16Acts groups rows as the microkernel takes them");

void Bf16Acts(const float* x, int64_t ldx, int64_t m, int64_t i0, int64_t i1, int64_t cols, uint16_t* xb) {
  const int64_t cp = (cols + 31) / 32 * 32;
  if (m < kPanelMinM) {  // DirectTile reads rows: xb [m][cp]
    ConvertActs(x + i0 * ldx, ldx, i1 - i0, cols, cp, xb + i0 * cp);
    return;
  }
  // Grouped: row i's pair q goes to u32 (i / kA) * cp / 2 * kA + q * kA + i % kA.
  auto* row = reinterpret_cast<uint16_t*>(ThreadScratch(ScratchSlot::kAux, static_cast<size_t>(cp) * 2));
  const auto* pairs = reinterpret_cast<const uint32_t*>(row);
  auto* xg = reinterpret_cast<uint32_t*>(xb);
  for (int64_t i = i0; i < i1; ++i) {
    ConvertActs(x + i * ldx, ldx, 1, cols, cp, row);
    uint32_t* out = xg + i / kA * (cp / 2) * kA + i % kA;
    for (int64_t q = 0; q < cp / 2; ++q) out[q * kA] = pairs[q];
  }
}

void TileBF16(const TileArgs& t) {
  if (t.rows <= 0 || t.m <= 0) return;
  // MatMul converts the activations once per call (KernelTable::bf16_acts).
  KVS_CHECK_MSG(t.xb != nullptr, "avx512bf16 TileBF16 without bf16 activations");
  const int64_t cp = (t.cols + 31) / 32 * 32;
  if (t.packed) {
    if (t.m < kPanelMinM) {
      PackedDirectTile(t, t.xb, cp);
    } else {
      PackedPanelTile(t, reinterpret_cast<const uint32_t*>(t.xb), cp);
    }
  } else if (t.m < kPanelMinM) {
    DirectTile(t, t.xb, cp);
  } else {
    PanelTile(t, reinterpret_cast<const uint32_t*>(t.xb), cp);
  }
}

}  // namespace kvs::kernels::avx512bf16
