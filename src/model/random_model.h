// Random models (tests and benchmarks), written with the project's GGUF writer:
// every architecture and weight type, optionally with an F32 twin holding
// the exact dequantized weights (what the NumPy reference reads).
#pragma once

#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kvs::model {

struct RandomModelSpec {
  // llama | qwen2 | qwen3 | phi3 (fused attn_qkv and ffn_up) | gemma2 |
  // gemma3 (post-norms; gemma3 with Q/K norms) | qwen3moe (Q/K norms) |
  // qwen2moe (QKV bias, shared expert); any other name writes llama's
  // tensors. n_experts > 0 (required for qwen*moe) writes expert FFNs.
  std::string arch = "llama";
  DType weight_type = DType::kF32;
  // "Q4_K_M": Q4_K, with Q6_K for output.weight and for attn_v / ffn_down of
  // the layers llama.cpp's Q4_K_M mix gives more bits.
  std::string mix;
  int hidden = 256, n_layers = 2, n_heads = 4, n_kv_heads = 2, ffn = 512, vocab = 320;
  int head_dim = 0;  // 0: hidden / n_heads
  bool tied = false;
  float rope_base = 10000.0f;
  bool rope_freqs = false;  // add a Llama-3 style rope_freqs.weight tensor
  int context_length = 8192;
  std::string rope_scaling;     // rope.scaling.type; empty: no key
  float rope_factor = 0.0f;     // rope.scaling.factor; 0: no key
  int rope_orig_ctx = 0;        // rope.scaling.original_context_length; 0: no key
  float rope_attn_factor = 0.0f;  // rope.scaling.attn_factor; 0: no key
  bool longrope = false;        // add rope_factors_short/long.weight (Phi-3 style)
  int sliding_window = 0;       // attention.sliding_window; 0: no key
  int swa_pattern = 0;          // attention.sliding_window_pattern; 0: no key
  std::vector<bool> swa_layers; // the same key as a bool per layer, when not empty
  float attn_softcap = 0.0f;    // attn_logit_softcapping; 0: no key
  float final_softcap = 0.0f;   // final_logit_softcapping; 0: no key
  float rope_base_swa = 0.0f;   // rope.freq_base_swa; 0: no key
  int n_experts = 0;            // expert_count; 0: dense FFN
  int n_experts_used = 2;       // expert_used_count
  int expert_ffn = 0;           // expert_feed_forward_length; 0: no key (llama.cpp's default)
  int shared_ffn = 0;           // expert_shared_feed_forward_length (qwen2moe); 0: no key
  // Old Mixtral layout (GGUFs converted before 2024): one 2-D tensor per
  // expert, blk.N.ffn_{gate,up,down}.E.weight, instead of the 3-D *_exps
  // tensors. Only the main file; the F32 twin keeps the 3-D tensors.
  bool split_experts = false;
  float router_scale = 4.0f;    // router weights' stddev in units of 1/sqrt(hidden): decisive routing
  uint32_t seed = 1;
};

// Writes the model to `path`; when f32_twin_path is non-empty, also writes
// the same model with every tensor dequantized to F32.
// The preset of the project's benchmark shape (125M Llama with GQA).
RandomModelSpec Test125MSpec();
// The small shape tests use for an architecture: hidden 128, FFN 128,
// vocabulary 256, 2 layers, 4 heads / 2 KV heads (milliseconds to run).
RandomModelSpec SmallTestSpec(const std::string& arch);

// Whether llama.cpp's *_M mixes give layer i of n more bits.
bool UseMoreBits(int i, int n);

Status WriteRandomModel(const RandomModelSpec& spec, const std::string& path, const std::string& f32_twin_path);

}  // namespace kvs::model
