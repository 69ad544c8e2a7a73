// The tiled (flash-style) attention kernel, written once over the kernels'
// lane traits `V` (kernels/lanes.h: Avx512Lanes, Avx2Lanes, GenericLanes)
// and compiled per ISA (attention_avx512.cc, attention_avx2.cc,
// attention_generic.cc). Everything here sits in an anonymous namespace so
// the per-ISA copies never merge at link time. paged_attention.cc plans the
// work items; this file computes one (items with few rows go to
// attention_decode.h instead).
//
// One item: query tokens [t0, t0 + nt) of one sequence x heads
// [head0, head0 + nh) of one KV head's group, against key positions
// [k0, k1). Its R = nt * nh query rows (row r = t * nh + g) are kept
// transposed, rows in SIMD lanes:
//   qT [hdp][Rp]   q * scale * log2(e), zero in padded rows / dims
//   sT [Bk][Rp]    scores of one key tile, then its probabilities
//   oT [hdp][Rp]   unnormalised output
//   m, l [Rp]      running max (log2 domain) and sum of the online softmax
// so the row max, the causal mask and the rescaling are plain lane-wise
// vector ops, and both products are register-blocked outer products:
//   S^T[j][r] += K[j][d] * qT[d][r]     (K element broadcast, q rows loaded)
//   oT[d][r]  += V[j][d] * P^T[j][r]    (V element broadcast, P rows loaded)
// K and V are read in their stored dtype (f32/f16/bf16/q8_0) one key tile
// at a time into L1-sized f32 tiles [Bk][hdp] shared by all R rows; keys
// past the item's last query position are never loaded, and the mask is
// applied only on tiles that reach past the first row's position.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "base/fp16.h"
#include "kvcache/attention_decode.h"
#include "kvcache/attention_internal.h"
#include "kvcache/attention_tile.h"

namespace kvs::kvcache::internal {
namespace {

// Register blocking per number of lane chunks C (Rp = C * lanes): JB keys x C
// accumulators in the score product, DB dims x C in the output product.
template <class V, int C>
struct Blocking {
  static constexpr int kRegs = V::kRegisters;
  static constexpr int kJB = kRegs >= 32 ? (C == 1 ? 16 : C == 2 ? 12 : C == 3 ? 8 : 6)
                                         : (C == 1 ? 8 : C == 2 ? 5 : C == 3 ? 3 : 2);
  static constexpr int kDB = kRegs >= 32 ? (C <= 3 ? 8 : 4) : (C == 1 ? 8 : C == 2 ? 4 : 2);
  // Key tile: about 64 keys, a multiple of kJB.
  static constexpr int kBk = (64 + kJB - 1) / kJB * kJB;
};

// sT[jb][.] = sum_d kt[jb][d] * qT[d][.] for kJB keys; tmax[.] = max(tmax,
// those scores) lane-wise.
template <class V, int C, int JB>
inline void ScoreBlock(const float* qT, int64_t Rp, const float* kt, int64_t hdp, float* sT, float* tmax) {
  using R = typename V::R;
  constexpr int L = V::kLanes;
  R acc[JB][C];
#pragma GCC unroll 16
  for (int j = 0; j < JB; ++j) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[j][c] = V::Zero();
  }
  for (int64_t d = 0; d < hdp; ++d) {
    R q[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) q[c] = V::Load(qT + d * Rp + c * L);
#pragma GCC unroll 16
    for (int j = 0; j < JB; ++j) {
      const R k = V::Set1(kt[j * hdp + d]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[j][c] = V::Fma(k, q[c], acc[j][c]);
    }
  }
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) {
    R mx = V::Load(tmax + c * L);
#pragma GCC unroll 16
    for (int j = 0; j < JB; ++j) {
      V::Store(sT + j * Rp + c * L, acc[j][c]);
      mx = V::Max(mx, acc[j][c]);
    }
    V::Store(tmax + c * L, mx);
  }
}

// oT[d0 + db][.] = oT[d0 + db][.] * corr + sum_j vt[j][d0 + db] * pT[j][.]
// for kDB dims.
template <class V, int C, int DB>
inline void OutputBlock(const float* pT, int64_t Rp, const float* vt, int64_t hdp, int64_t nk, const float* corr,
                        float* oT) {
  using R = typename V::R;
  constexpr int L = V::kLanes;
  R acc[DB][C];
  R cr[C];
#pragma GCC unroll 4
  for (int c = 0; c < C; ++c) cr[c] = V::Load(corr + c * L);
#pragma GCC unroll 8
  for (int db = 0; db < DB; ++db) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[db][c] = V::Mul(V::Load(oT + db * Rp + c * L), cr[c]);
  }
  for (int64_t j = 0; j < nk; ++j) {
    R p[C];
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) p[c] = V::Load(pT + j * Rp + c * L);
#pragma GCC unroll 8
    for (int db = 0; db < DB; ++db) {
      const R v = V::Set1(vt[j * hdp + db]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[db][c] = V::Fma(v, p[c], acc[db][c]);
    }
  }
#pragma GCC unroll 8
  for (int db = 0; db < DB; ++db) {
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) V::Store(oT + db * Rp + c * L, acc[db][c]);
  }
}

template <class V, int C>
void AttendTiled(const AttnContext& cx, const AttnItem& it, float* partial, float* scratch) {
  using R = typename V::R;
  using B = Blocking<V, C>;
  constexpr int L = V::kLanes;
  constexpr int64_t Rp = static_cast<int64_t>(C) * L;
  constexpr int JB = B::kJB, DB = B::kDB, Bk = B::kBk;
  const KvCache& cache = *cx.cache;
  const KvCacheConfig& cfg = cache.config();
  const ForwardSeq& s = cx.batch->seqs[static_cast<size_t>(it.seq)];
  const int64_t hd = cfg.head_dim, hdp = RoundUp(hd, 8);
  const int64_t rows = static_cast<int64_t>(it.nt) * it.nh;

  float* qT = scratch;               // [hdp][Rp]
  float* oT = qT + hdp * Rp;         // [hdp][Rp]
  float* sT = oT + hdp * Rp;         // [Bk][Rp]
  float* kt = sT + Bk * Rp;          // [Bk][hdp]
  float* vt = kt + Bk * hdp;         // [Bk][hdp]
  float* m = vt + Bk * hdp;          // [Rp]
  float* l = m + Rp;                 // [Rp]
  float* corr = l + Rp;              // [Rp]
  float* rowpos = corr + Rp;         // [Rp] position of each row (as float: exact below 2^24)
  float* tmax = rowpos + Rp;         // [Rp] max of the current tile's scores

  const int32_t pos0 = s.start_pos + it.t0;  // first row's position
  const int64_t h_first = static_cast<int64_t>(it.kv_head) * cx.group + it.head0;
  std::memset(qT, 0, static_cast<size_t>(hdp * Rp) * sizeof(float));
  for (int64_t r = 0; r < Rp; ++r) {
    const int64_t t = r < rows ? r / it.nh : it.nt - 1;  // padded rows copy the last position
    rowpos[r] = static_cast<float>(pos0 + t);
    m[r] = -std::numeric_limits<float>::infinity();
    l[r] = 0.0f;
    if (r >= rows) continue;
    const float* q = cx.q + (it.row0 + it.t0 + t) * cx.q_stride + (h_first + r % it.nh) * hd;
    for (int64_t d = 0; d < hd; ++d) qT[d * Rp + r] = q[d] * cx.scale_log2;
  }
  std::memset(oT, 0, static_cast<size_t>(hdp * Rp) * sizeof(float));

  const R neg_inf = V::Set1(-std::numeric_limits<float>::infinity());
  const R win_minus_1 = V::Set1(static_cast<float>(cx.window - 1));
  for (int64_t k0 = it.k0; k0 < it.k1; k0 += Bk) {
    const int64_t nk = std::min<int64_t>(Bk, it.k1 - k0);
    const int64_t nkp = RoundUp(nk, JB);
    if (k0 + Bk < it.k1) {
      PrefetchTile(cache, cx.layer, s.block_table, k0 + Bk, std::min<int64_t>(Bk, it.k1 - k0 - Bk), it.kv_head);
    }
    LoadTile<V>(cache, cx.layer, false, s.block_table, k0, nk, nkp, it.kv_head, hd, hdp, kt);
    LoadTile<V>(cache, cx.layer, true, s.block_table, k0, nk, nkp, it.kv_head, hd, hdp, vt);
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) V::Store(tmax + c * L, neg_inf);
    for (int64_t j = 0; j < nkp; j += JB) ScoreBlock<V, C, JB>(qT, Rp, kt + j * hdp, hdp, sT + j * Rp, tmax);
    // Causal mask (and the padding keys): only tiles reaching past pos0,
    // padded to the register blocking, or starting before the last row's
    // sliding window; their max is taken again.
    // Soft-capping rewrites every score, so it takes the same pass.
    const bool before_window = cx.window > 0 && k0 <= pos0 + it.nt - 1 - cx.window;
    if (k0 + nk - 1 > pos0 || nkp != nk || before_window || cx.softcap_log2 > 0.0f) {
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) V::Store(tmax + c * L, neg_inf);
      for (int64_t j = 0; j < nkp; ++j) {
        const R kp = V::Set1(j < nk ? static_cast<float>(k0 + j) : std::numeric_limits<float>::infinity());
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) {
          float* sp = sT + j * Rp + c * L;
          R score = V::Load(sp);
          if (cx.softcap_log2 > 0.0f) score = SoftCap<V>(score, cx.softcap_log2);
          R masked = V::SelectGreater(kp, V::Load(rowpos + c * L), neg_inf, score);
          // Window: masked when row position - key position >= window.
          if (before_window) masked = V::SelectGreater(V::Sub(V::Load(rowpos + c * L), kp), win_minus_1, neg_inf, masked);
          V::Store(sp, masked);
          V::Store(tmax + c * L, V::Max(V::Load(tmax + c * L), masked));
        }
      }
    }
    // Online softmax, lane-wise. A row that has seen no visible key yet (its
    // window starts later) keeps m = -inf; it subtracts 0 instead, so its
    // probabilities and correction are exp2(-inf) = 0, not NaN.
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) {
      const R mt = V::Load(tmax + c * L);
      const R m_old = V::Load(m + c * L);
      const R m_new = V::Max(m_old, mt);
      const R m_sub = V::SelectGreater(m_new, neg_inf, m_new, V::Zero());
      const R cr = kernels::Exp2<V>(V::Sub(m_old, m_sub));
      R sum = V::Mul(V::Load(l + c * L), cr);
      for (int64_t j = 0; j < nkp; ++j) {
        float* sp = sT + j * Rp + c * L;
        const R p = kernels::Exp2<V>(V::Sub(V::Load(sp), m_sub));
        V::Store(sp, p);
        sum = V::Add(sum, p);
      }
      V::Store(m + c * L, m_new);
      V::Store(l + c * L, sum);
      V::Store(corr + c * L, cr);
    }
    for (int64_t d = 0; d < hdp; d += DB) OutputBlock<V, C, DB>(sT, Rp, vt + d, hdp, nkp, corr, oT + d * Rp);
  }

  if (partial == nullptr) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t t = r / it.nh;
      float* out = cx.out + (it.row0 + it.t0 + t) * cx.q_stride + (h_first + r % it.nh) * hd;
      const float inv = 1.0f / l[r];
      for (int64_t d = 0; d < hd; ++d) out[d] = oT[d * Rp + r] * inv;
    }
  } else {  // unnormalised, for the reduction of a split key range
    PartialView pv = PartialAt(partial, rows);
    for (int64_t r = 0; r < rows; ++r) {
      pv.m[r] = m[r];
      pv.l[r] = l[r];
      for (int64_t d = 0; d < hd; ++d) pv.o[r * hd + d] = oT[d * Rp + r];
    }
  }
}

template <class V>
int64_t ScratchFloatsFor(int64_t head_dim) {
  constexpr int64_t Rp = 4 * V::kLanes;
  const int64_t hdp = RoundUp(head_dim, 8);
  constexpr int64_t Bk = 80;
  static_assert(Blocking<V, 1>::kBk <= Bk && Blocking<V, 2>::kBk <= Bk && Blocking<V, 3>::kBk <= Bk &&
                Blocking<V, 4>::kBk <= Bk);
  return std::max(2 * hdp * Rp + Bk * Rp + 2 * Bk * hdp + 5 * Rp + 64, DotScratchFloats<V>(head_dim));
}

// Few rows (decode) go to the dot kernel (attention_decode.h), the rest to
// the tiled one with as many lane chunks as the rows need.
template <class V>
void AttendItem(const AttnContext& cx, const AttnItem& it, float* partial, float* scratch) {
  if (TryAttendDot<V>(cx, it, partial, scratch)) return;
  const int64_t chunks = (static_cast<int64_t>(it.nt) * it.nh + V::kLanes - 1) / V::kLanes;
  switch (chunks) {
    case 1: AttendTiled<V, 1>(cx, it, partial, scratch); return;
    case 2: AttendTiled<V, 2>(cx, it, partial, scratch); return;
    case 3: AttendTiled<V, 3>(cx, it, partial, scratch); return;
    default: AttendTiled<V, 4>(cx, it, partial, scratch); return;
  }
}

template <class V>
constexpr KernelInfo MakeKernel(const char* name) {
  return KernelInfo{name, &AttendItem<V>, &ScratchFloatsFor<V>, 4 * V::kLanes, &DotFits<V>};
}

}  // namespace
}  // namespace kvs::kvcache::internal
