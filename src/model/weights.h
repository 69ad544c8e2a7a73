// ModelWeights: views of a model's tensors inside a GgufFile. Vectors (norms,
// biases) are converted to owned f32 when stored otherwise. Quantized
// matrices are also packed at load into the kernels' interleaved layout
// (MatView::packed, owned here; about the file's size), after which their
// pages of the file mapping are dropped: the packed copy replaces them in
// memory, and the rows are read back from the file only if a scalar path or
// an embedding lookup asks for them. Every tensor's shape and type is
// checked at load; a missing or misshapen tensor is refused by name.
// With `--dtype bf16` (LoadOptions::f32/f16_matrices_as_bf16), F32 and F16
// matrices (not the embeddings) are converted to BF16 at load (owned here),
// as vLLM's --dtype bfloat16 and ik_llama.cpp's -rtr do: CPUs with
// AVX512_BF16 then multiply them with bf16 dot products (twice the f32 FMA
// rate in prefill); each weight keeps 8 significant bits. `--dtype auto`
// (the default) does so for F16 matrices on those CPUs only. There, BF16
// matrices (converted or stored) are kept as the avx512bf16 kernels' BF16
// panels (MatView::packed) instead of rows; a converted one then has no
// rows at all (MatView::data null), which only those kernels accept.
// Mixture-of-experts layers keep each expert of the 3-D expert tensors
// ([n_experts, rows, cols], GGUF dims [cols, rows, n_experts]) as a MatView
// of its own rows, packed separately, so that a token reads only the
// experts it selects.
// Thread-safety: immutable after Load.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/huge_buffer.h"
#include "gguf/gguf.h"
#include "kernels/kernels.h"
#include "model/config.h"

namespace kvs::model {

struct LoadOptions {
  // Stored float matrices converted to BF16 at load (ModelWeights::PlaceFloatMatrices).
  bool f32_matrices_as_bf16 = false;
  bool f16_matrices_as_bf16 = false;

  // From a --dtype / model.dtype value:
  //   bf16: F32 and F16 matrices become BF16.
  //   auto: F16 matrices become BF16 where the kernels have native bf16 dot
  //         products (kernels::NativeBf16Dot: twice the f32 multiply-adds per
  //         instruction), as vLLM serves float16 models as bfloat16 on CPUs;
  //         F32 stays F32, and every matrix stays as stored elsewhere.
  //   f32, f16: every matrix as stored; float weights multiplied in f32.
  static LoadOptions ForDtype(const std::string& dtype);

  bool converts() const { return f32_matrices_as_bf16 || f16_matrices_as_bf16; }

  // Tensor parallel (Megatron-style): this process holds shard `shard_rank`
  // of `shard_count`: its share of the query and KV heads (rows of wq, wk,
  // wv and their biases; columns of wo; with more ranks than KV heads, the
  // one KV head its query heads read, replicated on their group's ranks)
  // and of the FFN (rows of gate and up, columns of down). Embeddings and norms are whole on every rank; the
  // output head is split by vocabulary rows (ModelConfig::ShardVocab), each
  // rank computing its rows' logits for the stage's rank 0 to gather.
  // ModelConfig::CheckTensorParallel says which counts a model takes.
  int shard_rank = 0;
  int shard_count = 1;
  // Pipeline parallel: only layers [first_layer, first_layer + num_layers)
  // are read (num_layers < 0: to the last); ModelWeights::layers then holds
  // them from index 0. ModelConfig::CheckPipeline says which ranges a model
  // takes.
  int32_t first_layer = 0;
  int32_t num_layers = -1;
};

// A layer's mixture-of-experts FFN (ModelConfig::is_moe()).
struct MoeWeights {
  kernels::MatView router;            // ffn_gate_inp [n_experts, hidden]
  // One view per expert into ffn_{gate,up,down}_exps: [expert_ffn, hidden] x2, [hidden, expert_ffn].
  std::vector<kernels::MatView> gate, up, down;
  // qwen2moe's shared expert, run for every token and scaled by
  // sigmoid(x · shared_gate); rows == 0 when absent.
  kernels::MatView shared_gate_mat, shared_up, shared_down;  // [shared_ffn, hidden] x2, [hidden, shared_ffn]
  const float* shared_gate = nullptr;  // ffn_gate_inp_shexp [hidden]
};

struct LayerWeights {
  const float* attn_norm = nullptr;   // [hidden]
  kernels::MatView wq, wk, wv, wo;    // [q_dim, hidden], [kv_dim, hidden] x2, [hidden, q_dim]
  const float* bq = nullptr;          // [q_dim]  (qwen2)
  const float* bk = nullptr;          // [kv_dim] (qwen2)
  const float* bv = nullptr;          // [kv_dim] (qwen2)
  const float* q_norm = nullptr;      // [head_dim] (qwen3)
  const float* k_norm = nullptr;      // [head_dim] (qwen3)
  const float* attn_post_norm = nullptr;  // [hidden] (gemma2/3)
  const float* ffn_norm = nullptr;    // [hidden]
  const float* ffn_post_norm = nullptr;   // [hidden] (gemma2/3)
  // Fused tensors (phi3's attn_qkv, ffn_up = gate|up) are viewed here as
  // their row ranges: the matmuls never know.
  kernels::MatView w_gate, w_up;      // [ffn, hidden]
  kernels::MatView w_down;            // [hidden, ffn]
  MoeWeights moe;                     // instead of w_gate/w_up/w_down when the model has experts
};

struct ModelWeights {
  kernels::MatView token_embd;        // [vocab, hidden]
  std::vector<LayerWeights> layers;
  const float* output_norm = nullptr; // [hidden]
  kernels::MatView output;            // [vocab, hidden] (a shard's rows of it); token_embd('s rows) when tied
  const float* rope_freqs = nullptr;  // [rope_dim / 2] frequency divisors (Llama 3), or null
  const float* rope_long = nullptr;   // [rope_dim / 2] LongRoPE divisors past the original context, or null
  const float* rope_short = nullptr;  // [rope_dim / 2] LongRoPE divisors within it, or null
  uint64_t total_bytes = 0;           // bytes of all tensors used
  uint64_t packed_bytes = 0;          // bytes of the packed copies
  uint64_t bf16_bytes = 0;            // bytes of the BF16 copies (LoadOptions)
  uint64_t float_copy_bytes = 0;      // bytes of float matrices copied as stored into huge pages

  static StatusOr<std::unique_ptr<ModelWeights>> Load(const gguf::GgufFile& file, const ModelConfig& config,
                                                      const LoadOptions& options = {});

 private:
  // The matrices the kernels multiply, and whether their file pages may be
  // dropped once they are packed or converted.
  std::vector<std::pair<kernels::MatView*, bool>> Matrices();
  // Converts the F32 / F16 matrices `options` names to BF16, and copies the
  // other float matrices of a mapped file as they are; both into huge pages.
  void PlaceFloatMatrices(const gguf::GgufFile& file, const LoadOptions& options);
  // Packs every matrix the active kernels read packed (see above).
  void PackMatrices(const gguf::GgufFile& file);
  // Keeps shard `rank` of `count` of each layer's matrices (LoadOptions).
  Status Shard(const ModelConfig& config, int rank, int count);

  std::vector<std::vector<float>> owned_;  // f32 copies of non-f32 vectors
  // Pipeline stages before the last never compute logits: their output head
  // is neither packed nor counted.
  bool output_unused_ = false;
  // The output head is token_embd (tied): its pages stay, for the lookups.
  bool output_tied_ = false;
  // Column slices of wo and w_down (Shard): a row's share is not contiguous
  // in the file, so it is copied.
  std::vector<std::unique_ptr<uint8_t[]>> slices_;
  HugeBuffer packed_;  // every packed panel, each 64-byte aligned
  HugeBuffer floats_;  // the BF16 and as-stored float copies, each 64-byte aligned
};

}  // namespace kvs::model
