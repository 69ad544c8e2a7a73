#include "kvcache/kv_cache.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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
    case DType::kQ4_0:
    case DType::kQ4_1:
      if (RowElems() % 32 != 0) {
        return InvalidArgument("kv_cache.dtype {} needs n_kv_heads * head_dim ({}) to be a multiple of 32",
                               dtype == DType::kQ8_0 ? "q8_0" : dtype == DType::kQ4_0 ? "q4_0" : "q4_1", RowElems());
      }
      break;
    default:
      return InvalidArgument("kv_cache.dtype {} is not supported (use f32, f16, bf16, q8_0, q4_0 or q4_1)", DTypeName(dtype));
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCacheConfig& config) {
  KVS_RETURN_IF_ERROR(config.Validate());
  std::unique_ptr<KvCache> c(new KvCache(config));
  const bool blocks_of_32 = config.dtype == DType::kQ8_0 || config.dtype == DType::kQ4_0 || config.dtype == DType::kQ4_1;
  c->head_major_ = !(blocks_of_32 && config.head_dim % 32 != 0);
  c->row_bytes_ = config.RowBytes();
  c->head_bytes_ = c->head_major_ ? ::kvs::RowBytes(config.dtype, config.head_dim) : c->row_bytes_;
  c->part_bytes_ = c->row_bytes_ * config.block_size;
  const auto page = static_cast<int64_t>(sysconf(_SC_PAGESIZE));
  c->block_stride_ = (2 * config.num_layers * c->part_bytes_ + page - 1) / page * page;
  c->mapped_bytes_ = static_cast<size_t>(c->block_stride_) * static_cast<size_t>(config.num_blocks);
  // Address space only: pages are committed when first written.
  void* p = mmap(nullptr, c->mapped_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    return ResourceExhausted("cannot reserve {} bytes of address space for the KV cache: {}", c->mapped_bytes_,
                             std::strerror(errno));
  }
  c->base_ = static_cast<uint8_t*>(p);
  c->dirty_.assign(static_cast<size_t>(config.num_blocks), 0);
  return c;
}

KvCache::~KvCache() {
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
}

void KvCache::Write(int32_t layer, int64_t slot, const float* k, const float* v) {
  const int64_t bs = config_.block_size;
  const int64_t block = slot / bs, off = slot % bs;
  uint8_t& dirty = dirty_[static_cast<size_t>(block)];
  num_dirty_ += dirty == 0;
  dirty = 1;
  const float* src[2] = {k, v};
  for (int kv = 0; kv < 2; ++kv) {
    uint8_t* part = Part(layer, block, kv);
    if (!head_major_) {
      kernels::ConvertRowFromF32(config_.dtype, src[kv], part + off * row_bytes_, config_.RowElems());
      continue;
    }
    for (int32_t h = 0; h < config_.n_kv_heads; ++h) {
      kernels::ConvertRowFromF32(config_.dtype, src[kv] + static_cast<int64_t>(h) * config_.head_dim,
                                 part + (h * bs + off) * head_bytes_, config_.head_dim);
    }
  }
}

HeadRows KvCache::Head(int32_t layer, int32_t block, int32_t kv_head, int kv) const {
  const uint8_t* part = Part(layer, block, kv);
  if (!head_major_) return HeadRows{part, row_bytes_, static_cast<int64_t>(kv_head) * config_.head_dim};
  return HeadRows{part + static_cast<int64_t>(kv_head) * config_.block_size * head_bytes_, head_bytes_, 0};
}

void KvCache::Read(int32_t layer, int64_t slot, int kv, float* out) const {
  const int64_t bs = config_.block_size;
  const uint8_t* part = Part(layer, slot / bs, kv);
  const int64_t off = slot % bs;
  if (!head_major_) {
    kernels::DequantizeRow(config_.dtype, part + off * row_bytes_, out, config_.RowElems());
    return;
  }
  for (int32_t h = 0; h < config_.n_kv_heads; ++h) {
    kernels::DequantizeRow(config_.dtype, part + (h * bs + off) * head_bytes_,
                           out + static_cast<int64_t>(h) * config_.head_dim, config_.head_dim);
  }
}

void KvCache::LoadBlock(int32_t block, std::span<const uint8_t> bytes) {
  KVS_CHECK(bytes.size() == BlockBytes(block).size());
  uint8_t& dirty = dirty_[static_cast<size_t>(block)];
  num_dirty_ += dirty == 0;
  dirty = 1;
  std::memcpy(Part(0, block, 0), bytes.data(), bytes.size());
}

void KvCache::Release(std::span<const int32_t> block_ids) {
  for (int32_t b : block_ids) {
    uint8_t& dirty = dirty_[static_cast<size_t>(b)];
    if (dirty == 0) continue;
    // MADV_DONTNEED on private anonymous memory drops the pages at once:
    // RSS falls now, and the next touch maps fresh zero pages.
    const int rc = madvise(base_ + static_cast<int64_t>(b) * block_stride_, static_cast<size_t>(block_stride_),
                           MADV_DONTNEED);
    KVS_CHECK_MSG(rc == 0, "madvise(MADV_DONTNEED) on a KV block failed: {}", std::strerror(errno));
    dirty = 0;
    --num_dirty_;
  }
}

}  // namespace kvs::kvcache
