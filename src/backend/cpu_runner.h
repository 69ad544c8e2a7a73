// CpuRunner: the CPU backend's engine::ModelRunner (RunnerFactories()'s "cpu"). Owns the model, the KV
// block storage and the thread pool; passes the engine's batch to the model.
// With num_window_blocks > 0 and a model with sliding-window layers, the KV
// storage is two groups (engine/model_runner.h): a cache of num_blocks
// blocks for the global layers (none when every layer slides: its blocks
// are then bookkeeping only) and one of num_window_blocks for the sliding
// layers. Otherwise one cache holds every layer.
// Thread-safety: used only by the engine thread.
#pragma once

#include <memory>

#include "backend/runner_options.h"
#include "base/thread_pool.h"
#include "engine/model_runner.h"
#include "kvcache/kv_cache.h"
#include "model/llama.h"

namespace kvs::backend {

// The device-neutral geometry (runner_factory.h); threads size the pool.
using CpuRunnerOptions = RunnerOptions;

class CpuRunner : public engine::ModelRunner {
 public:
  static StatusOr<std::unique_ptr<CpuRunner>> Create(std::unique_ptr<model::LlamaModel> model,
                                                     const CpuRunnerOptions& options);

  int32_t vocab_size() const override { return model_->config().vocab; }
  int32_t block_size() const override { return block_size_; }
  int32_t num_blocks() const override { return num_blocks_; }
  int32_t window() const override { return window_cache_ ? model_->config().sliding_window : 0; }
  int32_t num_window_blocks() const override { return window_cache_ ? window_cache_->config().num_blocks : 0; }
  Status Forward(const engine::ForwardBatch& batch, std::span<float> logits) override;
  void ReleaseBlocks(std::span<const int32_t> block_ids) override {
    if (cache_) cache_->Release(block_ids);
  }
  void ReleaseWindowBlocks(std::span<const int32_t> block_ids) override {
    if (window_cache_) window_cache_->Release(block_ids);
  }
  std::span<const uint8_t> BlockBytes(int32_t block_id) const override {
    if (!cache_ || window_cache_) return {};
    return cache_->BlockBytes(block_id);
  }
  bool LoadBlock(int32_t block_id, std::span<const uint8_t> bytes) override {
    if (!cache_ || window_cache_ || bytes.size() != cache_->BlockBytes(block_id).size()) return false;
    cache_->LoadBlock(block_id, bytes);
    return true;
  }
  int64_t kv_committed_bytes() const override {
    return (cache_ ? cache_->committed_bytes() : 0) + (window_cache_ ? window_cache_->committed_bytes() : 0);
  }

  model::LlamaModel& model() { return *model_; }
  // The global layers' cache (every layer's without a window group); nullptr
  // when every layer slides in a window group.
  const kvcache::KvCache* cache() const { return cache_.get(); }
  const kvcache::KvCache* window_cache() const { return window_cache_.get(); }
  ThreadPool& pool() { return pool_; }

 private:
  CpuRunner(std::unique_ptr<model::LlamaModel> model, std::unique_ptr<kvcache::KvCache> cache,
            std::unique_ptr<kvcache::KvCache> window_cache, int32_t block_size, int32_t num_blocks, int threads);

  std::unique_ptr<model::LlamaModel> model_;
  std::unique_ptr<kvcache::KvCache> cache_;
  std::unique_ptr<kvcache::KvCache> window_cache_;
  int32_t block_size_;
  int32_t num_blocks_;
  ThreadPool pool_;
};

}  // namespace kvs::backend
