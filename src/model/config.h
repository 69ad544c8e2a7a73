// ModelConfig: the shape and hyper-parameters of a decoder-only transformer,
// read from GGUF metadata (`<arch>.*` keys). Supported architectures are the
// Llama family: `llama` (Llama 2/3, Mistral, TinyLlama, SmolLM), `qwen2`
// (QKV bias, NeoX RoPE) and `qwen3` (per-head Q/K RMSNorm, NeoX RoPE).
// Others are refused by name.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf.h"

namespace kvs::model {

enum class RopeType { kNormal, kNeox };  // pairs (2i, 2i+1) vs (i, i + dim/2)

struct ModelConfig {
  std::string arch;
  std::string name;
  int32_t n_layers = 0;
  int32_t hidden = 0;
  int32_t ffn = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t value_head_dim = 0;   // attention.value_length (supported only == head_dim)
  int32_t vocab = 0;
  int32_t context_length = 0;   // trained context from metadata
  float rms_eps = 1e-5f;
  float rope_base = 10000.0f;
  int32_t rope_dim = 0;         // rotated dimensions per head (<= head_dim)
  float rope_scale = 1.0f;      // linear scaling: positions divided by this
  std::string rope_scaling = "none";  // rope.scaling.type as the file says
  RopeType rope_type = RopeType::kNormal;
  bool qkv_bias = false;        // qwen2
  bool qk_norm = false;         // qwen3
  bool tied_embeddings = false; // no output.weight: logits use token_embd

  int32_t q_dim() const { return n_heads * head_dim; }
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  Status Validate() const;
  std::string Describe() const;

  // The one reader of a GGUF file's hyper-parameters (`<arch>.*` keys and
  // the token embedding's shape), for any decoder-only architecture; the
  // capacity planner uses it for models kvserve does not run.
  static StatusOr<ModelConfig> ReadGguf(const gguf::GgufFile& file);
  // ReadGguf, then refuses what this build cannot run (architecture, RoPE
  // scaling, value head size) by name.
  static StatusOr<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

}  // namespace kvs::model
