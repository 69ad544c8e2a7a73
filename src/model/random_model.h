// Random models (tests and benchmarks), written with the project's GGUF writer:
// every architecture and weight type, optionally with an F32 twin holding
// the exact dequantized weights (what the NumPy reference reads).
#pragma once

#include <string>

#include "base/dtype.h"
#include "base/status.h"

namespace kvs::model {

struct RandomModelSpec {
  std::string arch = "llama";  // llama | qwen2 | qwen3
  DType weight_type = DType::kF32;
  // "Q4_K_M": Q4_K, with Q6_K for output.weight and for attn_v / ffn_down of
  // the layers llama.cpp's Q4_K_M mix gives more bits.
  std::string mix;
  int hidden = 256, n_layers = 2, n_heads = 4, n_kv_heads = 2, ffn = 512, vocab = 320;
  int head_dim = 0;  // 0: hidden / n_heads
  bool tied = false;
  float rope_base = 10000.0f;
  bool rope_freqs = false;  // add a Llama-3 style rope_freqs.weight tensor
  uint32_t seed = 1;
};

// Writes the model to `path`; when f32_twin_path is non-empty, also writes
// the same model with every tensor dequantized to F32.
// The preset of the project's benchmark shape (125M Llama with GQA).
RandomModelSpec Test125MSpec();

// Whether llama.cpp's *_M mixes give layer i of n more bits.
bool UseMoreBits(int i, int n);

Status WriteRandomModel(const RandomModelSpec& spec, const std::string& path, const std::string& f32_twin_path);

}  // namespace kvs::model
