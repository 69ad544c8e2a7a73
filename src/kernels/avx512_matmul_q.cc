// AVX-512 VNNI quantized MatMul (Q8_0, Q4_0, Q4_K, Q6_K weights).
//
// Same scheme as the AVX2 variant (see avx2_matmul_q.cc) with 16 weight rows
// per panel: per 32-element block, 8 chunks of [16 rows x 4 codes] (one zmm
// each, 512 bytes) followed by per-row float vectors. All codes are
// unsigned (Q8_0 codes are stored +128), so one vpdpbusd multiplies a chunk
// by 4 broadcast activation codes and accumulates into 16 per-row int32
// lanes; the offsets (-128 / -8 / -32 / -min) come from the per-group
// activation sums the activation quantizer precomputed.
#include <algorithm>

#include "kernels/avx512_util.h"
#include "kernels/isa_decls.h"
#include "kernels/quant_formats.h"
#include "kernels/scratch.h"

namespace kvs::kernels::avx512 {
namespace {

constexpr int kLanes = 16;  // weight rows per panel
constexpr int kMaxA = 8;    // activation rows per microkernel call

enum class QMode { kQ8_0, kQ4_0, kQ4_K, kQ6_K };

// Float vectors after the 512 code bytes of each 32-element block:
//   Q8_0/Q4_0: d      Q4_K: d*sc, -dmin*m      Q6_K: d*sc for both 16-groups
template <QMode M>
constexpr int kNumVecs = (M == QMode::kQ4_K || M == QMode::kQ6_K) ? 2 : 1;
template <QMode M>
constexpr int64_t kBlockStride = 512 + 64 * kNumVecs<M>;

inline __m256i Load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// Row j in the low half, row j+8 in the high half.
inline __m512i Pair(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

// v[j] = codes of rows j and j+8 of one block -> the panel's 8 chunks.
inline void StoreCodes(__m512i v[8], uint8_t* dst) {
  Transpose8x8x2(v);
  KVS_UNROLL
  for (int c = 0; c < 8; ++c) _mm512_store_si512(dst + 64 * c, v[c]);
}

inline float* Vec(uint8_t* block, int i) { return reinterpret_cast<float*>(block + 512 + 64 * i); }

// Byte offsets of the 16 panel rows from rows[0] (a panel spans < 2 GiB).
inline __m512i RowOffsets(const uint8_t* const rows[kLanes]) {
  alignas(64) int32_t off[kLanes];
  for (int r = 0; r < kLanes; ++r) off[r] = static_cast<int32_t>(rows[r] - rows[0]);
  return _mm512_load_si512(off);
}

// The 4 bytes at rows[r] + byte_off, for each of the 16 rows.
inline __m512i Gather(const uint8_t* const rows[kLanes], __m512i offs, int64_t byte_off) {
  return _mm512_i32gather_epi32(offs, rows[0] + byte_off, 1);
}

// The low 16 bits of each lane, read as f16.
inline __m512 HalfLo(__m512i v) { return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v)); }

inline __m512 ToF(__m512i v) { return _mm512_cvtepi32_ps(v); }

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
  const __m512i bias = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i offs = RowOffsets(rows);
  for (int64_t b = 0; b < nblk; ++b) {
    PrefetchNext(next, b * static_cast<int64_t>(sizeof(BlockQ8_0)), 1);
    uint8_t* dst = panel + b * kBlockStride<QMode::kQ8_0>;
    __m512i v[8];
    KVS_UNROLL
    for (int j = 0; j < 8; ++j) {
      const auto* lo = reinterpret_cast<const BlockQ8_0*>(rows[j]) + b;
      const auto* hi = reinterpret_cast<const BlockQ8_0*>(rows[j + 8]) + b;
      v[j] = _mm512_xor_si512(Pair(Load256(lo->qs), Load256(hi->qs)), bias);
    }
    StoreCodes(v, dst);
    _mm512_store_ps(Vec(dst, 0), HalfLo(Gather(rows, offs, b * static_cast<int64_t>(sizeof(BlockQ8_0)))));
  }
}

void RepackQ4_0(const uint8_t* const rows[kLanes], const uint8_t* const* next, int64_t nblk,
                uint8_t* panel) {
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
  const __m512i dup = _mm512_setr_epi64(0, 1, 0, 1, 2, 3, 2, 3);
  const __m512i offs = RowOffsets(rows);
  for (int64_t b = 0; b < nblk; ++b) {
    PrefetchNext(next, b * static_cast<int64_t>(sizeof(BlockQ4_0)), 1);
    uint8_t* dst = panel + b * kBlockStride<QMode::kQ4_0>;
    __m512i v[8];
    KVS_UNROLL
    for (int j = 0; j < 8; ++j) {
      const auto* lo = reinterpret_cast<const BlockQ4_0*>(rows[j]) + b;
      const auto* hi = reinterpret_cast<const BlockQ4_0*>(rows[j + 8]) + b;
      // [qs_j | qs_j | qs_j+8 | qs_j+8]: low nibbles of the first copy are
      // elements 0..15, high nibbles of the second copy elements 16..31.
      const __m256i q2 = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo->qs))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi->qs)), 1);
      const __m512i q = _mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(q2));
      v[j] = _mm512_and_si512(_mm512_srlv_epi64(q, shifts), mask);
    }
    StoreCodes(v, dst);
    _mm512_store_ps(Vec(dst, 0), HalfLo(Gather(rows, offs, b * static_cast<int64_t>(sizeof(BlockQ4_0)))));
  }
}

void RepackQ4_K(const uint8_t* const rows[kLanes], const uint8_t* const* next, int64_t nblk,
                uint8_t* panel) {
  const __m512i mask = _mm512_set1_epi8(0x0F);
  const __m512i m6 = _mm512_set1_epi32(63), m4 = _mm512_set1_epi32(15), m2 = _mm512_set1_epi32(3);
  const __m512i offs = RowOffsets(rows);
  for (int64_t sb = 0; sb < nblk / 8; ++sb) {
    PrefetchNext(next, sb * static_cast<int64_t>(sizeof(BlockQ4_K)), sizeof(BlockQ4_K));
    uint8_t* base = panel + 8 * sb * kBlockStride<QMode::kQ4_K>;
    // GetScaleMinK4 for all 16 rows at once.
    const int64_t off = sb * static_cast<int64_t>(sizeof(BlockQ4_K));
    const __m512i dd = Gather(rows, offs, off);
    const __m512 d = HalfLo(dd), dmin = HalfLo(_mm512_srli_epi32(dd, 16));
    const __m512i q0 = Gather(rows, offs, off + 4), q1 = Gather(rows, offs, off + 8);
    const __m512i q2 = Gather(rows, offs, off + 12);
    KVS_UNROLL
    for (int s = 0; s < 8; ++s) {
      __m512i sc, mn;
      if (s < 4) {
        sc = _mm512_and_si512(_mm512_srli_epi32(q0, 8 * s), m6);
        mn = _mm512_and_si512(_mm512_srli_epi32(q1, 8 * s), m6);
      } else {
        const int t = 8 * (s - 4);
        sc = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(q2, t), m4),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(q0, t + 6), m2), 4));
        mn = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(q2, t + 4), m4),
                             _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(q1, t + 6), m2), 4));
      }
      uint8_t* dst = base + s * kBlockStride<QMode::kQ4_K>;
      _mm512_store_ps(Vec(dst, 0), _mm512_mul_ps(d, ToF(sc)));
      _mm512_store_ps(Vec(dst, 1), _mm512_sub_ps(_mm512_setzero_ps(), _mm512_mul_ps(dmin, ToF(mn))));
    }
    for (int g = 0; g < 4; ++g) {
      __m512i lo[8], hi[8];
      KVS_UNROLL
      for (int j = 0; j < 8; ++j) {
        const auto* a = reinterpret_cast<const BlockQ4_K*>(rows[j]) + sb;
        const auto* b = reinterpret_cast<const BlockQ4_K*>(rows[j + 8]) + sb;
        const __m512i q = Pair(Load256(a->qs + 32 * g), Load256(b->qs + 32 * g));
        lo[j] = _mm512_and_si512(q, mask);
        hi[j] = _mm512_and_si512(_mm512_srli_epi16(q, 4), mask);
      }
      StoreCodes(lo, base + (2 * g) * kBlockStride<QMode::kQ4_K>);
      StoreCodes(hi, base + (2 * g + 1) * kBlockStride<QMode::kQ4_K>);
    }
  }
}

void RepackQ6_K(const uint8_t* const rows[kLanes], const uint8_t* const* next, int64_t nblk,
                uint8_t* panel) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x03);
  const __m512i offs = RowOffsets(rows);
  for (int64_t sb = 0; sb < nblk / 8; ++sb) {
    PrefetchNext(next, sb * static_cast<int64_t>(sizeof(BlockQ6_K)), sizeof(BlockQ6_K));
    uint8_t* base = panel + 8 * sb * kBlockStride<QMode::kQ6_K>;
    // Scales of all 16 rows at once. d is the block's last two bytes: gather
    // the dword ending there so no read passes the end of the block.
    const int64_t off = sb * static_cast<int64_t>(sizeof(BlockQ6_K));
    const __m512 d = HalfLo(_mm512_srli_epi32(Gather(rows, offs, off + 206), 16));
    KVS_UNROLL
    for (int q = 0; q < 4; ++q) {
      const __m512i s4 = Gather(rows, offs, off + 192 + 4 * q);  // scales 4q .. 4q+3
      KVS_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int s = 4 * q + e;  // 16-group s: block s / 2, vector s % 2
        const __m512i sc = _mm512_srai_epi32(_mm512_slli_epi32(s4, 24 - 8 * e), 24);
        _mm512_store_ps(Vec(base + (s / 2) * kBlockStride<QMode::kQ6_K>, s % 2), _mm512_mul_ps(d, ToF(sc)));
      }
    }
    KVS_UNROLL
    for (int j = 0; j < 8; ++j) {  // 32-element block j: element 128h + 32k + l
      const int h = j / 4, k = j % 4;
      __m512i v[8];
      KVS_UNROLL
      for (int i = 0; i < 8; ++i) {
        const auto* a = reinterpret_cast<const BlockQ6_K*>(rows[i]) + sb;
        const auto* b = reinterpret_cast<const BlockQ6_K*>(rows[i + 8]) + sb;
        const int lo_off = 64 * h + 32 * (k & 1);
        const __m512i ql = Pair(Load256(a->ql + lo_off), Load256(b->ql + lo_off));
        const __m512i qh = Pair(Load256(a->qh + 32 * h), Load256(b->qh + 32 * h));
        const __m512i lo = _mm512_and_si512(k & 2 ? _mm512_srli_epi16(ql, 4) : ql, m4);
        const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(qh, 2 * k), m2);
        v[i] = _mm512_or_si512(lo, _mm512_slli_epi16(hi, 4));
      }
      StoreCodes(v, base + j * kBlockStride<QMode::kQ6_K>);
    }
  }
}

struct ActRows {
  const int8_t* qs;
  const float* d;
  const uint8_t* aux;
};

inline __m512i Bcast4(const int8_t* p) { return _mm512_set1_epi32(LoadI32(p)); }

// y[i][lanes in `mask`] for A activation rows against one repacked panel.
template <QMode M, int A>
void Micro(const uint8_t* panel, int64_t nblk, const ActRows* act, int act_shift, float* y, int64_t ldy,
           __mmask16 mask) {
  __m512 sum[A];
  KVS_UNROLL
  for (int i = 0; i < A; ++i) sum[i] = _mm512_setzero_ps();
  for (int64_t b = 0; b < nblk; ++b) {
    const uint8_t* p = panel + b * kBlockStride<M>;
    const int64_t ab = b >> act_shift;
    if constexpr (M == QMode::kQ6_K) {
      for (int h = 0; h < 2; ++h) {
        __m512i acc[A];
        KVS_UNROLL
        for (int i = 0; i < A; ++i) acc[i] = _mm512_set1_epi32(reinterpret_cast<const int32_t*>(act[i].aux)[2 * b + h]);
        KVS_UNROLL
        for (int c = 4 * h; c < 4 * h + 4; ++c) {
          const __m512i w = _mm512_load_si512(p + 64 * c);
          KVS_UNROLL
          for (int i = 0; i < A; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], w, Bcast4(act[i].qs + 32 * b + 4 * c));
        }
        const __m512 a = _mm512_load_ps(p + 512 + 64 * h);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          sum[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i]), _mm512_mul_ps(a, _mm512_set1_ps(act[i].d[ab])), sum[i]);
        }
      }
    } else {
      __m512i acc[A];
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        acc[i] = M == QMode::kQ4_K ? _mm512_setzero_si512()
                                   : _mm512_set1_epi32(reinterpret_cast<const int32_t*>(act[i].aux)[b]);
      }
      KVS_UNROLL
      for (int c = 0; c < 8; ++c) {
        const __m512i w = _mm512_load_si512(p + 64 * c);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], w, Bcast4(act[i].qs + 32 * b + 4 * c));
      }
      const __m512 a = _mm512_load_ps(p + 512);
      KVS_UNROLL
      for (int i = 0; i < A; ++i) {
        sum[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[i]), _mm512_mul_ps(a, _mm512_set1_ps(act[i].d[ab])), sum[i]);
      }
      if constexpr (M == QMode::kQ4_K) {
        const __m512 bias = _mm512_load_ps(p + 576);
        KVS_UNROLL
        for (int i = 0; i < A; ++i) {
          sum[i] = _mm512_fmadd_ps(bias, _mm512_set1_ps(reinterpret_cast<const float*>(act[i].aux)[b]), sum[i]);
        }
      }
    }
  }
  KVS_UNROLL
  for (int i = 0; i < A; ++i) _mm512_mask_storeu_ps(y + i * ldy, mask, sum[i]);
}

template <QMode M>
void TileQ(const TileArgs& t) {
  const ActLayout& l = *t.layout;
  const int64_t nblk = t.cols / 32;
  const int act_shift = l.act_block == 32 ? 0 : 3;
  auto* panel = ThreadScratch(ScratchSlot::kPanel, static_cast<size_t>(nblk * kBlockStride<M>));
  for (int64_t r0 = 0; r0 < t.rows; r0 += kLanes) {
    const int64_t valid = std::min<int64_t>(kLanes, t.rows - r0);
    const __mmask16 mask = TailMask(valid);
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
        case 1: Micro<M, 1>(panel, nblk, act, act_shift, y, t.ldy, mask); break;
        case 2: Micro<M, 2>(panel, nblk, act, act_shift, y, t.ldy, mask); break;
        case 3: Micro<M, 3>(panel, nblk, act, act_shift, y, t.ldy, mask); break;
        case 4: Micro<M, 4>(panel, nblk, act, act_shift, y, t.ldy, mask); break;
        case 5: Micro<M, 5>(panel, nblk, act, act_shift, y, t.ldy, mask); break;
        case 6: Micro<M, 6>(panel, nblk, act, act_shift, y, t.ldy, mask); break;
        case 7: Micro<M, 7>(panel, nblk, act, act_shift, y, t.ldy, mask); break;
        default: Micro<M, 8>(panel, nblk, act, act_shift, y, t.ldy, mask); break;
      }
    }
  }
}

}  // namespace

void TileQ8_0(const TileArgs& a) { TileQ<QMode::kQ8_0>(a); }
void TileQ4_0(const TileArgs& a) { TileQ<QMode::kQ4_0>(a); }
void TileQ4_K(const TileArgs& a) { TileQ<QMode::kQ4_K>(a); }
void TileQ6_K(const TileArgs& a) { TileQ<QMode::kQ6_K>(a); }

}  // namespace kvs::kernels::avx512
