// Memory accounts and capacity planning, shared by `kvserve plan` and by
// `kvserve serve` at start-up (KV pool sizing, admission by predicted peak).
//
// Serving memory is three accounts plus a runtime overhead:
//
// 1. Weights: the file's tensor bytes (GGUF), or computed from the shapes
//    in a WeightFormat (see model_shape.h). Mixture-of-experts models count
//    every expert: any token may select any of them, so all stay resident.
//
// 2. KV cache, paged in blocks of block_size tokens:
//      kv_row_bytes       = bytes of kv_heads*head_dim values in kv_dtype
//                           (f32 4, f16/bf16 2 bytes a value; q8_0 34 bytes
//                           per 32 values, the row rounded up to 32)
//      kv_bytes_per_token = 2 (K and V) * layers * kv_row_bytes
//      kv_bytes_per_block = block_size * kv_bytes_per_token
//      kv_bytes           = concurrency * ceil(context / block_size)
//                           * kv_bytes_per_block
//    For f16 this is 2 * layers * kv_heads * head_dim * 2 bytes a token.
//
//    Sliding-window layers (model_shape.h) keep their KV in a group of their
//    own whose blocks are freed as they leave the window
//    (engine/block_manager.h), so per layer type:
//      global layers   2 * (layers - sliding_layers) * kv_row_bytes a token,
//                      ceil(context / block_size) blocks a sequence;
//      sliding layers  2 * sliding_layers * kv_row_bytes a token,
//                      min(ceil(context / block_size),
//                          ceil((window + block_size - 1) / block_size))
//                      blocks a sequence (the window plus the block being
//                      filled);
//      kv_bytes        = concurrency * block_size * the sum over both.
//    kv_bytes_windowed is the same figure (kept for scripts);
//    kv_bytes_without_windows what every layer at full length would take.
//
// 3. Activations: buffers the forward pass allocates once for its largest
//    step and reuses in every layer. All f32 (4 bytes). With
//      T = min(max(max_num_batched_tokens, max_batch_size),
//              concurrency * context)                   tokens in a step,
//      B = max_batch_size                               logits rows,
//      C = context, P = threads,
//    the peak is 4 bytes times
//      hidden states  2 * T * hidden      (layer input and its normed copy)
//      residual       T * hidden
//      q, k, v        T * (heads + 2 * kv_heads) * head_dim
//      attention out  T * heads * head_dim
//      attn scratch   P * C               (one row of scores per thread:
//                                          each thread handles one
//                                          (token, head) pair at a time)
//      MLP            T * 2 * ffn         (gate and up; SiLU(gate)*up in place)
//                     mixture of experts: T * (experts + 2 * hidden
//                     + 2 * max(expert_ffn, shared_expert_ffn)) (router
//                     probabilities, an expert's gathered rows in and out,
//                     its gate and up)
//      logits         B * vocab           (only each sequence's last token)
//
// 4. Runtime overhead: a fixed 512 MiB (binary, allocator slack, tokenizer,
//    HTTP buffers, or a GPU runtime context) plus 8 MiB of stack per compute
//    thread (the glibc default thread stack).
//
// Devices (tensor-parallel assumption): weights and KV are split evenly over
// N devices; activations and overhead are needed in full on each.
//      per_device = ceil((weights + kv) / N) + activations + overhead
//      budget     = device_bytes * memory_fraction
//      fits      <=> per_device * (1 + margin) <= budget   (margin 15 %)
// devices_needed is the smallest N that fits; the largest concurrency (at
// the given context) and the largest context (at the given concurrency) are
// the largest values that still fit on the given number of devices.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/dtype.h"
#include "base/status.h"
#include "plan/device.h"
#include "plan/model_shape.h"

namespace kvs::plan {

inline constexpr uint64_t kFixedOverheadBytes = uint64_t{512} << 20;
inline constexpr uint64_t kThreadStackBytes = uint64_t{8} << 20;
inline constexpr double kDefaultMargin = 0.15;
inline constexpr int64_t kMaxDevices = 4096;

// KV dtypes: F32, F16, BF16, Q8_0, Q4_0, Q4_1. "f16", "bf16", ... (case-insensitive).
StatusOr<DType> ParseKvDType(std::string_view name);

// Bytes of one layer's K (or V) row for a token: kv_heads * head_dim values.
uint64_t KvRowBytes(const ModelShape& s, DType kv_dtype);
uint64_t KvBytesPerToken(const ModelShape& s, DType kv_dtype);
uint64_t KvBytesPerBlock(const ModelShape& s, DType kv_dtype, int64_t block_size);
// KV bytes of `concurrency` sequences of `context` tokens if sliding layers
// kept only ceil((window + block_size - 1) / block_size) blocks each.
uint64_t KvBytesWindowed(const ModelShape& s, DType kv_dtype, int64_t block_size, int64_t context,
                         int64_t concurrency);
// Blocks a sequence of `tokens` tokens occupies: ceil(tokens / block_size).
int64_t KvBlocksForTokens(int64_t tokens, int64_t block_size);

// The activation account, term by term (bytes; see the formula above).
struct ActivationBreakdown {
  uint64_t hidden_states = 0;
  uint64_t residual = 0;
  uint64_t qkv = 0;
  uint64_t attention_out = 0;
  uint64_t attention_scratch = 0;
  uint64_t mlp = 0;
  uint64_t logits = 0;
  uint64_t Total() const {
    return hidden_states + residual + qkv + attention_out + attention_scratch + mlp + logits;
  }
};
// chunk_tokens: tokens computed in one step; logit_rows: sequences whose last
// token needs logits; context: the longest sequence attended over.
ActivationBreakdown Activations(const ModelShape& s, int64_t chunk_tokens, int64_t logit_rows, int64_t context,
                                int64_t threads);
// Peak activation bytes of one step, for admission by predicted peak.
uint64_t ActivationPeakBytes(const ModelShape& s, int64_t chunk_tokens, int64_t logit_rows, int64_t context,
                             int64_t threads);

uint64_t RuntimeOverheadBytes(int64_t threads);

// Bytes left for the KV pool on a machine (or device) with memory_limit
// bytes of which `fraction` may be used: limit * fraction - weights -
// activations - overhead, clamped at 0.
uint64_t KvPoolBytes(uint64_t memory_limit, double fraction, uint64_t weights_bytes, uint64_t activation_bytes,
                     uint64_t overhead_bytes);
// Whole blocks that fit in pool_bytes.
int64_t NumKvBlocks(uint64_t pool_bytes, const ModelShape& s, DType kv_dtype, int64_t block_size);

struct PlanOptions {
  int64_t context = 0;        // tokens per sequence; 0 = the model's max context
  int64_t concurrency = 1;    // sequences resident at once, each at `context`
  std::optional<WeightFormat> weights_format;  // unset: the source's (file bytes for GGUF)
  DType kv_dtype = DType::kF16;
  int64_t block_size = 16;
  int64_t max_num_batched_tokens = 2048;
  int64_t max_batch_size = 0;  // 0 = concurrency
  int64_t threads = 32;
  Device device{"h100-80g", 80'000'000'000ull};
  int64_t devices = 1;
  double memory_fraction = 1.0;  // part of each device kvserve may use
  double margin = kDefaultMargin;
};

// The weights' bytes: computed from the shapes in o.weights_format when
// set, else the file's tensor bytes (GGUF), else the shapes in the source's
// own format.
uint64_t WeightBytes(const ModelShape& s, const PlanOptions& o);
// Options with context (0: the model's max) and max_batch_size (0:
// concurrency) resolved against the shape.
PlanOptions ResolveOptions(const ModelShape& s, PlanOptions o);
// Tokens in the largest step: T in the formula above.
int64_t StepTokens(const PlanOptions& o);
// Whether `bytes` on one device fit its budget with the margin:
// bytes * (1 + margin) <= device bytes * memory_fraction.
bool FitsBudget(uint64_t bytes, const PlanOptions& o);

// Range and consistency checks of the options (positive sizes, fraction in
// (0, 1], block size a power of two, ...).
Status ValidateOptions(const PlanOptions& o);

struct MemoryPlan {
  ModelShape shape;
  PlanOptions options;        // with context / max_batch_size resolved
  std::string weights_dtype;  // "bf16", "q4_k_m", or "gguf:Q4_K" for file sizes

  uint64_t weights_bytes = 0;
  uint64_t kv_bytes_per_token = 0;
  uint64_t kv_bytes_per_block = 0;
  int64_t kv_blocks_per_sequence = 0;
  uint64_t kv_bytes = 0;                   // with sliding layers' windows applied; see above
  uint64_t kv_bytes_windowed = 0;          // = kv_bytes
  uint64_t kv_bytes_without_windows = 0;   // every layer at every position
  uint64_t kv_bytes_per_token_global = 0;  // of the global layers (all layers without sliding ones)
  uint64_t kv_bytes_per_token_sliding = 0; // of the sliding layers, for positions inside the window
  uint64_t kv_bytes_per_context_token = 0; // kv_bytes / (concurrency * context): the real cost a token
  ActivationBreakdown activations;
  uint64_t activation_bytes = 0;
  uint64_t overhead_bytes = 0;
  uint64_t total_bytes = 0;               // weights + kv + activations + overhead
  uint64_t total_with_margin_bytes = 0;   // total * (1 + margin)
  uint64_t per_device_bytes = 0;          // on options.devices devices
  uint64_t budget_per_device_bytes = 0;   // device bytes * memory_fraction
  bool fits = false;
  int64_t devices_needed = 0;             // -1: no count fits (activations alone too big)
  int64_t max_concurrency_at_context = 0; // 0: not one sequence fits
  bool max_concurrency_capped = false;    // the search stopped at its cap
  int64_t max_context_at_concurrency = 0; // capped at the model's max context
  bool max_context_capped = false;
  std::vector<std::string> suggestions;   // only when it does not fit
  std::vector<std::string> notes;         // warnings about the inputs
};

// The whole plan. Options must pass ValidateOptions and the shape
// ValidateShape.
MemoryPlan ComputePlan(const ModelShape& shape, const PlanOptions& options);

// Whether the configuration fits (same rule as MemoryPlan::fits), cheaply.
bool Fits(const ModelShape& shape, const PlanOptions& options);

// Renderings for `kvserve plan`.
nlohmann::json PlanToJson(const MemoryPlan& p);
std::string PlanToText(const MemoryPlan& p);

}  // namespace kvs::plan
