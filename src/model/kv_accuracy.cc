#include "model/kv_accuracy.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>

#include "kvcache/kv_cache.h"

namespace kvs::model {
namespace {

int32_t Argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace

StatusOr<std::vector<KvAccuracy>> MeasureKvAccuracy(LlamaModel& model, std::span<const int32_t> prompt,
                                                    std::span<const DType> dtypes, int32_t chunk,
                                                    int32_t greedy_tokens, ThreadPool& pool) {
  const ModelConfig& c = model.config();
  if (prompt.empty()) return InvalidArgument("empty prompt");
  if (chunk <= 0) return InvalidArgument("chunk must be positive, got {}", chunk);
  if (greedy_tokens < 0) return InvalidArgument("greedy_tokens must be >= 0, got {}", greedy_tokens);
  const int64_t total = static_cast<int64_t>(prompt.size()) + greedy_tokens;
  const int32_t block = 16;
  kvcache::KvCacheConfig kc;
  kc.num_layers = c.n_layers;
  kc.n_kv_heads = c.n_kv_heads;
  kc.head_dim = c.head_dim;
  kc.block_size = block;
  kc.num_blocks = static_cast<int32_t>(total / block + 1);
  std::vector<int32_t> table(static_cast<size_t>(kc.num_blocks));
  std::iota(table.begin(), table.end(), 0);

  // caches[0] holds f32 K/V, the reference; caches[i + 1] dtypes[i].
  std::vector<std::unique_ptr<kvcache::KvCache>> caches;
  std::vector<DType> all = {DType::kF32};
  all.insert(all.end(), dtypes.begin(), dtypes.end());
  for (DType d : all) {
    kc.dtype = d;
    KVS_ASSIGN_OR_RETURN(std::unique_ptr<kvcache::KvCache> cache, kvcache::KvCache::Create(kc));
    caches.push_back(std::move(cache));
  }
  model.ReserveTokens(chunk);
  const int64_t V = c.vocab;
  std::vector<KvAccuracy> out(dtypes.size());
  for (size_t i = 0; i < dtypes.size(); ++i) out[i].dtype = dtypes[i];
  std::vector<double> sum_dev(dtypes.size(), 0.0);
  std::vector<int64_t> agree(dtypes.size(), 0);
  double max_ref = 0.0;

  // [chunk, vocab] logits of the reference and of the dtype under test.
  std::vector<float> ref(static_cast<size_t>(chunk * V)), got(static_cast<size_t>(chunk * V));
  for (int64_t p = 0; p < static_cast<int64_t>(prompt.size()); p += chunk) {
    const int64_t n = std::min<int64_t>(chunk, static_cast<int64_t>(prompt.size()) - p);
    kvcache::ForwardBatch s;
    s.seqs.push_back({0, prompt.subspan(static_cast<size_t>(p), static_cast<size_t>(n)), static_cast<int32_t>(p), table,
                      true, true});
    const std::span<float> ref_rows(ref.data(), static_cast<size_t>(n * V));
    KVS_RETURN_IF_ERROR(model.Forward(s, *caches[0], ref_rows, pool));
    for (float v : ref_rows) max_ref = std::max(max_ref, std::fabs(static_cast<double>(v)));
    for (size_t i = 0; i < dtypes.size(); ++i) {
      const std::span<float> rows(got.data(), static_cast<size_t>(n * V));
      KVS_RETURN_IF_ERROR(model.Forward(s, *caches[i + 1], rows, pool));
      for (int64_t t = 0; t < n; ++t) {
        const float* a = ref.data() + t * V;
        const float* b = got.data() + t * V;
        double row_sum = 0.0;
        for (int64_t j = 0; j < V; ++j) {
          const double d = std::fabs(static_cast<double>(a[j]) - b[j]);
          out[i].max_abs_logit_dev = std::max(out[i].max_abs_logit_dev, d);
          row_sum += d;
        }
        sum_dev[i] += row_sum / static_cast<double>(V);
        agree[i] += Argmax(a, V) == Argmax(b, V);
      }
    }
  }
  const int64_t L = static_cast<int64_t>(prompt.size());
  for (size_t i = 0; i < dtypes.size(); ++i) {
    out[i].positions = L;
    out[i].max_abs_logit = max_ref;
    out[i].mean_abs_logit_dev = sum_dev[i] / static_cast<double>(L);
    out[i].argmax_agreement = static_cast<double>(agree[i]) / static_cast<double>(L);
  }

  // Greedy continuations, each cache on its own, from the prompt's last logits.
  std::vector<std::vector<int32_t>> gen(all.size());
  for (size_t k = 0; k < all.size(); ++k) {
    std::vector<float> logits(static_cast<size_t>(V));
    // Recompute the last prompt position's logits from this cache's own
    // state (its K/V for positions < L - 1 are already stored).
    int32_t last = prompt.back();
    int32_t pos = static_cast<int32_t>(L - 1);
    for (int32_t g = 0; g < greedy_tokens; ++g) {
      kvcache::ForwardBatch s;
      s.seqs.push_back({0, std::span<const int32_t>(&last, 1), pos, table, true});
      KVS_RETURN_IF_ERROR(model.Forward(s, *caches[k], logits, pool));
      last = Argmax(logits.data(), V);
      gen[k].push_back(last);
      ++pos;
    }
  }
  for (size_t i = 0; i < dtypes.size(); ++i) {
    out[i].greedy_tokens = greedy_tokens;
    int32_t same = 0;
    while (same < greedy_tokens && gen[i + 1][static_cast<size_t>(same)] == gen[0][static_cast<size_t>(same)]) ++same;
    out[i].greedy_identical_prefix = same;
  }
  return out;
}

}  // namespace kvs::model
