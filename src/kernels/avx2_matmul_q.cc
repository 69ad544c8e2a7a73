// AVX2 quantized MatMul (Q8_0, Q4_0, Q4_K, Q6_K weights).
//
// Each tile is processed in panels of 8 weight rows. A panel is first
// repacked into a lane-per-row layout: for every 32-element block, 8 chunks
// of [8 rows x 4 consecutive codes] (one ymm per chunk) followed by per-row
// float scale vectors. The microkernel then broadcasts 4 activation codes
// at a time and multiplies them against the 8 rows at once, so no horizontal
// reductions are needed and the repacking cost is shared by all m
// activation rows. Codes are unsigned (Q4_0 nibbles, Q4_K nibbles, Q6_K
// 6-bit values); the implicit offsets (-8, -32, -min) are folded in with the
// per-group activation sums the activation quantizer precomputed. Q8_0 codes
// stay signed and use the abs/sign trick for pmaddubsw.
#include <algorithm>

#include "base/fp16.h"
#include "kernels/avx2_util.h"
#include "kernels/isa_decls.h"
#include "kernels/quant_formats.h"
#include "kernels/scratch.h"

namespace kvs::kernels::avx2 {
namespace {

constexpr int kLanes = 8;  // weight rows per panel
constexpr int kMaxA = 4;   // activation rows per microkernel call

enum class QMode { kQ8_0, kQ4_0, kQ4_K, kQ6_K };

// Float vectors stored after the codes of each 32-element block:
//   Q8_0/Q4_0: d            Q4_K: d*sc, -dmin*m      Q6_K: d*sc (two sub-blocks)
template <QMode M>
constexpr int kNumVecs = (M == QMode::kQ4_K || M == QMode::kQ6_K) ? 2 : 1;
template <QMode M>
constexpr int64_t kBlockStride = 256 + 32 * kNumVecs<M>;

inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Transposes the 8 rows' 32-byte code vectors of one block into the panel.
inline void StoreCodes(__m256i v[8], uint8_t* dst) {
  Transpose8x8(v);
  for (int c = 0; c < 8; ++c) _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32 * c), v[c]);
}

inline void StoreVec(float* dst, const float v[8]) { _mm256_store_ps(dst, _mm256_loadu_ps(v)); }

void RepackQ8_0(const uint8_t* const rows[kLanes], int64_t nblk, uint8_t* panel) {
  for (int64_t b = 0; b < nblk; ++b) {
    uint8_t* dst = panel + b * kBlockStride<QMode::kQ8_0>;
    __m256i v[8];
    float d[8];
    for (int r = 0; r < kLanes; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ8_0*>(rows[r]) + b;
      v[r] = Load256(blk->qs);
      d[r] = F16ToF32(blk->d);
    }
    StoreCodes(v, dst);
    StoreVec(reinterpret_cast<float*>(dst + 256), d);
  }
}

void RepackQ4_0(const uint8_t* const rows[kLanes], int64_t nblk, uint8_t* panel) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  for (int64_t b = 0; b < nblk; ++b) {
    uint8_t* dst = panel + b * kBlockStride<QMode::kQ4_0>;
    __m256i v[8];
    float d[8];
    for (int r = 0; r < kLanes; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(rows[r]) + b;
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
      v[r] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
      d[r] = F16ToF32(blk->d);
    }
    StoreCodes(v, dst);
    StoreVec(reinterpret_cast<float*>(dst + 256), d);
  }
}

void RepackQ4_K(const uint8_t* const rows[kLanes], int64_t nblk, uint8_t* panel) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  for (int64_t sb = 0; sb < nblk / 8; ++sb) {
    float a[8][8], bias[8][8];  // [sub-block][row]
    for (int r = 0; r < kLanes; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ4_K*>(rows[r]) + sb;
      const float d = F16ToF32(blk->d), dmin = F16ToF32(blk->dmin);
      for (int s = 0; s < 8; ++s) {
        uint8_t sc, m;
        GetScaleMinK4(s, blk->scales, &sc, &m);
        a[s][r] = d * static_cast<float>(sc);
        bias[s][r] = -dmin * static_cast<float>(m);
      }
    }
    for (int g = 0; g < 4; ++g) {
      __m256i lo[8], hi[8];
      for (int r = 0; r < kLanes; ++r) {
        const auto* blk = reinterpret_cast<const BlockQ4_K*>(rows[r]) + sb;
        const __m256i q = Load256(blk->qs + 32 * g);
        lo[r] = _mm256_and_si256(q, mask);
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
      }
      for (int h = 0; h < 2; ++h) {
        const int s = 2 * g + h;
        uint8_t* dst = panel + (8 * sb + s) * kBlockStride<QMode::kQ4_K>;
        StoreCodes(h == 0 ? lo : hi, dst);
        StoreVec(reinterpret_cast<float*>(dst + 256), a[s]);
        StoreVec(reinterpret_cast<float*>(dst + 288), bias[s]);
      }
    }
  }
}

void RepackQ6_K(const uint8_t* const rows[kLanes], int64_t nblk, uint8_t* panel) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  for (int64_t sb = 0; sb < nblk / 8; ++sb) {
    for (int j = 0; j < 8; ++j) {  // 32-element block j of the super-block
      const int h = j / 4, k = j % 4;
      uint8_t* dst = panel + (8 * sb + j) * kBlockStride<QMode::kQ6_K>;
      __m256i v[8];
      float a0[8], a1[8];
      for (int r = 0; r < kLanes; ++r) {
        const auto* blk = reinterpret_cast<const BlockQ6_K*>(rows[r]) + sb;
        const __m256i ql = Load256(blk->ql + 64 * h + 32 * (k & 1));
        const __m256i qh = Load256(blk->qh + 32 * h);
        const __m256i lo = _mm256_and_si256(k & 2 ? _mm256_srli_epi16(ql, 4) : ql, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2);
        v[r] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
        const float d = F16ToF32(blk->d);
        a0[r] = d * static_cast<float>(blk->scales[2 * j]);
        a1[r] = d * static_cast<float>(blk->scales[2 * j + 1]);
      }
      StoreCodes(v, dst);
      StoreVec(reinterpret_cast<float*>(dst + 256), a0);
      StoreVec(reinterpret_cast<float*>(dst + 288), a1);
    }
  }
}

// Activation row pointers for one microkernel call.
struct ActRows {
  const int8_t* qs;
  const float* d;
  const uint8_t* aux;
};

// y[i][0..valid) for A activation rows against one repacked panel.
template <QMode M, int A>
void Micro(const uint8_t* panel, int64_t nblk, const ActRows* act, int act_shift, float* y, int64_t ldy,
           int valid) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 sum[A];
  for (int i = 0; i < A; ++i) sum[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* p = panel + b * kBlockStride<M>;
    const int64_t ab = b >> act_shift;  // activation scale index
    if constexpr (M == QMode::kQ6_K) {
      for (int h = 0; h < 2; ++h) {
        __m256i acc[A];
        for (int i = 0; i < A; ++i) {
          acc[i] = _mm256_set1_epi32(reinterpret_cast<const int32_t*>(act[i].aux)[2 * b + h]);
        }
        for (int c = 4 * h; c < 4 * h + 4; ++c) {
          const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * c));
          for (int i = 0; i < A; ++i) {
            const __m256i x = _mm256_set1_epi32(LoadI32(act[i].qs + 32 * b + 4 * c));
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones));
          }
        }
        const __m256 a = _mm256_load_ps(reinterpret_cast<const float*>(p + 256 + 32 * h));
        for (int i = 0; i < A; ++i) {
          const __m256 scale = _mm256_mul_ps(a, _mm256_set1_ps(act[i].d[ab]));
          sum[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i]), scale, sum[i]);
        }
      }
    } else {
      __m256i acc[A];
      for (int i = 0; i < A; ++i) {
        acc[i] = M == QMode::kQ4_0 ? _mm256_set1_epi32(reinterpret_cast<const int32_t*>(act[i].aux)[b])
                                   : _mm256_setzero_si256();
      }
      for (int c = 0; c < 8; ++c) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * c));
        if constexpr (M == QMode::kQ8_0) {
          const __m256i aw = _mm256_abs_epi8(w);
          for (int i = 0; i < A; ++i) {
            const __m256i x = _mm256_set1_epi32(LoadI32(act[i].qs + 32 * b + 4 * c));
            const __m256i prod = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w));
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(prod, ones));
          }
        } else {
          for (int i = 0; i < A; ++i) {
            const __m256i x = _mm256_set1_epi32(LoadI32(act[i].qs + 32 * b + 4 * c));
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones));
          }
        }
      }
      const __m256 a = _mm256_load_ps(reinterpret_cast<const float*>(p + 256));
      for (int i = 0; i < A; ++i) {
        const __m256 scale = _mm256_mul_ps(a, _mm256_set1_ps(act[i].d[ab]));
        sum[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i]), scale, sum[i]);
      }
      if constexpr (M == QMode::kQ4_K) {
        const __m256 bias = _mm256_load_ps(reinterpret_cast<const float*>(p + 288));
        for (int i = 0; i < A; ++i) {
          const float xs = reinterpret_cast<const float*>(act[i].aux)[b];
          sum[i] = _mm256_fmadd_ps(bias, _mm256_set1_ps(xs), sum[i]);
        }
      }
    }
  }
  for (int i = 0; i < A; ++i) {
    if (valid == kLanes) {
      _mm256_storeu_ps(y + i * ldy, sum[i]);
    } else {
      alignas(32) float tmp[kLanes];
      _mm256_store_ps(tmp, sum[i]);
      for (int r = 0; r < valid; ++r) y[i * ldy + r] = tmp[r];
    }
  }
}

template <QMode M>
void TileQ(const TileArgs& t) {
  const ActLayout& l = *t.layout;
  const int64_t nblk = t.cols / 32;
  const int act_shift = l.act_block == 32 ? 0 : 3;
  auto* panel = ThreadScratch(ScratchSlot::kPanel, static_cast<size_t>(nblk * kBlockStride<M>));
  for (int64_t r0 = 0; r0 < t.rows; r0 += kLanes) {
    const int valid = static_cast<int>(std::min<int64_t>(kLanes, t.rows - r0));
    const uint8_t* rows[kLanes];
    for (int r = 0; r < kLanes; ++r) rows[r] = t.w + std::min<int64_t>(r0 + r, t.rows - 1) * t.row_bytes;
    if constexpr (M == QMode::kQ8_0) RepackQ8_0(rows, nblk, panel);
    if constexpr (M == QMode::kQ4_0) RepackQ4_0(rows, nblk, panel);
    if constexpr (M == QMode::kQ4_K) RepackQ4_K(rows, nblk, panel);
    if constexpr (M == QMode::kQ6_K) RepackQ6_K(rows, nblk, panel);
    for (int64_t i0 = 0; i0 < t.m; i0 += kMaxA) {
      const int na = static_cast<int>(std::min<int64_t>(kMaxA, t.m - i0));
      ActRows act[kMaxA];
      for (int i = 0; i < na; ++i) {
        const uint8_t* row = t.acts + (i0 + i) * l.row_stride;
        act[i] = {reinterpret_cast<const int8_t*>(row + l.qs_off), reinterpret_cast<const float*>(row + l.d_off),
                  row + l.aux_off};
      }
      float* y = t.y + i0 * t.ldy + r0;
      switch (na) {
        case 1: Micro<M, 1>(panel, nblk, act, act_shift, y, t.ldy, valid); break;
        case 2: Micro<M, 2>(panel, nblk, act, act_shift, y, t.ldy, valid); break;
        case 3: Micro<M, 3>(panel, nblk, act, act_shift, y, t.ldy, valid); break;
        default: Micro<M, 4>(panel, nblk, act, act_shift, y, t.ldy, valid); break;
      }
    }
  }
}

}  // namespace

void TileQ8_0(const TileArgs& a) { TileQ<QMode::kQ8_0>(a); }
void TileQ4_0(const TileArgs& a) { TileQ<QMode::kQ4_0>(a); }
void TileQ4_K(const TileArgs& a) { TileQ<QMode::kQ4_K>(a); }
void TileQ6_K(const TileArgs& a) { TileQ<QMode::kQ6_K>(a); }

}  // namespace kvs::kernels::avx2
