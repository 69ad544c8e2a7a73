#include "kvcache/paged_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "base/cpu.h"
#include "base/status.h"

namespace kvs::kvcache {
namespace {

internal::KernelInfo KernelFor(PagedAttention::Variant v) {
  switch (v) {
    case PagedAttention::Variant::kGeneric: return internal::KernelGeneric();
    case PagedAttention::Variant::kAvx2: return internal::KernelAvx2();
    case PagedAttention::Variant::kAvx512: return internal::KernelAvx512();
    case PagedAttention::Variant::kAuto: break;
  }
  for (auto c : {PagedAttention::Variant::kAvx512, PagedAttention::Variant::kAvx2}) {
    if (PagedAttention::Available(c)) return KernelFor(c);
  }
  return internal::KernelGeneric();
}

constexpr float kLog2E = 1.4426950408889634f;

}  // namespace

bool PagedAttention::Available(Variant v) {
  const CpuFeatures& f = GetCpuFeatures();
  switch (v) {
    case Variant::kAuto: case Variant::kGeneric: return true;
    case Variant::kAvx2: return f.avx2 && f.fma && f.f16c;
    case Variant::kAvx512: return f.avx2 && f.fma && f.f16c && f.avx512f && f.avx512bw && f.avx512vl;
  }
  return false;
}

PagedAttention::PagedAttention(Variant variant) : kernel_(KernelFor(variant)) {
  KVS_CHECK(Available(variant));
}

float* PagedAttention::Scratch(int tid, int64_t floats) {
  const auto t = static_cast<size_t>(tid);
  if (scratch_size_[t] < floats) {
    scratch_[t] = std::make_unique<float[]>(static_cast<size_t>(floats + 16));
    scratch_size_[t] = floats;
  }
  auto addr = reinterpret_cast<uintptr_t>(scratch_[t].get());
  return reinterpret_cast<float*>((addr + 63) & ~uintptr_t{63});
}

void PagedAttention::Plan(const KvCacheConfig& cfg, int32_t n_heads, int32_t window, const ForwardBatch& batch,
                          int threads) {
  cache_head_dim_ = cfg.head_dim;
  items_.clear();
  splits_.clear();
  num_partials_ = 0;
  const int32_t n_kv = cfg.n_kv_heads;
  const int32_t group = n_heads / n_kv;
  const int32_t nh = std::min(group, kernel_.max_rows);
  const int32_t head_splits = (group + nh - 1) / nh;
  const int32_t nt_max = std::max(1, kernel_.max_rows / nh);
  int64_t base_items = 0;
  for (const ForwardSeq& s : batch.seqs) {
    if (DecodeLike(s)) continue;  // fixed items, below
    base_items += (static_cast<int64_t>(s.tokens.size()) + nt_max - 1) / nt_max * n_kv * head_splits;
  }
  // Enough items for dynamic balancing; fewer means split key ranges.
  const int64_t target = 4 * static_cast<int64_t>(threads);
  const int64_t want_parts =
      threads > 1 && base_items > 0 && base_items < target ? (target + base_items - 1) / base_items : 1;

  int64_t row0 = 0;
  for (size_t si = 0; si < batch.seqs.size(); ++si) {
    const ForwardSeq& s = batch.seqs[si];
    const auto n = static_cast<int32_t>(s.tokens.size());
    // Every block a query reads is there; ones before the first query's
    // window may be freed (-1: engine/block_manager.h) and are never read.
    const int32_t first_block = window > 0 ? std::max(0, s.start_pos + 1 - window) / cfg.block_size : 0;
    for (int32_t b = first_block; b < (s.start_pos + n + cfg.block_size - 1) / cfg.block_size; ++b) {
      KVS_CHECK_MSG(s.block_table[static_cast<size_t>(b)] >= 0, "attention would read freed KV block entry {}", b);
    }
    if (DecodeLike(s)) {
      PlanDecodeRows(s, static_cast<int32_t>(si), row0, n_kv, group, nh, window);
      row0 += n;
      continue;
    }
    for (int32_t t0 = 0; t0 < n; t0 += nt_max) {
      const int32_t nt = std::min(nt_max, n - t0);
      const int32_t visible_all = s.start_pos + t0 + 1;  // causally, keys [0, visible_all) are seen by every row
      const int32_t k_end = s.start_pos + t0 + nt;
      // The first row's sliding window starts here; no row sees a key before.
      const int32_t k_begin = window > 0 ? std::max(0, visible_all - window) : 0;
      const auto parts = static_cast<int32_t>(std::max<int64_t>(
          1, std::min<int64_t>(want_parts, (visible_all - k_begin) / kMinSplitKeys)));
      bounds_.clear();
      bounds_.push_back(k_begin);
      const int64_t span = visible_all - k_begin;
      for (int32_t p = 1; p < parts; ++p) bounds_.push_back(k_begin + static_cast<int32_t>(span * p / parts));
      bounds_.push_back(k_end);
      AddItems(static_cast<int32_t>(si), row0, t0, nt, n_kv, group, nh);
    }
    row0 += n;
  }
  // One KV head's items in a row, most expensive first: consecutive items
  // reread the same K/V (it stays in L2), and the cheapest ones end the list
  // so the threads finish together.
  std::sort(items_.begin(), items_.end(), [](const internal::AttnItem& a, const internal::AttnItem& b) {
    if (a.kv_head != b.kv_head) return a.kv_head < b.kv_head;
    return a.cost > b.cost;
  });
}

void PagedAttention::AddItems(int32_t si, int64_t row0, int32_t t0, int32_t nt, int32_t n_kv, int32_t group,
                              int32_t nh) {
  const auto parts = static_cast<int32_t>(bounds_.size()) - 1;
  for (int32_t kvh = 0; kvh < n_kv; ++kvh) {
    for (int32_t h0 = 0; h0 < group; h0 += nh) {
      internal::AttnItem it;
      it.seq = si;
      it.kv_head = kvh;
      it.head0 = h0;
      it.nh = std::min(nh, group - h0);
      it.t0 = t0;
      it.nt = nt;
      it.row0 = row0;
      if (parts > 1) splits_.push_back({it, num_partials_, parts});
      for (int32_t p = 0; p < parts; ++p) {
        internal::AttnItem part = it;
        part.k0 = bounds_[static_cast<size_t>(p)];
        part.k1 = bounds_[static_cast<size_t>(p) + 1];
        part.partial = parts > 1 ? num_partials_++ : -1;
        part.cost = static_cast<int64_t>(nt) * it.nh * (part.k1 - part.k0);
        items_.push_back(part);
      }
    }
  }
}

void PagedAttention::PlanDecodeRows(const ForwardSeq& s, int32_t si, int64_t row0, int32_t n_kv, int32_t group,
                                    int32_t nh, int32_t window) {
  // One item per token (and KV head, head group): the rows a decode of that
  // token has; keys split at fixed multiples of kDecodeSplitKeys, whatever
  // else the batch holds or the thread count, so a token's result depends
  // on its own position only.
  // Consecutive tokens may share an item (their K/V tiles loaded once) when
  // it stays in the few-rows kernel, whose rows do not affect each other,
  // and their keys split alike; not with a window, whose start moves per row.
  const auto n = static_cast<int32_t>(s.tokens.size());
  const int64_t hd = cache_head_dim_;
  for (int32_t t = 0, nt = 1; t < n; t += nt) {
    const int32_t k_end_first = s.start_pos + t + 1;
    nt = 1;
    while (window == 0 && t + nt < n && kernel_.dot_fits(static_cast<int64_t>(nt + 1) * nh, hd) &&
           nh == group && (k_end_first + nt - 1) / kDecodeSplitKeys == (k_end_first - 1) / kDecodeSplitKeys) {
      ++nt;
    }
    const int32_t k_end = k_end_first + nt - 1;
    const int32_t k_begin = window > 0 ? std::max(0, k_end_first - window) : 0;
    const int32_t first = k_begin / kDecodeSplitKeys, last = (k_end - 1) / kDecodeSplitKeys;
    bounds_.clear();
    bounds_.push_back(k_begin);
    for (int32_t p = first + 1; p <= last; ++p) bounds_.push_back(p * kDecodeSplitKeys);
    bounds_.push_back(k_end);
    AddItems(si, row0, t, nt, n_kv, group, nh);
  }
}

void PagedAttention::Reduce(const internal::AttnContext& cx, int64_t hd) {
  const int64_t slot = internal::PartialFloats(kernel_.max_rows, hd);
  for (const Split& sp : splits_) {
    const internal::AttnItem& it = sp.item;
    const int64_t rows = static_cast<int64_t>(it.nt) * it.nh;
    const int64_t h_first = static_cast<int64_t>(it.kv_head) * cx.group + it.head0;
    for (int64_t r = 0; r < rows; ++r) {
      float m = -INFINITY;
      for (int32_t p = 0; p < sp.parts; ++p) {
        m = std::max(m, internal::PartialAt(partials_.data() + (sp.first_partial + p) * slot, rows).m[r]);
      }
      float* out = cx.out + (it.row0 + it.t0 + r / it.nh) * cx.q_stride + (h_first + r % it.nh) * hd;
      std::fill(out, out + hd, 0.0f);
      float l = 0.0f;
      for (int32_t p = 0; p < sp.parts; ++p) {
        const internal::PartialView pv = internal::PartialAt(partials_.data() + (sp.first_partial + p) * slot, rows);
        const float w = std::exp2(pv.m[r] - m);
        l += w * pv.l[r];
        for (int64_t d = 0; d < hd; ++d) out[d] += w * pv.o[r * hd + d];
      }
      const float inv = 1.0f / l;
      for (int64_t d = 0; d < hd; ++d) out[d] *= inv;
    }
  }
}

void PagedAttention::Run(const KvCache& cache, const AttentionParams& params, const ForwardBatch& batch,
                         const float* q, float* out, ThreadPool& pool) {
  const KvCacheConfig& cfg = cache.config();
  KVS_CHECK(params.n_heads > 0 && params.n_heads % cfg.n_kv_heads == 0);
  if (batch.NumTokens() == 0) return;
  const int threads = pool.size();
  KVS_CHECK(params.window >= 0 && params.softcap >= 0.0f);
  Plan(cfg, params.n_heads, params.window, batch, threads);

  internal::AttnContext cx;
  cx.cache = &cache;
  cx.batch = &batch;
  cx.q = q;
  cx.out = out;
  cx.layer = params.layer;
  cx.group = params.n_heads / cfg.n_kv_heads;
  cx.q_stride = static_cast<int64_t>(params.n_heads) * cfg.head_dim;
  cx.scale_log2 = params.scale * kLog2E;
  cx.window = params.window;
  cx.softcap_log2 = params.softcap * kLog2E;

  const int64_t slot = internal::PartialFloats(kernel_.max_rows, cfg.head_dim);
  if (static_cast<int64_t>(partials_.size()) < num_partials_ * slot) {
    partials_.resize(static_cast<size_t>(num_partials_ * slot));
  }
  if (scratch_.size() < static_cast<size_t>(threads)) {
    scratch_.resize(static_cast<size_t>(threads));
    scratch_size_.resize(static_cast<size_t>(threads), 0);
  }
  const int64_t scratch_floats = kernel_.scratch_floats(cfg.head_dim);
  for (int t = 0; t < threads; ++t) Scratch(t, scratch_floats);  // allocate outside the workers

  next_item_.store(0, std::memory_order_relaxed);
  const auto n_items = static_cast<int64_t>(items_.size());
  auto work = [&](int tid, int) {
    float* scratch = Scratch(tid, scratch_floats);
    for (;;) {
      const int64_t i = next_item_.fetch_add(1, std::memory_order_relaxed);
      if (i >= n_items) return;
      const internal::AttnItem& it = items_[static_cast<size_t>(i)];
      kernel_.attend(cx, it, it.partial < 0 ? nullptr : partials_.data() + it.partial * slot, scratch);
    }
  };
  if (n_items == 1 || threads == 1) {
    work(0, 1);
  } else {
    pool.Run(work);
  }
  Reduce(cx, cfg.head_dim);
}

void PagedAttentionReference(const KvCache& cache, const AttentionParams& params, const ForwardBatch& batch,
                             const float* q, float* out) {
  const KvCacheConfig& cfg = cache.config();
  KVS_CHECK(params.n_heads > 0 && params.n_heads % cfg.n_kv_heads == 0);
  const int64_t hd = cfg.head_dim, bs = cfg.block_size, row = cfg.RowElems();
  const int32_t group = params.n_heads / cfg.n_kv_heads;
  const int64_t stride = static_cast<int64_t>(params.n_heads) * hd;
  int64_t token_row = 0;
  for (const ForwardSeq& s : batch.seqs) {
    // Dequantized K and V of every position the sequence's tokens see, [pos][row].
    const int64_t total = s.start_pos + static_cast<int64_t>(s.tokens.size());
    std::vector<float> ks(static_cast<size_t>(total * row)), vs(static_cast<size_t>(total * row));
    // Keys before the first token's window are never read (their blocks may be freed).
    const int64_t first_read = params.window > 0 ? std::max<int64_t>(0, s.start_pos + 1 - params.window) : 0;
    for (int64_t p = first_read; p < total; ++p) {
      const int64_t slot = static_cast<int64_t>(s.block_table[static_cast<size_t>(p / bs)]) * bs + p % bs;
      cache.ReadK(params.layer, slot, ks.data() + p * row);
      cache.ReadV(params.layer, slot, vs.data() + p * row);
    }
    for (size_t t = 0; t < s.tokens.size(); ++t, ++token_row) {
      const int64_t n_pos = s.start_pos + static_cast<int64_t>(t) + 1;
      for (int32_t h = 0; h < params.n_heads; ++h) {
        const float* qh = q + token_row * stride + h * hd;
        const int64_t kv_off = static_cast<int64_t>(h / group) * hd;
        std::vector<double> w(static_cast<size_t>(n_pos));
        double mx = -INFINITY;
        const int64_t first = params.window > 0 ? std::max<int64_t>(0, n_pos - params.window) : 0;
        for (int64_t p = 0; p < n_pos; ++p) {
          if (p < first) {
            w[static_cast<size_t>(p)] = -INFINITY;
            continue;
          }
          double dot = 0.0;
          for (int64_t d = 0; d < hd; ++d) dot += static_cast<double>(qh[d]) * ks[static_cast<size_t>(p * row + kv_off + d)];
          w[static_cast<size_t>(p)] = dot * params.scale;
          if (params.softcap > 0.0f) w[static_cast<size_t>(p)] = params.softcap * std::tanh(dot * params.scale / params.softcap);
          mx = std::max(mx, w[static_cast<size_t>(p)]);
        }
        double sum = 0.0;
        for (double& x : w) sum += (x = std::exp(x - mx));
        std::vector<double> acc(static_cast<size_t>(hd), 0.0);
        for (int64_t p = 0; p < n_pos; ++p) {
          const float* v = vs.data() + p * row + kv_off;
          for (int64_t d = 0; d < hd; ++d) acc[static_cast<size_t>(d)] += w[static_cast<size_t>(p)] * v[d];
        }
        float* o = out + token_row * stride + h * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] = static_cast<float>(acc[static_cast<size_t>(d)] / sum);
      }
    }
  }
}

}  // namespace kvs::kvcache
