// Memory per rank of a model split over tensor_parallel x pipeline_parallel
// processes (issue 38): `kvserve plan --tensor-parallel N
// --pipeline-parallel M`.
//
// Ranks: rank = stage * tensor_parallel + tp_rank, the tensor-parallel group
// of one pipeline stage being contiguous ranks (on one host when the ranks
// fill hosts in order). Rank 0 (stage 0, tp 0) runs the scheduler and the
// sampler.
//
// Pipeline parallel: stage s holds a contiguous layer range, the layers
// spread as evenly as they go (the first layers % stages stages hold one
// more). Stage 0 holds the token embeddings, the last stage the output norm
// and output head; with tied embeddings and more than one stage the last
// stage holds its own copy of the embedding matrix for the head.
//
// Tensor parallel (Megatron-style), within each stage's layers:
//   attention: query heads split evenly (heads % tensor_parallel == 0, or the
//     layout is refused); KV heads split evenly when kv_heads >= tensor_parallel
//     (kv_heads % tensor_parallel == 0), else each rank holds one KV head,
//     every KV head replicated tensor_parallel / kv_heads times (vLLM's
//     rule; tensor_parallel % kv_heads == 0, or the layout is refused): the
//     KV cache is sharded by KV head, not replicated, where the heads allow;
//   q/k/v split by columns, o by rows; FFN gate/up by columns, down by rows
//     (ceil(ffn / tensor_parallel) each); experts' FFNs likewise, the router
//     replicated;
//   embeddings and output head vocabulary-parallel (ceil(vocab / N) rows);
//     norms replicated.
// A rank's weight bytes are the model's weight bytes times its share of
// the parameters (exact for one storage type, close for mixed GGUF files).
//
// Per rank, with the rank's layers and heads (plan.h's formulas):
//   KV           its layers x its KV heads (sliding layers: the model's
//                share of them, rounded);
//   activations  hidden states in full (every TP rank holds the layer input),
//                q/k/v, attention out and FFN for its heads and columns,
//                logits for its vocabulary slice on the last stage, plus the
//                gathered [batch, vocab] logits on rank 0 where it samples;
//   overhead     the runtime's fixed part and its threads' stacks.
// A layout fits when every rank fits its device's budget with the margin;
// the largest concurrency is the smallest over the ranks.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "plan/model_shape.h"
#include "plan/plan.h"

namespace kvs::plan {

inline constexpr int64_t kMaxParallel = 1024;

struct ParallelLayout {
  int64_t tensor = 1;    // ranks a layer's heads and columns are split over
  int64_t pipeline = 1;  // stages, each a contiguous range of layers
  int64_t ranks() const { return tensor * pipeline; }
};

// One rank's share of the model and its memory accounts.
struct RankPlan {
  int64_t rank = 0, stage = 0, tp_rank = 0;
  int64_t first_layer = 0, num_layers = 0;  // layers [first_layer, first_layer + num_layers)
  int64_t heads = 0, kv_heads = 0;          // query and KV heads held (KV heads may be replicas)
  int64_t ffn = 0, vocab = 0;               // FFN columns and vocabulary rows held
  bool embeddings = false, output_head = false, samples = false;
  int64_t params = 0;
  uint64_t weights_bytes = 0, kv_bytes = 0, activation_bytes = 0, overhead_bytes = 0;
  uint64_t total_bytes = 0;  // the four accounts
  bool fits = false;
};

struct ParallelPlan {
  ParallelLayout layout;
  PlanOptions options;  // with context / max_batch_size resolved
  std::vector<RankPlan> ranks;
  int64_t kv_head_replicas = 1;  // copies of each KV head (> 1 when kv_heads < tensor)
  uint64_t budget_per_rank_bytes = 0;
  bool fits = false;
  int64_t max_concurrency_at_context = 0;  // every rank fitting; 0: not one sequence
  bool max_concurrency_capped = false;
  // When it does not fit: the rank furthest over its budget and by how much
  // (with the margin), e.g. "rank 1 (stage 1, tp 0) needs 30.1 GiB with 15 %
  // margin, budget 24.0 GiB: 6.1 GiB short".
  std::string shortfall;
  std::vector<std::string> notes;
};

// Whether the model's heads allow the layout (see above); the message names
// the limit. Also range checks (1 <= tensor, pipeline <= 1024; pipeline <=
// layers).
Status ValidateLayout(const ModelShape& shape, const ParallelLayout& layout);

// The per-rank plan. Shape and options must pass ValidateShape and
// ValidateOptions, the layout ValidateLayout; options.devices is ignored
// (a rank is a device).
ParallelPlan ComputeParallelPlan(const ModelShape& shape, const PlanOptions& options, const ParallelLayout& layout);

nlohmann::json ParallelPlanToJson(const ParallelPlan& p);
std::string ParallelPlanToText(const ParallelPlan& p);

}  // namespace kvs::plan
