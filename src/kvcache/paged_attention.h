// Paged attention: causal softmax(q k^T * scale) v for every token of a
// ForwardBatch, K and V read through each sequence's block table from the
// KvCache in their stored dtype (no contiguous or dequantized copy of the
// cache). One code path serves prefill (many query tokens per sequence),
// chunked prefill (start_pos > 0) and decode (one token).
//
// How (attention_kernel.h): flash-style tiles. A work item is a block of
// query tokens x the query heads of one KV head's group (GQA: every K/V tile
// is loaded once for the whole group) against a range of keys; keys are
// visited in L1-sized tiles with an online softmax, and tiles wholly past
// the item's last query position (or before its first query's sliding
// window) are never visited. Items are balanced
// dynamically over the pool's threads, most expensive first. When there are
// too few items to keep every thread busy (decode of few sequences at
// depth), each item's key range is split and the partial softmax states are
// combined afterwards (flash decoding).
//
// Thread-safety: one Run at a time per object (it keeps its plan and scratch
// buffers between calls, so a steady state allocates nothing). The cache is
// only read.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "kvcache/attention_internal.h"
#include "kvcache/forward_batch.h"
#include "kvcache/kv_cache.h"

namespace kvs::kvcache {

struct AttentionParams {
  int32_t layer = 0;
  int32_t n_heads = 0;  // query heads; a multiple of the cache's n_kv_heads
  float scale = 1.0f;   // usually 1 / sqrt(head_dim)
  int32_t window = 0;   // > 0: sliding window, a query at p sees keys (p - window, p]
  float softcap = 0.0f; // > 0: scaled scores s -> softcap * tanh(s / softcap) before the softmax
};

class PagedAttention {
 public:
  enum class Variant { kAuto, kGeneric, kAvx2, kAvx512 };

  // kAuto picks the best variant the CPU supports (honouring
  // KVSERVE_FORCE_SCALAR through GetCpuFeatures). Others are for tests and
  // benchmarks. REQUIRES: Available(variant).
  explicit PagedAttention(Variant variant = Variant::kAuto);
  static bool Available(Variant variant);
  const char* variant_name() const { return kernel_.name; }

  // q, out: [batch.NumTokens(), n_heads * head_dim], rows in batch order
  // (forward_batch.h). The K/V of every batch token are already written.
  // REQUIRES: batch validated by the caller (block tables cover
  // start_pos + n positions with ids in range).
  void Run(const KvCache& cache, const AttentionParams& params, const ForwardBatch& batch, const float* q, float* out,
           ThreadPool& pool);

  // Below this many keys per part a key range is never split.
  static constexpr int32_t kMinSplitKeys = 256;
  // Decode rows (one-token chunks, and ForwardSeq::decode_rows chunks:
  // speculative verification) are attended one token per item with keys
  // split at fixed multiples of this, whatever the batch or the thread
  // count: a decoded token's attention is then the same alone, batched or
  // verified in a chunk (greedy output does not depend on the batch).
  static constexpr int32_t kDecodeSplitKeys = 2048;
  static bool DecodeLike(const ForwardSeq& s) { return s.tokens.size() == 1 || s.decode_rows; }

 private:
  // The partial results of one split item and where they go.
  struct Split {
    internal::AttnItem item;  // k0/k1/partial unused
    int32_t first_partial = 0, parts = 0;
  };
  void Plan(const KvCacheConfig& cfg, int32_t n_heads, int32_t window, const ForwardBatch& batch, int threads);
  // Items of tokens [t0, t0 + nt) of batch sequence si for every KV head
  // and head group over the key ranges bounds_ (split when more than one).
  void AddItems(int32_t si, int64_t row0, int32_t t0, int32_t nt, int32_t n_kv, int32_t group, int32_t nh);
  void PlanDecodeRows(const ForwardSeq& s, int32_t si, int64_t row0, int32_t n_kv, int32_t group, int32_t nh,
                      int32_t window);
  void Reduce(const internal::AttnContext& cx, int64_t head_dim);
  float* Scratch(int tid, int64_t floats);

  internal::KernelInfo kernel_;
  std::vector<internal::AttnItem> items_;
  std::vector<Split> splits_;
  int32_t num_partials_ = 0;
  std::vector<float> partials_;
  std::vector<std::unique_ptr<float[]>> scratch_;  // per thread, 64-byte aligned view below
  std::vector<int64_t> scratch_size_;
  std::atomic<int64_t> next_item_{0};
  int64_t cache_head_dim_ = 0;  // of the Run being planned
  std::vector<int32_t> bounds_;  // key range bounds of the item being planned
};

// The same computation, written plainly: one thread, per token and head,
// rows dequantized by KvCache::ReadK/ReadV, scores and softmax in double.
// The reference the tests check PagedAttention against.
void PagedAttentionReference(const KvCache& cache, const AttentionParams& params, const ForwardBatch& batch,
                             const float* q, float* out);

}  // namespace kvs::kvcache
