// RunnerOptions: the geometry every device runner is built with (KV storage
// and activation buffers), apart from the factory table (runner_factory.h)
// so a runner's own header needs only this.
// Thread-safety: a value type.
#pragma once

#include <cstdint>

#include "base/dtype.h"

namespace kvs::backend {

// One rank's share of a tensor-parallel group's work so far
// (backend/tensor_parallel.h): seconds in its forward passes (all-reduces
// included), seconds and payload bytes of its all-reduces, steps, seconds a
// pipeline stage waited for its input (rank 0: for the logits).
struct ParallelRankStats {
  double forward_seconds = 0;
  double allreduce_seconds = 0;
  double allreduce_bytes = 0;
  double steps = 0;
  double pipeline_wait_seconds = 0;
  // Rank 0 only: micro-batches its pipeline steps were split into.
  double micro_batches = 0;
};

// The geometry of a runner's KV storage and activation buffers, whatever
// the device.
struct RunnerOptions {
  int threads = 0;                  // host compute threads; 0: all cores
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  int32_t num_window_blocks = 0;    // > 0: sliding layers get their own KV group of this many blocks
  DType kv_dtype = DType::kF16;
  int64_t max_batch_tokens = 2048;  // activation buffers are sized for this
};

}  // namespace kvs::backend
