// The attention kernel for items with few query rows (decode: one token x
// its GQA group, up to 8 rows), where the tiled kernel's rows-in-lanes
// layout would leave most lanes empty. Here the head dim is in the lanes:
//   scores   s[r][j] = q[r] . k[j]  as dot products, RQ rows x 4 keys of
//            accumulators at a time, folded by V::Sum4;
//   softmax  along the keys of a tile (keys in lanes);
//   output   o[r][:] += p[r][j] * v[j][:], RO rows x head_dim in registers.
// K/V tiles are converted once from the stored dtype (attention_tile.h) and
// shared by every row of the group. Same item contract and outputs as
// AttendTiled (attention_kernel.h); only compiled into the per-ISA files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kvcache/attention_internal.h"
#include "kvcache/attention_tile.h"

namespace kvs::kvcache::internal {
namespace {

constexpr int kDotMaxRows = 8;
constexpr int64_t kDotTileKeys = 64;

// cap * tanh(x / cap) lane by lane: Gemma 2's attention soft-capping (one
// architecture, so plain libm rather than a SIMD tanh).
template <class V>
typename V::R SoftCap(typename V::R x, float cap) {
  alignas(64) float b[V::kLanes];
  V::Store(b, x);
  for (int i = 0; i < V::kLanes; ++i) b[i] = cap * std::tanh(b[i] / cap);
  return V::Load(b);
}

template <class V>
int64_t DotScratchFloats(int64_t head_dim) {
  return 2 * kDotMaxRows * head_dim + kDotMaxRows * kDotTileKeys + 2 * kDotTileKeys * head_dim + 4 * kDotMaxRows + 64;
}

// NC = head_dim / lanes.
template <class V, int NC>
void AttendDot(const AttnContext& cx, const AttnItem& it, float* partial, float* scratch) {
  using R = typename V::R;
  constexpr int L = V::kLanes;
  constexpr int64_t hd = static_cast<int64_t>(NC) * L;
  constexpr int RQ = V::kRegisters >= 32 ? 4 : 2;                               // score block rows
  constexpr int RO = (V::kRegisters >= 32 ? 16 : 8) / NC > 0 ? (V::kRegisters >= 32 ? 16 : 8) / NC : 1;  // output block rows
  constexpr int64_t Bk = kDotTileKeys;
  constexpr int64_t key_pad = L > 4 ? L : 4;
  static_assert(Bk % key_pad == 0 && kDotMaxRows % RQ == 0 && kDotMaxRows % RO == 0);

  const KvCache& cache = *cx.cache;
  const ForwardSeq& s = cx.batch->seqs[static_cast<size_t>(it.seq)];
  const int64_t rows = static_cast<int64_t>(it.nt) * it.nh;
  const int64_t rows_p = RoundUp(rows, std::max(RQ, RO));

  float* qs = scratch;            // [rows_p][hd] q * scale * log2(e)
  float* o = qs + rows_p * hd;    // [rows_p][hd]
  float* sc = o + rows_p * hd;    // [rows_p][Bk] scores, then probabilities
  float* kt = sc + rows_p * Bk;   // [Bk][hd]
  float* vt = kt + Bk * hd;       // [Bk][hd]
  float* m = vt + Bk * hd;        // [rows_p]
  float* l = m + kDotMaxRows;
  float* corr = l + kDotMaxRows;
  float* rowpos = corr + kDotMaxRows;

  const int32_t pos0 = s.start_pos + it.t0;
  const int64_t h_first = static_cast<int64_t>(it.kv_head) * cx.group + it.head0;
  for (int64_t r = 0; r < rows_p; ++r) {
    const int64_t t = r < rows ? r / it.nh : it.nt - 1;
    rowpos[r] = static_cast<float>(pos0 + t);
    m[r] = -std::numeric_limits<float>::infinity();
    l[r] = 0.0f;
    float* qr = qs + r * hd;
    if (r < rows) {
      const float* q = cx.q + (it.row0 + it.t0 + t) * cx.q_stride + (h_first + r % it.nh) * hd;
      for (int64_t d = 0; d < hd; ++d) qr[d] = q[d] * cx.scale_log2;
    } else {
      std::fill(qr, qr + hd, 0.0f);
    }
  }
  std::fill(o, o + rows_p * hd, 0.0f);

  for (int64_t k0 = it.k0; k0 < it.k1; k0 += Bk) {
    const int64_t nk = std::min<int64_t>(Bk, it.k1 - k0);
    const int64_t nkp = RoundUp(nk, key_pad);
    if (k0 + Bk < it.k1) {
      PrefetchTile(cache, cx.layer, s.block_table, k0 + Bk, std::min<int64_t>(Bk, it.k1 - k0 - Bk), it.kv_head);
    }
    LoadTile<V>(cache, cx.layer, false, s.block_table, k0, nk, nkp, it.kv_head, hd, hd, kt);
    LoadTile<V>(cache, cx.layer, true, s.block_table, k0, nk, nkp, it.kv_head, hd, hd, vt);
    // Scores, 4 keys x RQ rows at a time.
    for (int64_t rb = 0; rb < rows_p; rb += RQ) {
      for (int64_t j = 0; j < nkp; j += 4) {
        R acc[RQ][4];
#pragma GCC unroll 4
        for (int r = 0; r < RQ; ++r) {
#pragma GCC unroll 4
          for (int jj = 0; jj < 4; ++jj) acc[r][jj] = V::Zero();
        }
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          R k[4];
#pragma GCC unroll 4
          for (int jj = 0; jj < 4; ++jj) k[jj] = V::Load(kt + (j + jj) * hd + c * L);
#pragma GCC unroll 4
          for (int r = 0; r < RQ; ++r) {
            const R q = V::Load(qs + (rb + r) * hd + c * L);
#pragma GCC unroll 4
            for (int jj = 0; jj < 4; ++jj) acc[r][jj] = V::Fma(q, k[jj], acc[r][jj]);
          }
        }
#pragma GCC unroll 4
        for (int r = 0; r < RQ; ++r) V::Sum4(acc[r][0], acc[r][1], acc[r][2], acc[r][3], sc + (rb + r) * Bk + j);
      }
    }
    if (cx.softcap_log2 > 0.0f) {
      for (int64_t r = 0; r < rows_p; ++r) {
        for (int64_t j = 0; j < nkp; j += L) V::Store(sc + r * Bk + j, SoftCap<V>(V::Load(sc + r * Bk + j), cx.softcap_log2));
      }
    }
    // Causal mask, padding keys and sliding window (only the tiles that need it).
    const bool before_window = cx.window > 0 && k0 <= pos0 + it.nt - 1 - cx.window;
    if (k0 + nk - 1 > pos0 || nkp != nk || before_window) {
      for (int64_t r = 0; r < rows_p; ++r) {
        const auto visible = static_cast<int64_t>(std::min<float>(static_cast<float>(nk), rowpos[r] - k0 + 1));
        for (int64_t j = std::max<int64_t>(visible, 0); j < nkp; ++j) sc[r * Bk + j] = -std::numeric_limits<float>::infinity();
        if (!before_window) continue;
        // Keys before rowpos - window + 1 are outside the row's window.
        const int64_t first = std::min<int64_t>(static_cast<int64_t>(rowpos[r]) - cx.window + 1 - k0, nkp);
        for (int64_t j = 0; j < first; ++j) sc[r * Bk + j] = -std::numeric_limits<float>::infinity();
      }
    }
    // Online softmax along the keys of each row.
    for (int64_t r = 0; r < rows_p; ++r) {
      float* sr = sc + r * Bk;
      R mx = V::Load(sr);
      for (int64_t j = L; j < nkp; j += L) mx = V::Max(mx, V::Load(sr + j));
      const float m_new = std::max(m[r], V::ReduceMax(mx));
      // A row with no visible key yet (window starts later) subtracts 0: exp2(-inf) = 0, not NaN.
      const float m_sub = m_new == -std::numeric_limits<float>::infinity() ? 0.0f : m_new;
      const R mv = V::Set1(m_sub);
      R sum = V::Zero();
      for (int64_t j = 0; j < nkp; j += L) {
        const R p = kernels::Exp2<V>(V::Sub(V::Load(sr + j), mv));
        V::Store(sr + j, p);
        sum = V::Add(sum, p);
      }
      corr[r] = std::exp2(m[r] - m_sub);  // 0 on the first tile (m = -inf)
      l[r] = l[r] * corr[r] + V::ReduceAdd(sum);
      m[r] = m_new;
    }
    // Output rows += p . V, RO rows x head_dim in registers.
    for (int64_t rb = 0; rb < rows_p; rb += RO) {
      R acc[RO][NC];
#pragma GCC unroll 8
      for (int r = 0; r < RO; ++r) {
        const R cr = V::Set1(corr[rb + r]);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) acc[r][c] = V::Mul(V::Load(o + (rb + r) * hd + c * L), cr);
      }
      for (int64_t j = 0; j < nk; ++j) {
        R p[RO];
#pragma GCC unroll 8
        for (int r = 0; r < RO; ++r) p[r] = V::Set1(sc[(rb + r) * Bk + j]);
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) {
          const R v = V::Load(vt + j * hd + c * L);
#pragma GCC unroll 8
          for (int r = 0; r < RO; ++r) acc[r][c] = V::Fma(p[r], v, acc[r][c]);
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < RO; ++r) {
#pragma GCC unroll 8
        for (int c = 0; c < NC; ++c) V::Store(o + (rb + r) * hd + c * L, acc[r][c]);
      }
    }
  }

  if (partial == nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      float* out = cx.out + (it.row0 + it.t0 + r / it.nh) * cx.q_stride + (h_first + r % it.nh) * hd;
      const float inv = 1.0f / l[r];
      for (int64_t d = 0; d < hd; ++d) out[d] = o[r * hd + d] * inv;
    }
  } else {
    PartialView pv = PartialAt(partial, rows);
    for (int64_t r = 0; r < rows; ++r) {
      pv.m[r] = m[r];
      pv.l[r] = l[r];
      std::memcpy(pv.o + r * hd, o + r * hd, static_cast<size_t>(hd) * sizeof(float));
    }
  }
}

// The dot kernel for this item if it fits (rows <= 8, head_dim = NC lanes
// with NC in {2, 4, 8}); false otherwise.
template <class V>
bool DotFits(int64_t rows, int64_t hd) {
  return rows <= kDotMaxRows && hd % V::kLanes == 0 &&
         (hd / V::kLanes == 2 || hd / V::kLanes == 4 || hd / V::kLanes == 8);
}

template <class V>
bool TryAttendDot(const AttnContext& cx, const AttnItem& it, float* partial, float* scratch) {
  const int64_t rows = static_cast<int64_t>(it.nt) * it.nh;
  const int64_t hd = cx.cache->config().head_dim;
  if (rows > kDotMaxRows || hd % V::kLanes != 0) return false;
  switch (hd / V::kLanes) {
    case 2: AttendDot<V, 2>(cx, it, partial, scratch); return true;
    case 4: AttendDot<V, 4>(cx, it, partial, scratch); return true;
    case 8: AttendDot<V, 8>(cx, it, partial, scratch); return true;
    default: return false;
  }
}

}  // namespace
}  // namespace kvs::kvcache::internal
