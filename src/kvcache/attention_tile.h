// K/V tile loading shared by the attention kernels (attention_kernel.h,
// attention_decode.h): rows of one KV head, read through a block table in
// their stored dtype and converted to an f32 tile in L1. Anonymous
// namespace: each per-ISA translation unit gets its own copy.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>

#include "base/fp16.h"
#include "kernels/lanes_ops.h"
#include "kvcache/kv_cache.h"

namespace kvs::kvcache::internal {
namespace {

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Converts `n` elements of a stored KV row, starting at element `first`, to
// f32. Q8_0 rows are 34-byte blocks of 32 (f16 scale, 32 x int8); Q4_0 rows
// 18-byte blocks of 32 (f16 scale d, 16 bytes: value j is (low nibble of
// byte j) - 8 times d, value j + 16 the high nibble's); Q4_1 rows 20-byte
// blocks (f16 d, f16 minimum m, the same nibbles: value q * d + m).
template <class V>
inline void LoadRow(DType type, const uint8_t* row, int64_t first, int64_t n, float* out) {
  switch (type) {
    case DType::kF32:
      std::memcpy(out, reinterpret_cast<const float*>(row) + first, static_cast<size_t>(n) * sizeof(float));
      return;
    case DType::kF16:
      kernels::F16RowToF32<V>(reinterpret_cast<const uint16_t*>(row) + first, out, n);
      return;
    case DType::kBF16:
      kernels::BF16RowToF32<V>(reinterpret_cast<const uint16_t*>(row) + first, out, n);
      return;
    case DType::kQ8_0:
      if (first % 32 == 0 && n % 32 == 0) {
        const uint8_t* blk = row + first / 32 * 34;
        for (int64_t b = 0; b < n / 32; ++b, blk += 34) {
          uint16_t d16;
          std::memcpy(&d16, blk, 2);
          kernels::I8BlockToF32<V>(reinterpret_cast<const int8_t*>(blk + 2), V::HalfToFloat(d16), out + b * 32);
        }
      } else {  // a head that is not whole blocks (small head_dim): element by element
        for (int64_t i = 0; i < n; ++i) {
          const int64_t e = first + i;
          const uint8_t* blk = row + e / 32 * 34;
          uint16_t d16;
          std::memcpy(&d16, blk, 2);
          out[i] = F16ToF32(d16) * static_cast<float>(static_cast<int8_t>(blk[2 + e % 32]));
        }
      }
      return;
    case DType::kQ4_0:
    case DType::kQ4_1: {
      // Q4_0: codes q - 8 times d; Q4_1: codes q times d, plus m.
      const bool q41 = type == DType::kQ4_1;
      const int64_t bytes = q41 ? 20 : 18, qs_at = q41 ? 4 : 2, bias = q41 ? 0 : 8;
      if (first % 32 == 0 && n % 32 == 0) {
        const uint8_t* blk = row + first / 32 * bytes;
        alignas(64) int8_t q[32];
        for (int64_t b = 0; b < n / 32; ++b, blk += bytes) {
          uint16_t d16, m16 = 0;
          std::memcpy(&d16, blk, 2);
          if (q41) std::memcpy(&m16, blk + 2, 2);
          const uint8_t* qs = blk + qs_at;
          for (int j = 0; j < 16; ++j) {
            q[j] = static_cast<int8_t>((qs[j] & 0x0F) - bias);
            q[j + 16] = static_cast<int8_t>((qs[j] >> 4) - bias);
          }
          float* o = out + b * 32;
          kernels::I8BlockToF32<V>(q, V::HalfToFloat(d16), o);
          if (q41) {
            const float m = V::HalfToFloat(m16);
            for (int j = 0; j < 32; ++j) o[j] += m;
          }
        }
      } else {  // heads that are not whole blocks: element by element
        for (int64_t i = 0; i < n; ++i) {
          const int64_t e = first + i;
          const uint8_t* blk = row + e / 32 * bytes;
          uint16_t d16, m16 = 0;
          std::memcpy(&d16, blk, 2);
          if (q41) std::memcpy(&m16, blk + 2, 2);
          const int j = static_cast<int>(e % 32);
          const int code = j < 16 ? blk[qs_at + j] & 0x0F : blk[qs_at + j - 16] >> 4;
          out[i] = F16ToF32(d16) * static_cast<float>(code - bias) + (q41 ? F16ToF32(m16) : 0.0f);
        }
      }
      return;
    }
    default:
      return;  // rejected by KvCacheConfig::Validate
  }
}

// `count` consecutive rows (stride `row_bytes`) -> out rows (stride
// `out_stride` floats): the dtype switch once per run, not per row.
template <class V>
inline void LoadRows(DType type, const uint8_t* row, int64_t row_bytes, int64_t count, int64_t first, int64_t n,
                     float* out, int64_t out_stride) {
  switch (type) {
    case DType::kF16:
      for (int64_t i = 0; i < count; ++i, row += row_bytes, out += out_stride) {
        kernels::F16RowToF32<V>(reinterpret_cast<const uint16_t*>(row) + first, out, n);
      }
      return;
    default:
      for (int64_t i = 0; i < count; ++i, row += row_bytes, out += out_stride) LoadRow<V>(type, row, first, n, out);
      return;
  }
}

// Loads keys [p0, p0 + n) of KV head `kv_head` into tile [n_padded][hdp]
// through the block table; rows and dims past the data are zero.
template <class V>
inline void LoadTile(const KvCache& cache, int32_t layer, bool values, std::span<const int32_t> table, int64_t p0,
                     int64_t n, int64_t n_padded, int32_t kv_head, int64_t hd, int64_t hdp, float* tile) {
  const int64_t bs = cache.config().block_size;
  const DType type = cache.config().dtype;
  for (int64_t j = 0; j < n;) {
    const int64_t p = p0 + j;
    const int64_t off = p % bs;
    const int64_t run = std::min(n - j, bs - off);
    const int32_t block = table[static_cast<size_t>(p / bs)];
    const HeadRows h = values ? cache.VHead(layer, block, kv_head) : cache.KHead(layer, block, kv_head);
    LoadRows<V>(type, h.data + off * h.stride, h.stride, run, h.first, hd, tile + j * hdp, hdp);
    j += run;
  }
  if (hdp > hd) {
    for (int64_t j = 0; j < n; ++j) std::fill(tile + j * hdp + hd, tile + (j + 1) * hdp, 0.0f);
  }
  std::memset(tile + n * hdp, 0, static_cast<size_t>((n_padded - n) * hdp) * sizeof(float));
}

// Prefetches (into L2) the K and V rows of keys [p0, p0 + n) of one KV head:
// the next tile's loads then find their lines in flight instead of stalling
// one row at a time.
inline void PrefetchTile(const KvCache& cache, int32_t layer, std::span<const int32_t> table, int64_t p0, int64_t n,
                         int32_t kv_head) {
  const int64_t bs = cache.config().block_size;
  for (int64_t j = 0; j < n;) {
    const int64_t p = p0 + j;
    const int64_t off = p % bs;
    const int64_t run = std::min(n - j, bs - off);
    const int32_t block = table[static_cast<size_t>(p / bs)];
    for (const HeadRows& h : {cache.KHead(layer, block, kv_head), cache.VHead(layer, block, kv_head)}) {
      const uint8_t* begin = h.data + off * h.stride;
      const uint8_t* end = begin + run * h.stride;
      for (const uint8_t* a = begin; a < end; a += 64) __builtin_prefetch(a, 0, 2);
    }
    j += run;
  }
}

}  // namespace
}  // namespace kvs::kvcache::internal
