#include "kvcache/kv_cache.h"

#include <new>

#include "kernels/kernels.h"

namespace kvs::kvcache {

int64_t KvCacheConfig::RowBytes() const { return ::kvs::RowBytes(dtype, RowElems()); }

Status KvCacheConfig::Validate() const {
  if (num_layers <= 0 || n_kv_heads <= 0 || head_dim <= 0) {
    return InvalidArgument("KV cache shape must be positive (layers {}, kv heads {}, head dim {})",
                           num_layers, n_kv_heads, head_dim);
  }
  if (block_size <= 0 || block_size > 1024) {
    return OutOfRange("kv_cache.block_size must be in [1, 1024], got {}", block_size);
  }
  if (num_blocks <= 0) return OutOfRange("KV cache needs at least one block, got {}", num_blocks);
  switch (dtype) {
    case DType::kF32: case DType::kF16: case DType::kBF16: break;
    case DType::kQ8_0:
      if (RowElems() % 32 != 0) {
        return InvalidArgument("kv_cache.dtype q8_0 needs n_kv_heads * head_dim ({}) to be a multiple of 32",
                               RowElems());
      }
      break;
    default:
      return InvalidArgument("kv_cache.dtype {} is not supported (use f32, f16, bf16 or q8_0)", DTypeName(dtype));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheConfig& config) {
  KVS_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<KvCache> c(new KvCache(config));
  c->row_bytes_ = config.RowBytes();
  const int64_t slots = static_cast<int64_t>(config.num_blocks) * config.block_size;
  const size_t bytes = static_cast<size_t>(slots * c->row_bytes_);
  for (int32_t l = 0; l < config.num_layers; ++l) {
    // Zero-filled so an unwritten slot never holds NaNs from old memory.
    uint8_t* k = new (std::nothrow) uint8_t[bytes]();
    uint8_t* v = new (std::nothrow) uint8_t[bytes]();
    if (k == nullptr || v == nullptr) {
      delete[] k;
      delete[] v;
      return ResourceExhausted("cannot allocate {} bytes of KV cache for layer {}", 2 * bytes, l);
    }
    c->k_.emplace_back(k);
    c->v_.emplace_back(v);
  }
  return c;
}

void KvCache::Write(int32_t layer, int64_t slot, const float* k, const float* v) {
  const int64_t n = config_.RowElems();
  kernels::ConvertRowFromF32(config_.dtype, k, k_[layer].get() + slot * row_bytes_, n);
  kernels::ConvertRowFromF32(config_.dtype, v, v_[layer].get() + slot * row_bytes_, n);
}

}  // namespace kvs::kvcache
