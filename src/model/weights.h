// ModelWeights: views of a model's tensors inside a GgufFile (no copies for
// matrices; they stay in the mmap). Vectors (norms, biases) are converted to
// owned f32 when stored otherwise. Every tensor's shape and type is checked
// at load; a missing or misshapen tensor is refused by name.
// Thread-safety: immutable after Load.
#pragma once

#include <memory>
#include <vector>

#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/config.h"

namespace kvs::model {

struct LayerWeights {
  const float* attn_norm = nullptr;   // [hidden]
  kernels::MatView wq, wk, wv, wo;    // [q_dim, hidden], [kv_dim, hidden] x2, [hidden, q_dim]
  const float* bq = nullptr;          // [q_dim]  (qwen2)
  const float* bk = nullptr;          // [kv_dim] (qwen2)
  const float* bv = nullptr;          // [kv_dim] (qwen2)
  const float* q_norm = nullptr;      // [head_dim] (qwen3)
  const float* k_norm = nullptr;      // [head_dim] (qwen3)
  const float* ffn_norm = nullptr;    // [hidden]
  kernels::MatView w_gate, w_up;      // [ffn, hidden]
  kernels::MatView w_down;            // [hidden, ffn]
};

struct ModelWeights {
  kernels::MatView token_embd;        // [vocab, hidden]
  std::vector<LayerWeights> layers;
  const float* output_norm = nullptr; // [hidden]
  kernels::MatView output;            // [vocab, hidden]; token_embd when tied
  const float* rope_freqs = nullptr;  // [rope_dim / 2] frequency divisors (Llama 3), or null
  uint64_t total_bytes = 0;           // bytes of all tensors used

  static StatusOr<std::unique_ptr<ModelWeights>> Load(const gguf::GgufFile& file, const ModelConfig& config);

 private:
  std::vector<std::vector<float>> owned_;  // f32 copies of non-f32 vectors
};

}  // namespace kvs::model
