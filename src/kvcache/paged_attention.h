// Paged attention: causal softmax(q k^T * scale) v where K and V are read
// through each sequence's block table from the KvCache (no contiguous copy).
// Serves prefill (many query tokens per sequence) and decode (one) alike.
// Numerically stable: an online softmax, rescaled once per KV block.
// GQA/MQA: query head h reads KV head h / (n_heads / n_kv_heads); each KV row
// is converted to f32 once and used by every query head of its group.
// Work is split over (sequence, token, kv head) items across the pool,
// interleaved so causal prefill stays balanced.
#pragma once

#include <cstdint>
#include <span>

#include "base/thread_pool.h"
#include "kvcache/kv_cache.h"

namespace kvs::kvcache {

struct AttentionSeq {
  const float* q = nullptr;  // [n_tokens, n_heads * head_dim], RoPE applied
  float* out = nullptr;      // [n_tokens, n_heads * head_dim]
  int32_t n_tokens = 0;
  int32_t start_pos = 0;     // query i sits at start_pos + i and sees [0, start_pos + i]
  std::span<const int32_t> block_table;
};

struct AttentionParams {
  int32_t layer = 0;
  int32_t n_heads = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)
};

void PagedAttention(const KvCache& cache, const AttentionParams& params,
                    std::span<const AttentionSeq> seqs, ThreadPool& pool);

// The same computation, one scalar thread, one variant: for tests.
void PagedAttentionReference(const KvCache& cache, const AttentionParams& params,
                             std::span<const AttentionSeq> seqs);

namespace internal {
struct AttendArgs;
using AttendFn = void (*)(const AttendArgs&);
AttendFn AttendScalar();
AttendFn AttendAvx2();  // nullptr when not compiled in
}  // namespace internal

}  // namespace kvs::kvcache
