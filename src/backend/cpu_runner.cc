#include "backend/cpu_runner.h"

namespace kvs::backend {

CpuRunner::CpuRunner(std::unique_ptr<model::LlamaModel> model, std::unique_ptr<kvcache::KvCache> cache,
                     std::unique_ptr<kvcache::KvCache> window_cache, int32_t block_size, int32_t num_blocks,
                     int threads)
    : model_(std::move(model)),
      cache_(std::move(cache)),
      window_cache_(std::move(window_cache)),
      block_size_(block_size),
      num_blocks_(num_blocks),
      pool_(threads) {}

StatusOr<std::unique_ptr<CpuRunner>> CpuRunner::Create(std::unique_ptr<model::LlamaModel> model,
                                                       const CpuRunnerOptions& o) {
  const model::ModelConfig& c = model->config();
  if (o.num_blocks <= 0) return OutOfRange("KV cache needs at least one block, got {}", o.num_blocks);
  if (o.num_window_blocks < 0) return OutOfRange("negative window block count {}", o.num_window_blocks);
  const int32_t sliding = o.num_window_blocks > 0 ? c.NumSlidingLayers() : 0;
  std::unique_ptr<kvcache::KvCache> cache, window_cache;
  if (c.n_layers - sliding > 0) {
    kvcache::KvCacheConfig kc{c.n_layers - sliding, c.n_kv_heads, c.head_dim, o.block_size, o.num_blocks, o.kv_dtype};
    KVS_ASSIGN_OR_RETURN(cache, kvcache::KvCache::Create(kc));
  }
  if (sliding > 0) {
    kvcache::KvCacheConfig kc{sliding, c.n_kv_heads, c.head_dim, o.block_size, o.num_window_blocks, o.kv_dtype};
    KVS_ASSIGN_OR_RETURN(window_cache, kvcache::KvCache::Create(kc));
  }
  if (o.max_batch_tokens <= 0) return InvalidArgument("max_batch_tokens must be positive");
  model->ReserveTokens(o.max_batch_tokens);
  return std::unique_ptr<CpuRunner>(new CpuRunner(std::move(model), std::move(cache), std::move(window_cache),
                                                  o.block_size, o.num_blocks, o.threads));
}

Status CpuRunner::Forward(const engine::ForwardBatch& batch, std::span<float> logits) {
  return model_->Forward(batch, model::LlamaModel::KvCaches{cache_.get(), window_cache_.get()}, logits, pool_);
}

}  // namespace kvs::backend
