// CpuRunner: the CPU backend's engine::ModelRunner. Owns the model, the KV
// block storage and the thread pool; passes the engine's batch to the model.
// Thread-safety: used only by the engine thread.
#pragma once

#include <memory>

#include "base/thread_pool.h"
#include "engine/model_runner.h"
#include "kvcache/kv_cache.h"
#include "model/llama.h"

namespace kvs::backend {

struct CpuRunnerOptions {
  int threads = 0;                  // 0: all cores
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  DType kv_dtype = DType::kF16;
  int64_t max_batch_tokens = 2048;  // activation buffers are sized for this
};

class CpuRunner : public engine::ModelRunner {
 public:
  static StatusOr<std::unique_ptr<CpuRunner>> Create(std::unique_ptr<model::LlamaModel> model,
                                                     const CpuRunnerOptions& options);

  int32_t vocab_size() const override { return model_->config().vocab; }
  int32_t block_size() const override { return cache_->config().block_size; }
  int32_t num_blocks() const override { return cache_->config().num_blocks; }
  Status Forward(const engine::ForwardBatch& batch, std::span<float> logits) override;
  void ReleaseBlocks(std::span<const int32_t> block_ids) override { cache_->Release(block_ids); }
  int64_t kv_committed_bytes() const override { return cache_->committed_bytes(); }

  model::LlamaModel& model() { return *model_; }
  const kvcache::KvCache& cache() const { return *cache_; }
  ThreadPool& pool() { return pool_; }

 private:
  CpuRunner(std::unique_ptr<model::LlamaModel> model, std::unique_ptr<kvcache::KvCache> cache, int threads);

  std::unique_ptr<model::LlamaModel> model_;
  std::unique_ptr<kvcache::KvCache> cache_;
  ThreadPool pool_;
};

}  // namespace kvs::backend
