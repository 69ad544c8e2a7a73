// The attention inner loop, shared by the scalar and AVX2 translation units
// (paged_attention_scalar.cc, paged_attention_avx2.cc). Each includes this
// file with its own `Ops` and compiler flags; keep everything here in an
// anonymous namespace so the two copies never merge at link time.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "base/fp16.h"
#include "kvcache/paged_attention.h"

namespace kvs::kvcache::internal {

// One work item: query tokens [t_begin, t_end) of one sequence x one KV head.
struct AttendArgs {
  const KvCache* cache;
  const AttentionSeq* seq;
  int32_t layer;
  int32_t n_heads;
  int32_t kv_head;
  int32_t token;   // query token index within seq
  float scale;
  float* scratch;  // >= ScratchFloats(head_dim, group, block_size)
};

inline int64_t ScratchFloats(int64_t head_dim, int64_t group, int64_t block_size) {
  // kbuf, vbuf [block_size, head_dim]; scores [group, block_size];
  // acc [group, head_dim]; m, l [group]; row [n_kv*head_dim] is separate.
  return 2 * block_size * head_dim + group * block_size + group * head_dim + 2 * group + 64;
}

namespace {

// Converts `n` values of a KV row stored as `type` starting at element `first`
// into f32. For Q8_0, `first` and `n` are multiples of 32 (checked by caller).
template <typename Ops>
inline void LoadKv(DType type, const uint8_t* row, int64_t first, int64_t n, float* out) {
  switch (type) {
    case DType::kF32:
      std::memcpy(out, reinterpret_cast<const float*>(row) + first, n * sizeof(float));
      return;
    case DType::kF16:
      Ops::F16ToF32(reinterpret_cast<const uint16_t*>(row) + first, out, n);
      return;
    case DType::kBF16:
      Ops::BF16ToF32(reinterpret_cast<const uint16_t*>(row) + first, out, n);
      return;
    case DType::kQ8_0: {
      const uint8_t* blk = row + (first / 32) * 34;
      for (int64_t b = 0; b < n / 32; ++b, blk += 34) {
        uint16_t d16;
        std::memcpy(&d16, blk, 2);
        Ops::I8ToF32(reinterpret_cast<const int8_t*>(blk + 2), F16ToF32(d16), out + b * 32);
      }
      return;
    }
    default:
      return;  // rejected by KvCacheConfig::Validate
  }
}

template <typename Ops>
inline void AttendImpl(const AttendArgs& a) {
  const KvCache& cache = *a.cache;
  const KvCacheConfig& cfg = cache.config();
  const AttentionSeq& s = *a.seq;
  const int64_t hd = cfg.head_dim;
  const int64_t bs = cfg.block_size;
  const int32_t group = a.n_heads / cfg.n_kv_heads;
  const int64_t q_stride = static_cast<int64_t>(a.n_heads) * hd;
  const int32_t h0 = a.kv_head * group;
  const int64_t row_elems = cfg.RowElems();
  // Q8_0 rows whose heads are not whole blocks are converted in full.
  const bool whole_row = cfg.dtype == DType::kQ8_0 && hd % 32 != 0;

  float* kbuf = a.scratch;              // [bs, hd]
  float* vbuf = kbuf + bs * hd;         // [bs, hd]
  float* scores = vbuf + bs * hd;       // [group, bs]
  float* acc = scores + group * bs;     // [group, hd]
  float* m = acc + group * hd;          // [group]
  float* l = m + group;                 // [group]

  const float* q = s.q + static_cast<int64_t>(a.token) * q_stride + h0 * hd;
  float* out = s.out + static_cast<int64_t>(a.token) * q_stride + h0 * hd;
  const int64_t n_pos = static_cast<int64_t>(s.start_pos) + a.token + 1;

  for (int32_t g = 0; g < group; ++g) {
    m[g] = -std::numeric_limits<float>::infinity();
    l[g] = 0.0f;
    std::fill(acc + g * hd, acc + (g + 1) * hd, 0.0f);
  }
  std::vector<float> whole;  // only for the rare whole_row case
  if (whole_row) whole.resize(static_cast<size_t>(row_elems));

  for (int64_t p0 = 0; p0 < n_pos; p0 += bs) {
    const int64_t n = std::min<int64_t>(bs, n_pos - p0);
    const int64_t block = s.block_table[static_cast<size_t>(p0 / bs)];
    for (int64_t j = 0; j < n; ++j) {
      const int64_t slot = block * bs + j;
      const uint8_t* krow = cache.KRow(a.layer, slot);
      const uint8_t* vrow = cache.VRow(a.layer, slot);
      if (whole_row) {
        LoadKv<Ops>(cfg.dtype, krow, 0, row_elems, whole.data());
        std::memcpy(kbuf + j * hd, whole.data() + a.kv_head * hd, hd * sizeof(float));
        LoadKv<Ops>(cfg.dtype, vrow, 0, row_elems, whole.data());
        std::memcpy(vbuf + j * hd, whole.data() + a.kv_head * hd, hd * sizeof(float));
      } else {
        LoadKv<Ops>(cfg.dtype, krow, a.kv_head * hd, hd, kbuf + j * hd);
        LoadKv<Ops>(cfg.dtype, vrow, a.kv_head * hd, hd, vbuf + j * hd);
      }
    }
    for (int32_t g = 0; g < group; ++g) {
      float* sc = scores + g * bs;
      const float* qg = q + g * hd;
      float bmax = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < n; ++j) {
        sc[j] = Ops::Dot(qg, kbuf + j * hd, hd) * a.scale;
        bmax = std::max(bmax, sc[j]);
      }
      const float m_new = std::max(m[g], bmax);
      const float corr = std::exp(m[g] - m_new);  // exp(-inf) = 0 on the first block
      float* ag = acc + g * hd;
      if (corr != 1.0f) Ops::Scale(ag, corr, hd);
      float lsum = l[g] * corr;
      for (int64_t j = 0; j < n; ++j) {
        const float w = std::exp(sc[j] - m_new);
        lsum += w;
        Ops::Axpy(w, vbuf + j * hd, ag, hd);
      }
      l[g] = lsum;
      m[g] = m_new;
    }
  }
  for (int32_t g = 0; g < group; ++g) {
    const float inv = 1.0f / l[g];
    for (int64_t d = 0; d < hd; ++d) out[g * hd + d] = acc[g * hd + d] * inv;
  }
}

}  // namespace
}  // namespace kvs::kvcache::internal
