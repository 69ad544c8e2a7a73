// KvCache: the storage behind the paged KV cache. For every layer it holds
// K and V for `num_blocks` blocks of `block_size` token slots:
//   k[layer]: [num_blocks, block_size, n_kv_heads * head_dim] in `dtype`
// (V the same). A slot is block_id * block_size + offset. Which block belongs
// to which sequence is the block manager's business (engine/); this class
// only stores rows and hands out pointers for attention.
// Supported dtypes: F32, F16 (default), BF16, Q8_0 (int8 with one f16 scale
// per 32 values; the row n_kv_heads * head_dim must be a multiple of 32).
// Thread-safety: writes to distinct slots may run concurrently; the engine
// thread owns the object.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kvs::kvcache {

struct KvCacheConfig {
  int32_t num_layers = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t block_size = 16;
  int32_t num_blocks = 0;
  DType dtype = DType::kF16;

  int64_t RowElems() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
  // Bytes of one token's K (or V) row in one layer.
  int64_t RowBytes() const;
  // Bytes of K+V for one token across all layers.
  int64_t BytesPerToken() const { return 2 * num_layers * RowBytes(); }
  int64_t TotalBytes() const { return BytesPerToken() * block_size * num_blocks; }
  Status Validate() const;
};

class KvCache {
 public:
  static StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheConfig& config);

  const KvCacheConfig& config() const { return config_; }

  // Stores one token's K and V rows (f32, [n_kv_heads * head_dim]) in `slot`.
  void Write(int32_t layer, int64_t slot, const float* k, const float* v);

  const uint8_t* KRow(int32_t layer, int64_t slot) const {
    return k_[layer].get() + slot * row_bytes_;
  }
  const uint8_t* VRow(int32_t layer, int64_t slot) const {
    return v_[layer].get() + slot * row_bytes_;
  }
  int64_t row_bytes() const { return row_bytes_; }

 private:
  explicit KvCache(const KvCacheConfig& c) : config_(c) {}
  KvCacheConfig config_;
  int64_t row_bytes_ = 0;
  std::vector<std::unique_ptr<uint8_t[]>> k_;  // per layer
  std::vector<std::unique_ptr<uint8_t[]>> v_;
};

}  // namespace kvs::kvcache
