// ModelConfig: the shape and hyper-parameters of a decoder-only transformer,
// read from GGUF metadata (`<arch>.*` keys). Supported architectures are the
// Llama family: `llama` (Llama 2/3, Mistral, TinyLlama, SmolLM), `qwen2`
// (QKV bias, NeoX RoPE), `qwen3` (per-head Q/K RMSNorm, NeoX RoPE), `phi3`
// (fused attn_qkv and ffn_up gate|up tensors, LongRoPE), `gemma2` and
// `gemma3` (embeddings x sqrt(hidden), GELU-tanh FFN, post-attention and
// post-FFN norms, logit soft-capping, interleaved sliding-window layers),
// and the mixture-of-experts variants: `qwen3moe` (Qwen3-30B-A3B), `llama`
// files with `expert_count` (Mixtral) and `qwen2moe` (with a shared expert
// gated by sigmoid). Others are refused by name. Each field below says which key sets it;
// defaults are llama.cpp's for the architecture.
//
// RoPE scaling follows llama.cpp's reading of the same keys: `none`,
// `linear` (positions / factor), Llama 3 (`rope_freqs.weight` divisors),
// `yarn` (interpolation ramped between the correction dims of the original
// context, cos/sin scaled by the attention temperature 1 + 0.1 ln(factor))
// and LongRoPE (`rope_factors_short/long.weight` divisors, long ones when the
// serving context exceeds the original one; cos/sin scaled by
// rope.scaling.attn_factor).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"

namespace kvs::model {

enum class RopeType { kNormal, kNeox };  // pairs (2i, 2i+1) vs (i, i + dim/2)

// The layers of pipeline stage `stage` of `stages` as [first, first + count):
// contiguous, as even as they go, the earlier stages taking one more (80
// over 3: 27, 27, 26), as `kvserve plan --pipeline-parallel` plans them.
struct LayerRange {
  int32_t first = 0;
  int32_t count = 0;
};
LayerRange StageLayers(int32_t n_layers, int stages, int stage);

// How `ranks` tensor-parallel ranks share `kv_heads` KV heads: evenly when
// `ranks` divides them, or, with more ranks than KV heads, each head
// replicated on the ranks / kv_heads ranks of its query group (vLLM's rule)
// when `ranks` is a multiple of them. The model's shards
// (ModelConfig::CheckTensorParallel) and the plan (plan::ValidateLayout)
// both follow this rule.
bool KvHeadsShareable(int64_t kv_heads, int64_t ranks);
// KV heads each rank holds (1 when replicated); KvHeadsShareable holds.
int64_t KvHeadsPerRank(int64_t kv_heads, int64_t ranks);

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
  float rope_scale = 1.0f;      // linear / yarn scaling factor: positions divided by this
  std::string rope_scaling = "none";  // rope.scaling.type as the file says
  int32_t rope_orig_ctx = 0;    // rope.scaling.original_context_length (default context_length)
  float rope_attn_factor = 1.0f;  // rope.scaling.attn_factor: multiplies cos/sin
  float yarn_log_mul = 0.0f;    // rope.scaling.yarn_log_multiplier (DeepSeek-style mscale_all_dim)
  bool longrope = false;        // rope_factors_short/long tensors present (Phi-3 128k)
  RopeType rope_type = RopeType::kNormal;
  bool qkv_bias = false;        // qwen2, qwen2moe
  bool qk_norm = false;         // qwen3, qwen3moe
  bool tied_embeddings = false; // no output.weight: logits use token_embd
  bool fused_qkv = false;       // blk.N.attn_qkv.weight: Q, K, V rows in one tensor (phi3)
  bool fused_gate_up = false;   // phi3: ffn_up.weight holds gate rows then up rows, no ffn_gate

  // Gemma 2/3.
  bool gelu_ffn = false;        // gelu_tanh(gate) * up instead of silu(gate) * up
  bool embed_scale = false;     // embeddings multiplied by sqrt(hidden)
  bool post_norms = false;      // attn_post_norm / ffn_post_norm on each sublayer's output
  float attn_softcap = 0.0f;    // attn_logit_softcapping: scores -> cap * tanh(scores / cap); 0 = off
  float final_softcap = 0.0f;   // final_logit_softcapping, likewise on the logits
  float query_scale = 0.0f;     // softmax scale; 0 = 1 / sqrt(head_dim)

  // Sliding-window attention: layer l attends to its last `sliding_window`
  // positions when IsSliding(l). Pattern n (llama.cpp's swa pattern): the
  // last layer of every period of n is global, the others slide; 0 = all
  // slide. Sliding layers rotate with their own base and scale.
  int32_t sliding_window = 0;   // attention.sliding_window; 0 = none
  int32_t swa_pattern = 0;      // attention.sliding_window_pattern (a number)
  std::vector<uint8_t> swa_layers;  // the same key as an array of bools: [the whole model's layers] 1 = sliding
  // A pipeline stage's model: the whole-model index of its layer 0, which
  // the pattern (and swa_layers) count in; 0 for a whole model.
  int32_t first_layer = 0;
  float rope_base_swa = 10000.0f;  // rope.freq_base_swa
  float rope_scale_swa = 1.0f;  // positions divided by this in sliding layers

  // Mixture of experts (`expert_count` > 0): every layer's FFN is n_experts
  // expert FFNs of width expert_ffn, of which each token runs the
  // n_experts_used with the largest softmax(router logits), weighted by
  // those probabilities (renormalised to sum 1 when norm_topk).
  int32_t n_experts = 0;        // expert_count; 0 = dense FFN
  int32_t n_experts_used = 0;   // expert_used_count (1 <= used <= n_experts)
  int32_t expert_ffn = 0;       // expert_feed_forward_length (default ffn, or ffn / used for qwen*moe)
  int32_t shared_ffn = 0;       // expert_shared_feed_forward_length (qwen2moe; default ffn); 0 = none
  bool norm_topk = false;       // llama and qwen3moe renormalise, qwen2moe does not
  bool is_moe() const { return n_experts > 0; }

  int32_t q_dim() const { return n_heads * head_dim; }
  // Whether `tensor_parallel` ranks can share this model's heads and FFN
  // (model::LoadOptions::shard_count): query heads and the FFN width must
  // divide evenly; the KV heads must divide evenly or, with more ranks than
  // KV heads, the ranks must be a multiple of them (each KV head is then
  // replicated on the ranks of its query group); mixture-of-experts layers
  // are not sharded. InvalidArgument names the limit.
  Status CheckTensorParallel(int tensor_parallel) const;
  // With `n` ranks (CheckTensorParallel passed): how many KV heads each rank
  // holds (1 when replicated), and the first of them on `rank`.
  int32_t ShardKvHeads(int n) const;
  int32_t ShardKvHead(int rank, int n) const;
  // The output head's rows [first, first + count) that `rank` of `n`
  // computes (vocab-parallel): ceil(vocab / n) each, the last rank the rest.
  struct Rows {
    int64_t first = 0, count = 0;
  };
  Rows ShardVocab(int rank, int n) const;
  // Whether the layers can be split into `stages` contiguous ranges
  // (pipeline parallel): at least one layer a stage, and, in a model with
  // both sliding-window and global layers, both kinds in every stage (each
  // stage keeps both KV groups). InvalidArgument names the limit.
  Status CheckPipeline(int stages) const;
  int32_t kv_dim() const { return n_kv_heads * head_dim; }
  // Whether this model's layer `layer` (of a stage: first_layer + layer in the whole model) slides.
  bool IsSliding(int32_t layer) const {
    if (sliding_window <= 0) return false;
    const int32_t whole = first_layer + layer;
    if (!swa_layers.empty()) return swa_layers[static_cast<size_t>(whole)] != 0;
    return swa_pattern == 0 || whole % swa_pattern < swa_pattern - 1;
  }
  int32_t NumSlidingLayers() const;
  float AttentionScale() const;
  Status Validate() const;
  std::string Describe() const;

  // The one reader of a GGUF file's hyper-parameters (`<arch>.*` keys and
  // the token embedding's shape), for any decoder-only architecture; the
  // capacity planner uses it for models kvserve does not run.
  static StatusOr<ModelConfig> ReadGguf(const gguf::GgufFile& file);
  // ReadGguf, then refuses what this build cannot run (architecture, RoPE
  // scaling, value head size, expert gating other than softmax, grouped
  // expert selection) by name.
  static StatusOr<ModelConfig> FromGguf(const gguf::GgufFile& file);
};

}  // namespace kvs::model
