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
  KVS_UNROLL
  for (int c = 0; c < 8; ++c) _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32 * c), v[c]);
}

inline float* Vec(uint8_t* block, int i) { return reinterpret_cast<float*>(block + 256 + 32 * i); }

// Byte offsets of the 8 panel rows from rows[0] (a panel spans < 2 GiB).
inline __m256i RowOffsets(const uint8_t* const rows[kLanes]) {
  alignas(32) int32_t off[kLanes];
  for (int r = 0; r < kLanes; ++r) off[r] = static_cast<int32_t>(rows[r] - rows[0]);
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(off));
}

// The 4 bytes at rows[r] + byte_off, for each of the 8 rows.
inline __m256i Gather(const uint8_t* const rows[kLanes], __m256i offs, int64_t byte_off) {
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(rows[0] + byte_off), offs, 1);
}

// The low 16 bits of each lane, read as f16.
inline __m256 HalfLo(__m256i v) {
  const __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xFFFF));
  return _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
}

inline __m256 ToF(__m256i v) { return _mm256_cvtepi32_ps(v); }

// Prefetches `len` bytes at byte offset `off` of each row of the next panel
// (nullptr: none), one panel ahead of the repacking that will read them, so
// the interleaved row streams of a decode step keep enough loads in flight.
inline void PrefetchNext(const uint8_t* const* next, int64_t off, int64_t len) {
  if (next == nullptr) return;
  for (int r = 0; r < kLanes; ++r) {
    for (int64_t o = 0; o < len; o += 64) Prefetch(next[r] + off + o);
  }
}

void RepackQ8_0(const uint8_t* const rows[kLanes], const uint8_t* const* next, int64_t nblk,
                uint8_t* panel) {
  const __m256i offs = RowOffsets(rows);
  for (int64_t b = 0; b < nblk; ++b) {
    PrefetchNext(next, b * static_cast<int64_t>(sizeof(BlockQ8_0)), 1);
    uint8_t* dst = panel + b * kBlockStride<QMode::kQ8_0>;
    __m256i v[8];
    KVS_UNROLL
    for (int r = 0; r < kLanes; ++r) v[r] = Load256((reinterpret_cast<const BlockQ8_0*>(rows[r]) + b)->qs);
    StoreCodes(v, dst);
    _mm256_store_ps(Vec(dst, 0), HalfLo(Gather(rows, offs, b * static_cast<int64_t>(sizeof(BlockQ8_0)))));
  }
}

void RepackQ4_0(const uint8_t* const rows[kLanes], const uint8_t* const* next, int64_t nblk,
                uint8_t* panel) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m256i offs = RowOffsets(rows);
  for (int64_t b = 0; b < nblk; ++b) {
    PrefetchNext(next, b * static_cast<int64_t>(sizeof(BlockQ4_0)), 1);
    uint8_t* dst = panel + b * kBlockStride<QMode::kQ4_0>;
    __m256i v[8];
    KVS_UNROLL
    for (int r = 0; r < kLanes; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(rows[r]) + b;
      const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs));
      v[r] = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), mask), _mm_and_si128(q, mask));
    }
    StoreCodes(v, dst);
    _mm256_store_ps(Vec(dst, 0), HalfLo(Gather(rows, offs, b * static_cast<int64_t>(sizeof(BlockQ4_0)))));
  }
}

void RepackQ4_K(const uint8_t* const rows[kLanes], const uint8_t* const* next, int64_t nblk,
                uint8_t* panel) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i m6 = _mm256_set1_epi32(63), m4 = _mm256_set1_epi32(15), m2 = _mm256_set1_epi32(3);
  const __m256i offs = RowOffsets(rows);
  for (int64_t sb = 0; sb < nblk / 8; ++sb) {
    PrefetchNext(next, sb * static_cast<int64_t>(sizeof(BlockQ4_K)), sizeof(BlockQ4_K));
    uint8_t* base = panel + 8 * sb * kBlockStride<QMode::kQ4_K>;
    // GetScaleMinK4 for all 8 rows at once.
    const int64_t off = sb * static_cast<int64_t>(sizeof(BlockQ4_K));
    const __m256i dd = Gather(rows, offs, off);
    const __m256 d = HalfLo(dd), dmin = HalfLo(_mm256_srli_epi32(dd, 16));
    const __m256i q0 = Gather(rows, offs, off + 4), q1 = Gather(rows, offs, off + 8);
    const __m256i q2 = Gather(rows, offs, off + 12);
    KVS_UNROLL
    for (int s = 0; s < 8; ++s) {
      __m256i sc, mn;
      if (s < 4) {
        sc = _mm256_and_si256(_mm256_srli_epi32(q0, 8 * s), m6);
        mn = _mm256_and_si256(_mm256_srli_epi32(q1, 8 * s), m6);
      } else {
        const int t = 8 * (s - 4);
        sc = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(q2, t), m4),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(q0, t + 6), m2), 4));
        mn = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(q2, t + 4), m4),
                             _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(q1, t + 6), m2), 4));
      }
      uint8_t* dst = base + s * kBlockStride<QMode::kQ4_K>;
      _mm256_store_ps(Vec(dst, 0), _mm256_mul_ps(d, ToF(sc)));
      _mm256_store_ps(Vec(dst, 1), _mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(dmin, ToF(mn))));
    }
    for (int g = 0; g < 4; ++g) {
      __m256i lo[8], hi[8];
      KVS_UNROLL
      for (int r = 0; r < kLanes; ++r) {
        const auto* blk = reinterpret_cast<const BlockQ4_K*>(rows[r]) + sb;
        const __m256i q = Load256(blk->qs + 32 * g);
        lo[r] = _mm256_and_si256(q, mask);
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
      }
      StoreCodes(lo, base + (2 * g) * kBlockStride<QMode::kQ4_K>);
      StoreCodes(hi, base + (2 * g + 1) * kBlockStride<QMode::kQ4_K>);
    }
  }
}

void RepackQ6_K(const uint8_t* const rows[kLanes], const uint8_t* const* next, int64_t nblk,
                uint8_t* panel) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  const __m256i offs = RowOffsets(rows);
  for (int64_t sb = 0; sb < nblk / 8; ++sb) {
    PrefetchNext(next, sb * static_cast<int64_t>(sizeof(BlockQ6_K)), sizeof(BlockQ6_K));
    uint8_t* base = panel + 8 * sb * kBlockStride<QMode::kQ6_K>;
    // Scales of all 8 rows at once; d is gathered with the dword ending at
    // the block's last byte so no read passes the block.
    const int64_t off = sb * static_cast<int64_t>(sizeof(BlockQ6_K));
    const __m256 d = HalfLo(_mm256_srli_epi32(Gather(rows, offs, off + 206), 16));
    KVS_UNROLL
    for (int q = 0; q < 4; ++q) {
      const __m256i s4 = Gather(rows, offs, off + 192 + 4 * q);  // scales 4q .. 4q+3
      KVS_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int s = 4 * q + e;  // 16-group s: block s / 2, vector s % 2
        const __m256i sc = _mm256_srai_epi32(_mm256_slli_epi32(s4, 24 - 8 * e), 24);
        _mm256_store_ps(Vec(base + (s / 2) * kBlockStride<QMode::kQ6_K>, s % 2), _mm256_mul_ps(d, ToF(sc)));
      }
    }
    KVS_UNROLL
    for (int j = 0; j < 8; ++j) {  // 32-element block j: element 128h + 32k + l
      const int h = j / 4, k = j % 4;
      __m256i v[8];
      KVS_UNROLL
      for (int r = 0; r < kLanes; ++r) {
        const auto* blk = reinterpret_cast<const BlockQ6_K*>(rows[r]) + sb;
        const __m256i ql = Load256(blk->ql + 64 * h + 32 * (k & 1));
        const __m256i qh = Load256(blk->qh + 32 * h);
        const __m256i lo = _mm256_and_si256(k & 2 ? _mm256_srli_epi16(ql, 4) : ql, m4);
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2);
        v[r] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
      }
      StoreCodes(v, base + j * kBlockStride<QMode::kQ6_K>);
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
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm256_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* p = panel + b * kBlockStride<M>;
    const int64_t ab = b >> act_shift;  // activation scale index
    if constexpr (M == QMode::kQ6_K) {
      for (int h = 0; h < 2; ++h) {
        __m256i acc[A];
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          acc[i] = _mm256_set1_epi32(reinterpret_cast<const int32_t*>(act[i].aux)[2 * b + h]);
        }
        KVS_UNROLL
        for (int c = 4 * h; c < 4 * h + 4; ++c) {
          const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * c));
          KVS_UNROLL
          for (int i = 0; i < A; ++i) {
            const __m256i x = _mm256_set1_epi32(LoadI32(act[i].qs + 32 * b + 4 * c));
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones));
          }
        }
        const __m256 a = _mm256_load_ps(reinterpret_cast<const float*>(p + 256 + 32 * h));
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const __m256 scale = _mm256_mul_ps(a, _mm256_set1_ps(act[i].d[ab]));
          sum[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i]), scale, sum[i]);
        }
      }
    } else {
      __m256i acc[A];
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        acc[i] = M == QMode::kQ4_0 ? _mm256_set1_epi32(reinterpret_cast<const int32_t*>(act[i].aux)[b])
                                   : _mm256_setzero_si256();
      }
      KVS_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * c));
        if constexpr (M == QMode::kQ8_0) {
          const __m256i aw = _mm256_abs_epi8(w);
          KVS_UNROLL
          for (int i = 0; i < A; ++i) {
            const __m256i x = _mm256_set1_epi32(LoadI32(act[i].qs + 32 * b + 4 * c));
            const __m256i prod = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w));
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(prod, ones));
          }
        } else {
          KVS_UNROLL
          for (int i = 0; i < A; ++i) {
            const __m256i x = _mm256_set1_epi32(LoadI32(act[i].qs + 32 * b + 4 * c));
            acc[i] = _mm256_add_epi32(acc[i], _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), ones));
          }
        }
      }
      const __m256 a = _mm256_load_ps(reinterpret_cast<const float*>(p + 256));
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        const __m256 scale = _mm256_mul_ps(a, _mm256_set1_ps(act[i].d[ab]));
        sum[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i]), scale, sum[i]);
      }
      if constexpr (M == QMode::kQ4_K) {
        const __m256 bias = _mm256_load_ps(reinterpret_cast<const float*>(p + 288));
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          const float xs = reinterpret_cast<const float*>(act[i].aux)[b];
          sum[i] = _mm256_fmadd_ps(bias, _mm256_set1_ps(xs), sum[i]);
        }
      }
    }
  }
  KVS_UNROLL
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
    const uint8_t* next_rows[kLanes];
    for (int r = 0; r < kLanes; ++r) {
      rows[r] = t.w + std::min<int64_t>(r0 + r, t.rows - 1) * t.row_bytes;
      next_rows[r] = t.w + std::min<int64_t>(r0 + kLanes + r, t.rows - 1) * t.row_bytes;
    }
    const uint8_t* const* next = r0 + kLanes < t.rows ? next_rows : nullptr;
    if constexpr (M == QMode::kQ8_0) RepackQ8_0(rows, next, nblk, panel);
    if constexpr (M == QMode::kQ4_0) RepackQ4_0(rows, next, nblk, panel);
    if constexpr (M == QMode::kQ4_K) RepackQ4_K(rows, next, nblk, panel);
    if constexpr (M == QMode::kQ6_K) RepackQ6_K(rows, next, nblk, panel);
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
