// LlamaModel: the forward pass of the Llama family and its relatives
// (`llama`, `qwen2`, `qwen3`, `phi3`, `gemma2`, `gemma3`: they differ by QKV
// bias, per-head Q/K norm, RoPE pair layout and scaling, fused tensors,
// embedding scale, FFN activation, post-norms, soft-capping and sliding
// windows, all of which ModelConfig flags select; `qwen3moe`, `qwen2moe` and
// Mixtral-style `llama` replace the FFN by MoeFfn, model/moe.h).
//
// Forward() runs a ForwardBatch (kvcache/forward_batch.h) in one pass: every
// matmul sees all tokens of the batch at once ([tokens, features]
// activations, rows in batch order); K/V of every token are written into the
// paged KvCache through each sequence's block table, and attention reads
// them back through it. With KvCaches::window set, sliding-window layers keep
// their K/V in a cache of their own, through ForwardSeq::window_block_table
// (engine/block_manager.h frees its blocks as they leave the window).
// Thread-safety: Forward mutates the activation buffers and the cache; call
// it from one thread (the engine thread). The weights are immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/collective.h"
#include "base/thread_pool.h"
#include "gguf/gguf.h"
#include "kvcache/forward_batch.h"
#include "kvcache/kv_cache.h"
#include "kvcache/paged_attention.h"
#include "model/config.h"
#include "model/moe.h"
#include "model/weights.h"

namespace kvs::model {

class LlamaModel {
 public:
  // Opens and validates a GGUF model file (kept mapped for the model's life).
  static StatusOr<std::unique_ptr<LlamaModel>> Load(const std::string& path, const LoadOptions& options = {});
  // Uses an already opened file; the model takes ownership.
  static StatusOr<std::unique_ptr<LlamaModel>> FromFile(std::unique_ptr<gguf::GgufFile> file,
                                                        const LoadOptions& options = {});

  // The shape this process computes: with LoadOptions::shard_count > 1,
  // n_heads, n_kv_heads and ffn are this rank's share (the KV cache is sized
  // by them).
  const ModelConfig& config() const { return config_; }
  // Tensor parallel: the group that sums the partial outputs of the
  // attention output and FFN down projections (one all-reduce each per
  // layer). Required when the model was loaded as a shard; not owned.
  void SetCollective(Collective* collective) { collective_ = collective; }
  int shard_count() const { return shard_count_; }
  // Pipeline parallel (the model loaded with a layer range): where this
  // stage's input comes from and its output goes, as ranks of `world`.
  // prev < 0: the first stage (it embeds the tokens); next < 0: the last
  // (it computes the logits, and with logits_to >= 0 sends them there:
  // rank 0 samples). Tags: kActivationTag for the [tokens, hidden]
  // residual stream stage to stage, kLogitsTag for logits.
  static constexpr int kActivationTag = 1;
  static constexpr int kLogitsTag = 2;
  // Within a tensor-parallel group: each rank's rows of the vocabulary's
  // logits, to the group's rank 0 (GatherVocabLogits).
  static constexpr int kVocabTag = 3;
  struct PipelineLinks {
    Collective* world = nullptr;
    int prev = -1;
    int next = -1;
    int logits_to = -1;
  };
  void SetPipeline(const PipelineLinks& links) { pipeline_ = links; }
  bool is_pipeline_stage() const { return pipeline_.world != nullptr; }
  const gguf::GgufFile& file() const { return *file_; }
  uint64_t weight_bytes() const { return weights_->total_bytes; }
  // Bytes of the BF16 copies of float matrices (LoadOptions), 0 without.
  uint64_t bf16_weight_bytes() const { return weights_->bf16_bytes; }
  uint64_t float_copy_weight_bytes() const { return weights_->float_copy_bytes; }
  // Mixture-of-experts models: routings per expert so far (moe.h); empty otherwise.
  const std::vector<int64_t>& expert_counts() const { return moe_.expert_counts(); }

  // The longest sequence this model will serve (default: the trained
  // context). LongRoPE picks its long factors when it exceeds the original
  // context, as llama.cpp does by its context size: one choice for every
  // position, so that cached keys stay valid as a sequence grows.
  void SetContextLength(int64_t n_ctx);
  // The cos/sin multiplier of the current RoPE scaling (YaRN temperature,
  // LongRoPE attention factor; 1 otherwise) of global (0) or sliding (1) layers.
  double rope_mscale(int kind = 0) const { return rope_[kind].mscale; }

  // Activation buffers for batches of up to max_tokens tokens (allocated
  // once; a larger batch grows them).
  void ReserveTokens(int64_t max_tokens);

  // The KV storage of a forward pass. Without `window`: `full` holds every
  // layer. With it: `window` holds the sliding layers (its layer i is the
  // i-th sliding layer, read through window_block_table) and `full` the
  // others (its layer i is the i-th global one; nullptr when every layer
  // slides: block_table is then bookkeeping only).
  struct KvCaches {
    kvcache::KvCache* full = nullptr;
    kvcache::KvCache* window = nullptr;
  };

  // logits: [batch.NumLogits(), vocab] (forward_batch.h says which rows).
  // A shard of rank > 0 passes an empty span: it computes its rows of the
  // vocabulary and sends them to its group's rank 0, which gathers every
  // rank's (every rank of the group calls Forward with the same batch).
  Status Forward(const kvcache::ForwardBatch& batch, kvcache::KvCache& cache, std::span<float> logits,
                 ThreadPool& pool) {
    return Forward(batch, KvCaches{&cache, nullptr}, logits, pool);
  }
  Status Forward(const kvcache::ForwardBatch& batch, KvCaches caches, std::span<float> logits, ThreadPool& pool);

 private:
  LlamaModel() = default;
  void Rope(float* x, int32_t n_heads, const float* cos, const float* sin) const;
  // Checks the caches' shapes and the batch's block tables against them.
  Status ValidateBatch(const kvcache::ForwardBatch& batch, const KvCaches& caches) const;
  // Tensor parallel: this rank's logits of the `rows` normed rows in xn_ for
  // its rows of the vocabulary; rank 0 of the group gathers every rank's
  // into logits [rows, vocab], the others send theirs.
  void GatherVocabLogits(int64_t rows, std::span<float> logits, ThreadPool& pool);

  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  int shard_count_ = 1;
  Collective* collective_ = nullptr;
  PipelineLinks pipeline_;
  // RoPE of one kind of layer: global (0) and sliding-window (1) layers may
  // rotate with different bases and scales (Gemma).
  struct RopeTable {
    std::vector<double> inv_freq;  // [rope_dim / 2] angle per position of each rotated pair
    double mscale = 1.0;           // multiplies cos and sin
  };
  RopeTable rope_[2];
  kvcache::PagedAttention attention_;  // keeps its plan and scratch between calls
  kvcache::ForwardBatch window_batch_;  // the batch with window_block_table as block_table
  MoeFfn moe_;                         // the expert FFN's routing and scratch (MoE models)
  std::vector<float> vocab_part_;      // [rows, this rank's vocabulary rows] (tensor parallel)
  std::vector<float> vocab_recv_;      // [rows, a peer's vocabulary rows], on the group's rank 0

  // Activations, [max_tokens_, ...] each.
  int64_t max_tokens_ = 0;
  std::vector<float> x_;     // [T, hidden] residual stream
  std::vector<float> xn_;    // [T, hidden] normed input
  std::vector<float> q_;     // [T, q_dim]
  std::vector<float> k_;     // [T, kv_dim]
  std::vector<float> v_;     // [T, kv_dim]
  std::vector<float> att_;   // [T, q_dim]
  std::vector<float> tmp_;   // [T, hidden]
  std::vector<float> gate_;  // [T, ffn]
  std::vector<float> up_;    // [T, ffn]
  std::vector<float> cos_[2];  // [T, rope_dim / 2] per layer kind
  std::vector<float> sin_[2];  // [T, rope_dim / 2] per layer kind
};

}  // namespace kvs::model
