#include "kvcache/paged_attention.h"

#include <vector>

#include "base/cpu.h"
#include "kvcache/paged_attention_impl.h"

namespace kvs::kvcache {
namespace {

internal::AttendFn ChooseAttend() {
  const CpuFeatures& f = GetCpuFeatures();
  if (f.avx2 && f.fma && f.f16c) return internal::AttendAvx2();
  return internal::AttendScalar();
}

// Items are (sequence, token, kv head) triples, flattened.
struct ItemIndex {
  std::vector<int32_t> seq_of_token;  // [total_tokens]
  std::vector<int32_t> token_in_seq;  // [total_tokens]
};

ItemIndex IndexTokens(std::span<const AttentionSeq> seqs) {
  ItemIndex ix;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int32_t t = 0; t < seqs[s].n_tokens; ++t) {
      ix.seq_of_token.push_back(static_cast<int32_t>(s));
      ix.token_in_seq.push_back(t);
    }
  }
  return ix;
}

void RunItems(internal::AttendFn fn, const KvCache& cache, const AttentionParams& p,
              std::span<const AttentionSeq> seqs, int tid, int nth, const ItemIndex& ix) {
  thread_local std::vector<float> scratch;  // per pool thread
  const KvCacheConfig& cfg = cache.config();
  const int32_t n_kv = cfg.n_kv_heads;
  const int64_t n_items = static_cast<int64_t>(ix.seq_of_token.size()) * n_kv;
  const int32_t group = p.n_heads / n_kv;
  scratch.resize(static_cast<size_t>(internal::ScratchFloats(cfg.head_dim, group, cfg.block_size)));
  internal::AttendArgs a{};
  a.cache = &cache;
  a.layer = p.layer;
  a.n_heads = p.n_heads;
  a.scale = p.scale;
  a.scratch = scratch.data();
  // Interleaved assignment keeps causal prefill balanced across threads.
  for (int64_t item = tid; item < n_items; item += nth) {
    const int64_t tok = item / n_kv;
    a.kv_head = static_cast<int32_t>(item % n_kv);
    a.seq = &seqs[static_cast<size_t>(ix.seq_of_token[static_cast<size_t>(tok)])];
    a.token = ix.token_in_seq[static_cast<size_t>(tok)];
    fn(a);
  }
}

}  // namespace

void PagedAttention(const KvCache& cache, const AttentionParams& params,
                    std::span<const AttentionSeq> seqs, ThreadPool& pool) {
  static const internal::AttendFn fn = ChooseAttend();
  KVS_CHECK(params.n_heads % cache.config().n_kv_heads == 0);
  const ItemIndex ix = IndexTokens(seqs);
  pool.Run([&](int tid, int nth) { RunItems(fn, cache, params, seqs, tid, nth, ix); });
}

void PagedAttentionReference(const KvCache& cache, const AttentionParams& params,
                             std::span<const AttentionSeq> seqs) {
  KVS_CHECK(params.n_heads % cache.config().n_kv_heads == 0);
  const ItemIndex ix = IndexTokens(seqs);
  RunItems(internal::AttendScalar(), cache, params, seqs, 0, 1, ix);
}

}  // namespace kvs::kvcache
