// Internal interface between the attention planner (paged_attention.cc) and
// the per-ISA kernels (attention_kernel.h instantiated in
// attention_{generic,avx2,avx512}.cc). Not part of the module's API.
#pragma once

#include <cstdint>

#include "kvcache/forward_batch.h"
#include "kvcache/kv_cache.h"

namespace kvs::kvcache::internal {

// What every item of one attention call shares.
struct AttnContext {
  const KvCache* cache = nullptr;
  const ForwardBatch* batch = nullptr;
  const float* q = nullptr;  // [tokens, n_heads * head_dim], RoPE applied
  float* out = nullptr;      // [tokens, n_heads * head_dim]
  int32_t layer = 0;
  int32_t group = 1;         // query heads per KV head
  int64_t q_stride = 0;      // n_heads * head_dim
  float scale_log2 = 1.0f;   // softmax scale * log2(e): the kernels work in base 2
  int32_t window = 0;        // > 0: a query at p sees keys (p - window, p] (sliding window)
  float softcap_log2 = 0.0f; // > 0: scores s -> c tanh(s / c), c = soft-cap * log2(e) (Gemma 2)
};

// One work item: query tokens [t0, t0 + nt) of batch sequence `seq`, query
// heads [head0, head0 + nh) of KV head `kv_head`'s group, keys [k0, k1).
// Invariant (planner): k0 <= start_pos + t0, and k1 <= start_pos + t0 + nt
// (keys past the last row are never visited). Without a window every row
// sees a key in its first tile; with one, a row may see none in a tile
// (its window starts later), which the kernels' online softmax allows.
struct AttnItem {
  int32_t seq = 0;
  int32_t kv_head = 0;
  int32_t head0 = 0, nh = 0;
  int32_t t0 = 0, nt = 0;
  int32_t k0 = 0, k1 = 0;
  int32_t partial = -1;  // -1: writes the output rows; else its slot in the partial buffer
  int64_t row0 = 0;      // the sequence's first token row in the batch
  int64_t cost = 0;      // rows x keys, for scheduling
};

// One item's unnormalised result when its key range is split (flash
// decoding): m, l [rows] in the log2 domain and o [rows][head_dim].
struct PartialView {
  float* m;
  float* l;
  float* o;
};
inline int64_t PartialFloats(int64_t max_rows, int64_t head_dim) { return max_rows * (head_dim + 2); }
inline PartialView PartialAt(float* base, int64_t rows) { return PartialView{base, base + rows, base + 2 * rows}; }

using AttendFn = void (*)(const AttnContext&, const AttnItem&, float* partial, float* scratch);
using ScratchFn = int64_t (*)(int64_t head_dim);

struct KernelInfo {
  const char* name;
  AttendFn attend;
  ScratchFn scratch_floats;  // per thread, for a head_dim
  int32_t max_rows;          // nt * nh per item
  // Whether an item of `rows` query rows goes to the few-rows kernel
  // (attention_decode.h), whose per-row arithmetic does not depend on the
  // item's other rows: decode rows of one sequence may then share an item.
  bool (*dot_fits)(int64_t rows, int64_t head_dim);
};

// nullptr-attend KernelInfo when the variant is not compiled in.
KernelInfo KernelGeneric();
KernelInfo KernelAvx2();
KernelInfo KernelAvx512();

}  // namespace kvs::kvcache::internal
