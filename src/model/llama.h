// LlamaModel: the forward pass of the Llama family (`llama`, `qwen2`,
// `qwen3`: they differ only by QKV bias, per-head Q/K norm and RoPE pair
// layout, which ModelConfig flags select).
//
// Forward() runs a batch of sequence slices in one pass: every matmul sees
// all tokens of the batch at once ([tokens, features] activations); K/V of
// every token are written into the paged KvCache through each slice's block
// table, and attention reads them back through it.
// Thread-safety: Forward mutates the activation buffers and the cache; call
// it from one thread (the engine thread). The weights are immutable.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/gguf.h"
#include "kvcache/kv_cache.h"
#include "model/config.h"
#include "model/weights.h"

namespace kvs::model {

// One sequence's slice of a batch (mirrors engine::ForwardSeq; the model
// layer sits below the engine and does not include it).
struct SeqSlice {
  std::span<const int32_t> tokens;       // [n]
  int32_t start_pos = 0;                 // position of tokens[0]
  std::span<const int32_t> block_table;  // covers [0, start_pos + n)
  bool want_logits = false;              // last token's logits wanted
};

enum class LogitsMode {
  kLastOfWanted,  // one row per slice with want_logits, in slice order
  kAllTokens,     // one row per token of the batch (tests, perplexity)
};

class LlamaModel {
 public:
  // Opens and validates a GGUF model file (kept mapped for the model's life).
  static StatusOr<std::unique_ptr<LlamaModel>> Load(const std::string& path);
  // Uses an already opened file; the model takes ownership.
  static StatusOr<std::unique_ptr<LlamaModel>> FromFile(std::unique_ptr<gguf::GgufFile> file);

  const ModelConfig& config() const { return config_; }
  const gguf::GgufFile& file() const { return *file_; }
  uint64_t weight_bytes() const { return weights_->total_bytes; }

  // Activation buffers for batches of up to max_tokens tokens (allocated once).
  void ReserveTokens(int64_t max_tokens);
  int64_t reserved_tokens() const { return max_tokens_; }
  // Bytes of activation buffers for max_tokens (what ReserveTokens allocates).
  static int64_t ActivationBytes(const ModelConfig& c, int64_t max_tokens);

  // logits: [rows, vocab] where rows follows `mode`.
  Status Forward(std::span<const SeqSlice> batch, kvcache::KvCache& cache, std::span<float> logits,
                 LogitsMode mode, ThreadPool& pool);

 private:
  LlamaModel() = default;
  void Rope(float* x, int32_t n_heads, const float* cos, const float* sin) const;

  std::unique_ptr<gguf::GgufFile> file_;
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;
  std::vector<double> inv_freq_;  // [rope_dim / 2]

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
  std::vector<float> cos_;   // [T, rope_dim / 2]
  std::vector<float> sin_;   // [T, rope_dim / 2]
};

}  // namespace kvs::model
