// ModelShape: the few numbers of a decoder-only transformer (llama, qwen2,
// qwen3, mistral) that decide how much memory serving it takes, and the
// weight storage formats the planner knows.
//
// A shape comes from one of three sources:
//   - a GGUF file: shapes from metadata, weight bytes and parameter count
//     from the real tensor table (ShapeFromGguf);
//   - a Hugging Face config.json: parameters and bytes computed from the
//     shapes (ShapeFromHfConfig);
//   - a built-in preset with published shapes (FindPreset).
//
// Weight tensors assumed when computing from shapes (dims as [rows, cols],
// cols being the input length of a matrix):
//   token_embd [vocab, hidden]; output [vocab, hidden] unless tied;
//   output_norm [hidden]; per layer: attn_norm, ffn_norm [hidden],
//   q [heads*head_dim, hidden], k and v [kv_heads*head_dim, hidden],
//   o [hidden, heads*head_dim], gate and up [ffn, hidden], down [hidden, ffn],
//   q/k/v biases when qkv_bias (qwen2), q_norm/k_norm [head_dim] when qk_norm
//   (qwen3). Mixture-of-experts shapes (experts > 0) replace gate/up/down
//   by a router [experts, hidden] (kept f32 in quantized files, as llama.cpp
//   writes it) and per expert gate and up [expert_ffn, hidden], down
//   [hidden, expert_ffn]; a shared expert (qwen2moe) adds gate/up/down of
//   shared_expert_ffn and its gate vector [hidden]. All experts count in
//   params and weight bytes (they must be resident); active_params counts
//   only experts_used of them, what one token's forward pass reads.
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "gguf/gguf.h"

namespace kvs::plan {

// ceil(a / b) for b > 0.
inline constexpr uint64_t CeilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

// How weights are stored. Matrices use the format; vectors (norms, biases)
// stay f32 when the format is quantized, as GGUF files keep them.
//   f32 4, f16/bf16 2 bytes per weight;
//   q8_0 34 bytes per 32, q4_0 18 bytes per 32, q6_k 210 bytes per 256
//     (rows rounded up to whole blocks);
//   q4_k_m: a mix (mostly Q4_K at 4.5 bits, some tensors at Q6_K) planned
//     as a whole-file average of 4.85 bits per weight, i.e. 97/160 bytes.
enum class WeightFormat { kF32, kF16, kBF16, kQ8_0, kQ4_0, kQ4_K_M, kQ6_K };

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q6_k" (case-insensitive).
StatusOr<WeightFormat> ParseWeightFormat(std::string_view name);
const char* WeightFormatName(WeightFormat f);
// All formats, widest first.
const std::vector<WeightFormat>& AllWeightFormats();

// Bytes of one [rows, cols] matrix, and of an n-element vector, in format f.
uint64_t MatrixBytes(WeightFormat f, int64_t rows, int64_t cols);
uint64_t VectorBytes(WeightFormat f, int64_t n);

struct ModelShape {
  std::string name;        // "Llama-3.1-8B", a file's general.name, ...
  std::string arch;        // "llama", "qwen2", "qwen3", "mistral", ...
  std::string source;      // "preset", "hf-config <path>", "gguf <path>"
  int64_t layers = 0;
  int64_t hidden = 0;      // embedding length
  int64_t heads = 0;       // query heads
  int64_t kv_heads = 0;    // key/value heads (GQA); heads % kv_heads == 0
  int64_t head_dim = 0;    // usually hidden / heads
  int64_t ffn = 0;         // feed-forward (intermediate) length
  int64_t vocab = 0;
  bool tied_embeddings = false;  // output projection shares token_embd
  bool qkv_bias = false;         // qwen2
  bool qk_norm = false;          // qwen3
  int64_t max_context = 0;       // trained / configured context length
  // Sliding-window attention: sliding_layers of the layers attend to their
  // last sliding_window positions only (Gemma 2/3 interleave them with
  // global layers; Mistral-style configs slide every layer). 0: none.
  int64_t sliding_window = 0;
  int64_t sliding_layers = 0;
  // Mixture of experts (0 experts: dense). ffn is then unused by the
  // tensors (Qwen3-MoE's config still names a dense intermediate_size).
  int64_t experts = 0;           // routed experts per layer
  int64_t experts_used = 0;      // experts each token runs
  int64_t expert_ffn = 0;        // each expert's FFN width
  int64_t shared_expert_ffn = 0; // qwen2moe's shared expert; 0: none
  int64_t params = 0;            // parameter count
  int64_t active_params = 0;     // parameters one token reads (= params when dense)

  // The weights as stored by the source: for GGUF the sum of tensor sizes
  // (file_weights_bytes > 0, file_weights_type names the commonest type);
  // otherwise default_format is the checkpoint's dtype (bf16 for presets).
  uint64_t file_weights_bytes = 0;
  std::string file_weights_type;
  WeightFormat default_format = WeightFormat::kBF16;
};

// Checks every dimension is positive and heads divide evenly.
Status ValidateShape(const ModelShape& s);

// Parameter count implied by the shapes (see the tensor list above), and
// the part of it one token reads (all but the unselected experts).
int64_t ParamsFromShape(const ModelShape& s);
int64_t ActiveParamsFromShape(const ModelShape& s);

// Weight bytes of the shape stored in format f (see WeightFormat).
uint64_t WeightBytesFromShape(const ModelShape& s, WeightFormat f);

// Built-in presets: Llama-3.1-8B, Llama-3.1-70B, Llama-3.2-1B, Llama-3.2-3B,
// Qwen2.5-7B, Qwen2.5-72B, Qwen3-8B, Mistral-7B-v0.3, Qwen3-30B-A3B,
// Mixtral-8x7B, test-125m.
// Lookup is case-insensitive; NotFound lists the known names.
StatusOr<ModelShape> FindPreset(std::string_view name);
std::vector<std::string> PresetNames();

// Parses the text of a Hugging Face config.json (a nested "text_config" is
// used when present). Reads num_hidden_layers, hidden_size,
// num_attention_heads, num_key_value_heads (default: heads), head_dim
// (default: hidden / heads), intermediate_size, vocab_size, the experts
// (num_experts or Mixtral's num_local_experts, num_experts_per_tok,
// moe_intermediate_size (default intermediate_size, Mixtral's expert width),
// shared_expert_intermediate_size),
// tie_word_embeddings (default false; true for gemma2/gemma3), max_position_embeddings,
// torch_dtype / dtype (default bf16), model_type, attention_bias, and the
// sliding window: sliding_window with layer_types (counting
// "sliding_attention"), else by model_type: gemma2 every other layer
// (sliding_window default 4096), gemma3 5 of every sliding_window_pattern
// (default 6), mistral/llama every layer when sliding_window is set; phi3's
// and qwen2's are not applied (as llama.cpp).
StatusOr<ModelShape> ShapeFromHfConfigText(std::string_view json_text, std::string source = "hf-config");
StatusOr<ModelShape> ShapeFromHfConfig(const std::string& path);

// Reads a GGUF file's metadata and tensor table: <arch>.block_count,
// .embedding_length, .attention.head_count, .attention.head_count_kv
// (default heads), .feed_forward_length, .context_length,
// .attention.key_length (default hidden / heads); vocab from
// tokenizer.ggml.tokens, else <arch>.vocab_size, else token_embd's rows;
// tied when there is no output.weight; experts as ModelConfig reads them.
// Weight bytes are the sum of the tensors' sizes, parameters the sum of
// their elements (active parameters: less the unselected experts' share of
// the *_exps tensors).
StatusOr<ModelShape> ShapeFromGguf(const std::string& path);
// The same for a file already open (the server's); path names the source.
StatusOr<ModelShape> ShapeFromGgufFile(const gguf::GgufFile& file, const std::string& path);

}  // namespace kvs::plan
