// ServingPlan: the memory plan of one running server (or `kvserve run`,
// `kvserve bench`): the three accounts of plan.h for its actual settings,
// and the KV pool they leave, in whole blocks.
//
//   pool        = memory_limit * memory_fraction - weights - activations
//                 - overhead                         (KvPoolBytes)
//   fit         = floor(pool / bytes per block)       (NumKvBlocks)
//   useful      = sequences * ceil(context / block_size)
//   num_blocks  = min(fit, useful)
// A pool smaller than one sequence at full context is refused with the
// numbers to change.
//
// Sliding-window layers (window W < context) keep their KV in a group of
// their own (engine/block_manager.h), whose blocks leave a sequence as they
// leave its window. That group is sized first, for every running sequence's
// window plus a full step of new tokens:
//   window_blocks = max_batch_size * (ceil((W - 1) / block_size) + 2)
//                   + ceil(max_num_batched_tokens / block_size)
// (at least what one sequence needs alone: ceil((W - 1 +
// max_num_batched_tokens) / block_size) + 1); the rest of the pool goes to
// the global layers' blocks as above, bytes per block counting the global
// layers only. When every layer slides those blocks cost nothing: they are
// bookkeeping, max(sequences, max_batch_size) sequences at full context.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "base/dtype.h"
#include "base/status.h"
#include "plan/model_shape.h"

namespace kvs::plan {

struct ServingPlanOptions {
  uint64_t memory_limit_bytes = 0;  // 0: this machine's memory (SystemMemoryBytes)
  double memory_fraction = 1.0;     // (0, 1]
  DType kv_dtype = DType::kF16;
  int64_t block_size = 16;
  int64_t context = 0;              // tokens per sequence (prompt + output); 0: the model's
  int64_t sequences = 1;            // sequences that should fit at full context at once
  int64_t max_num_batched_tokens = 2048;
  int64_t max_batch_size = 1;
  int64_t threads = 1;              // compute threads (resolved, > 0)
  // A draft model for speculative decoding (engine/draft_model.h), or
  // nullptr: its weights and activations are counted with the model's, and
  // its KV in every block, since it keeps KV under the same block ids.
  const ModelShape* draft = nullptr;
  uint64_t draft_weights_bytes = 0;
};

struct ServingPlan {
  int64_t context = 0;               // resolved
  uint64_t memory_limit_bytes = 0;   // resolved
  double memory_fraction = 1.0;
  uint64_t weights_bytes = 0;        // the model's and the draft model's
  uint64_t draft_weights_bytes = 0;  // of which the draft model's
  uint64_t activation_bytes = 0;
  uint64_t overhead_bytes = 0;
  uint64_t kv_pool_bytes = 0;        // num_kv_blocks * kv_bytes_per_block (+ the window group's bytes)
  uint64_t kv_bytes_per_block = 0;   // of the global layers when there is a window group; with the draft's
  uint64_t draft_kv_bytes_per_block = 0;  // of which the draft model's
  int64_t window = 0;                // > 0: sliding layers have a window group
  int64_t num_window_blocks = 0;
  uint64_t kv_bytes_per_window_block = 0;
  int64_t kv_blocks_per_sequence = 0;
  int64_t kv_blocks_fit = 0;         // what the memory would hold
  int64_t num_kv_blocks = 0;         // what the server gets

  // Sequences at full context that fit the memory at once.
  int64_t SequencesAtContext() const {
    return kv_blocks_per_sequence > 0 ? kv_blocks_fit / kv_blocks_per_sequence : 0;
  }
  // One line for the start-up log.
  std::string Describe(DType kv_dtype) const;
};

// weights_bytes: the loaded model's. FailedPrecondition (naming the numbers
// and the keys to change) when not one sequence at full context fits.
StatusOr<ServingPlan> PlanServing(const ModelShape& shape, uint64_t weights_bytes, const ServingPlanOptions& options);

}  // namespace kvs::plan
