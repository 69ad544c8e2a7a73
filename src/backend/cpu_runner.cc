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

Status CpuRunner::Run(const engine::ForwardBatch& batch, std::span<float> logits, model::LogitsMode mode) {
  slices_.clear();
  for (const engine::ForwardSeq& s : batch.seqs) {
    slices_.push_back({s.tokens, s.start_pos, s.block_table, s.want_logits});
  }
  return model_->Forward(slices_, *cache_, logits, mode, pool_);
}

Status CpuRunner::Forward(const engine::ForwardBatch& batch, std::span<float> logits) {
  return Run(batch, logits, model::LogitsMode::kLastOfWanted);
}

Status CpuRunner::ForwardAllLogits(const engine::ForwardBatch& batch, std::span<float> logits) {
  return Run(batch, logits, model::LogitsMode::kAllTokens);
}

}  // namespace kvs::backend
