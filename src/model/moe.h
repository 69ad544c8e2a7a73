// MoeFfn: the feed-forward block of a mixture-of-experts layer (Mixtral-style
// `llama`, `qwen3moe`, `qwen2moe`), for a batch of T tokens at once.
//
// Each token is routed on its own: router logits = x · router^T
// [n_experts], softmax, the n_experts_used most probable experts (ties go to
// the lower index), their probabilities as weights (divided by their sum
// when config.norm_topk). The tokens are then grouped by expert and every
// expert that at least one token selected runs once, on its gathered rows:
// silu(x · gate^T) * (x · up^T) through GatedMatMul, then · down^T; each
// row is scaled by its token's weight and added into the token's output.
// A one-token batch (decode) projects gate and up of all its experts in
// MatMulMany calls instead (fewer fork-joins, the same values).
// Experts nobody selected are not read at all, so a decode step touches
// n_experts_used of the n_experts expert matrices per layer. qwen2moe adds
// a shared expert run on every token and scaled by sigmoid(x · shared_gate).
//
// Invariant: the buffers grow to the largest batch seen and are reused.
// Thread-safety: Forward mutates the buffers; one caller at a time (the
// model's engine thread). The matmuls themselves run on the given pool.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "model/config.h"
#include "model/weights.h"

namespace kvs::model {

class MoeFfn {
 public:
  // out[T, hidden] = the MoE FFN of xn[T, hidden] (out is overwritten; it
  // must not alias xn).
  void Forward(const ModelConfig& c, const MoeWeights& w, const float* xn, int64_t T, float* out, ThreadPool& pool);

  // How many (token, layer) routings chose each expert since the model was
  // loaded, [n_experts] (tests check that different tokens pick different
  // experts; diagnostics).
  const std::vector<int64_t>& expert_counts() const { return counts_; }

 private:
  void Reserve(const ModelConfig& c, int64_t T);
  void RunExperts(const ModelConfig& c, const MoeWeights& w, const float* xn, float* out, ThreadPool& pool);
  void DecodeOne(const ModelConfig& c, const MoeWeights& w, const float* xn, float* out, ThreadPool& pool);

  int64_t max_tokens_ = 0;
  std::vector<float> logits_;     // [T, n_experts] router probabilities
  std::vector<int32_t> chosen_;   // [T, n_experts_used] expert ids
  std::vector<float> weights_;    // [T, n_experts_used] their weights
  std::vector<int32_t> order_;    // [T * n_experts_used] (token, slot) pairs sorted by expert
  std::vector<int64_t> start_;    // [n_experts + 1] each expert's range in order_
  std::vector<int64_t> next_;     // [n_experts] fill positions while grouping
  std::vector<float> xg_;         // [T, hidden] an expert's gathered input rows
  std::vector<float> act_;        // [max(T, used), max(expert_ffn, shared_ffn)] gated activations
  std::vector<float> up_;         // the same shape: x · up^T
  std::vector<float> yg_;         // [T, hidden] an expert's output rows
  std::vector<int64_t> counts_;   // [n_experts]
};

}  // namespace kvs::model
