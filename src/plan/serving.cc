#include "plan/serving.h"

#include <algorithm>

#include <fmt/format.h>

#include "plan/device.h"
#include "plan/plan.h"

namespace kvs::plan {

StatusOr<ServingPlan> PlanServing(const ModelShape& shape, uint64_t weights_bytes, const ServingPlanOptions& o) {
  if (o.block_size < 1 || o.sequences < 1 || o.threads < 1 || !(o.memory_fraction > 0 && o.memory_fraction <= 1)) {
    return InvalidArgument("serving plan: block_size, sequences and threads must be >= 1 and memory_fraction in (0, 1]");
  }
  ServingPlan p;
  p.context = o.context > 0 ? o.context : shape.max_context;
  p.memory_fraction = o.memory_fraction;
  p.memory_limit_bytes = o.memory_limit_bytes;
  if (p.memory_limit_bytes == 0) {
    KVS_ASSIGN_OR_RETURN(p.memory_limit_bytes, SystemMemoryBytes());
  }
  p.weights_bytes = weights_bytes + o.draft_weights_bytes;
  p.draft_weights_bytes = o.draft_weights_bytes;
  p.activation_bytes = ActivationPeakBytes(shape, o.max_num_batched_tokens, o.max_batch_size, p.context, o.threads);
  if (o.draft != nullptr) {
    if (o.draft->sliding_layers > 0) return InvalidArgument("serving plan: a draft model with sliding-window layers");
    // Each runner has its own activation buffers.
    p.activation_bytes += ActivationPeakBytes(*o.draft, o.max_num_batched_tokens, o.max_batch_size, p.context, o.threads);
    p.draft_kv_bytes_per_block = KvBytesPerBlock(*o.draft, o.kv_dtype, o.block_size);
  }
  p.overhead_bytes = RuntimeOverheadBytes(o.threads);
  const uint64_t pool = KvPoolBytes(p.memory_limit_bytes, o.memory_fraction, p.weights_bytes, p.activation_bytes,
                                    p.overhead_bytes);
  p.kv_blocks_per_sequence = KvBlocksForTokens(p.context, o.block_size);
  const uint64_t layer_block = 2 * static_cast<uint64_t>(o.block_size) * KvRowBytes(shape, o.kv_dtype);
  uint64_t full_pool = pool;
  if (shape.sliding_layers > 0 && shape.sliding_window > 0 && shape.sliding_window < p.context) {
    const int64_t bs = o.block_size, w = shape.sliding_window;
    p.window = w;
    p.kv_bytes_per_window_block = static_cast<uint64_t>(shape.sliding_layers) * layer_block;
    const int64_t alone = KvBlocksForTokens(w - 1 + o.max_num_batched_tokens, bs) + 1;
    p.num_window_blocks = std::max(alone, o.max_batch_size * (KvBlocksForTokens(w - 1, bs) + 2) +
                                              KvBlocksForTokens(o.max_num_batched_tokens, bs));
    const uint64_t window_bytes = static_cast<uint64_t>(p.num_window_blocks) * p.kv_bytes_per_window_block;
    full_pool = pool > window_bytes ? pool - window_bytes : 0;
    p.kv_bytes_per_block = static_cast<uint64_t>(shape.layers - shape.sliding_layers) * layer_block;
  } else {
    p.kv_bytes_per_block = KvBytesPerBlock(shape, o.kv_dtype, o.block_size);
  }
  p.kv_bytes_per_block += p.draft_kv_bytes_per_block;
  if (p.kv_bytes_per_block == 0) {
    // Every layer slides: the global group is bookkeeping without bytes.
    p.kv_blocks_fit = std::min<int64_t>(p.kv_blocks_per_sequence * std::max(o.sequences, o.max_batch_size), 1 << 24);
    if (full_pool == 0) p.kv_blocks_fit = 0;
  } else {
    p.kv_blocks_fit = static_cast<int64_t>(full_pool / p.kv_bytes_per_block);
  }
  p.num_kv_blocks = std::min(p.kv_blocks_fit, p.kv_blocks_per_sequence * std::max<int64_t>(o.sequences, 1));
  if (p.kv_bytes_per_block == 0) p.num_kv_blocks = p.kv_blocks_fit;
  if (p.num_kv_blocks < p.kv_blocks_per_sequence) {
    return FailedPrecondition(
        "the KV pool would hold {} blocks ({} of {} of memory at kv_cache.memory_fraction {} after weights {} "
        "and activations {}), fewer than the {} blocks one {}-token request needs; raise kv_cache.memory_fraction or "
        "kv_cache.memory_limit_bytes, use kv_cache.dtype q8_0, or lower model.max_context_length "
        "(`kvserve plan --model FILE --context N` shows what fits)",
        p.kv_blocks_fit, FormatBinary(pool), FormatBinary(p.memory_limit_bytes), o.memory_fraction,
        FormatBinary(p.weights_bytes), FormatBinary(p.activation_bytes), p.kv_blocks_per_sequence, p.context);
  }
  p.kv_pool_bytes = static_cast<uint64_t>(p.num_kv_blocks) * p.kv_bytes_per_block +
                    static_cast<uint64_t>(p.num_window_blocks) * p.kv_bytes_per_window_block;
  return p;
}

std::string ServingPlan::Describe(DType kv_dtype) const {
  const std::string window_group =
      window > 0 ? fmt::format(" + {} sliding-window blocks of {} (window {})", num_window_blocks,
                               FormatBinary(kv_bytes_per_window_block), window)
                 : std::string();
  const std::string draft =
      draft_weights_bytes > 0 ? fmt::format(" (draft model {}, {} of KV per block)", FormatBinary(draft_weights_bytes),
                                            FormatBinary(draft_kv_bytes_per_block))
                              : std::string();
  return fmt::format(
      "memory plan: limit {} x memory_fraction {} = {}; weights {}{}, KV pool {} ({} blocks of {}{}, {}), activations {}, "
      "overhead {}; {} request(s) of {} tokens fit at once",
      FormatBinary(memory_limit_bytes), memory_fraction,
      FormatBinary(static_cast<uint64_t>(static_cast<double>(memory_limit_bytes) * memory_fraction)),
      FormatBinary(weights_bytes), draft, FormatBinary(kv_pool_bytes), num_kv_blocks, FormatBinary(kv_bytes_per_block),
      window_group, DTypeName(kv_dtype), FormatBinary(activation_bytes), FormatBinary(overhead_bytes), SequencesAtContext(), context);
}

}  // namespace kvs::plan
