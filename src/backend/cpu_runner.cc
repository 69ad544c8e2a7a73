#include "backend/cpu_runner.h"

namespace kvs::backend {

CpuRunner::CpuRunner(std::unique_ptr<model::LlamaModel> model, std::unique_ptr<kvcache::KvCache> cache,
                     int threads)
    : model_(std::move(model)), cache_(std::move(cache)), pool_(threads) {}

StatusOr<std::unique_ptr<CpuRunner>> CpuRunner::Create(std::unique_ptr<model::LlamaModel> model,
                                                       const CpuRunnerOptions& o) {
  const model::ModelConfig& c = model->config();
  kvcache::KvCacheConfig kc{c.n_layers, c.n_kv_heads, c.head_dim, o.block_size, o.num_blocks, o.kv_dtype};
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<kvcache::KvCache> cache, kvcache::KvCache::Create(kc));
  if (o.max_batch_tokens <= 0) return InvalidArgument("max_batch_tokens must be positive");
  model->ReserveTokens(o.max_batch_tokens);
  return std::unique_ptr<CpuRunner>(new CpuRunner(std::move(model), std::move(cache), o.threads));
}

Status CpuRunner::Forward(const engine::ForwardBatch& batch, std::span<float> logits) {
  return model_->Forward(batch, *cache_, logits, pool_);
}

}  // namespace kvs::backend
