// KV-cache dtype accuracy: how far logits move when the paged KV cache
// stores K/V in a narrower dtype (f16, bf16, q8_0, q4_0, q4_1) than f32, for one model
// and one token sequence. Used by `kvserve bench --kv-accuracy` (figures in
// docs/benchmarks.md) and by kv_accuracy_test (bounds).
//
// The prompt runs through an f32-KV cache and through one cache per dtype in
// lockstep, chunk by chunk, with logits for every position; then each cache
// continues greedily on its own for `greedy_tokens` tokens.
// Thread-safety: uses the model's activation buffers; one call at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "model/llama.h"

namespace kvs::model {

struct KvAccuracy {
  DType dtype = DType::kF32;
  int64_t positions = 0;           // prompt positions compared
  double max_abs_logit_dev = 0.0;  // max over positions and vocab of |logit - f32 logit|
  double mean_abs_logit_dev = 0.0;
  double max_abs_logit = 0.0;      // max |f32 logit|, for scale
  // Teacher-forced: fraction of prompt positions whose argmax equals f32's.
  double argmax_agreement = 0.0;
  // Free-running greedy continuation after the prompt: tokens generated and
  // how many of them (from the start) equal the f32-KV continuation.
  int32_t greedy_tokens = 0;
  int32_t greedy_identical_prefix = 0;
};

StatusOr<std::vector<KvAccuracy>> MeasureKvAccuracy(LlamaModel& model, std::span<const int32_t> prompt,
                                                    std::span<const DType> dtypes, int32_t chunk,
                                                    int32_t greedy_tokens, ThreadPool& pool);

}  // namespace kvs::model
