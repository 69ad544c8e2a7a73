// KvCache: the storage behind the paged KV cache: K and V of every layer for
// `num_blocks` blocks of `block_size` token slots. A slot is
// block_id * block_size + offset. Which block belongs to which sequence is
// the block manager's business (engine/); this class stores rows and hands
// attention the rows of one KV head of one block.
//
// Layout: one anonymous mapping, block-major, each block a page-aligned
// region of block_stride() bytes:
//   block b: for each layer: K then V, each [heads][block_size][head bytes]
// so one KV head's rows of one block are contiguous (attention streams them).
// Q8_0 / Q4_0 / Q4_1 heads that are not whole 32-value blocks (head_dim % 32 != 0) are
// stored row-major instead: [block_size][row bytes] (HeadRows says which).
//
// Memory follows use: the mapping reserves the whole budget as address space
// only (MAP_NORESERVE); pages are committed by the first write into a block,
// and Release() returns blocks to the system (MADV_DONTNEED: they read as
// zeros again). committed_bytes() counts the blocks written since their last
// release, i.e. what the pool adds to the RSS.
//
// Supported dtypes: F32, F16 (default), BF16, Q8_0 (int8 with one f16 scale
// per 32 values), Q4_0 (4-bit codes with one f16 scale per 32 values:
// llama.cpp's -ctk/-ctv q4_0 bytes), Q4_1 (the same with an f16 minimum per
// block: codes cover [min, max] instead of a range symmetric around 0); for
// the block types the row n_kv_heads * head_dim must be a multiple of 32.
// Thread-safety: Write and Release from one thread (the engine thread, or
// the model's forward pass on it); reads from any thread while no write or
// release runs.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
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

// The rows of one KV head in one block: row i (slot offset i) starts at
// data + i * stride; its head's values are elements [first, first + head_dim)
// of that row (first is 0 in the head-major layout).
struct HeadRows {
  const uint8_t* data;
  int64_t stride;
  int64_t first;
};

class KvCache {
 public:
  static StatusOr<std::unique_ptr<KvCache>> Create(const KvCacheConfig& config);
  ~KvCache();
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  const KvCacheConfig& config() const { return config_; }

  // Stores one token's K and V rows (f32, [n_kv_heads * head_dim]) in `slot`.
  void Write(int32_t layer, int64_t slot, const float* k, const float* v);

  // K (or V) rows of one head of one block.
  HeadRows KHead(int32_t layer, int32_t block, int32_t kv_head) const { return Head(layer, block, kv_head, 0); }
  HeadRows VHead(int32_t layer, int32_t block, int32_t kv_head) const { return Head(layer, block, kv_head, 1); }

  // Dequantized stored row of a slot (f32, [n_kv_heads * head_dim]): tests and
  // the reference attention.
  void ReadK(int32_t layer, int64_t slot, float* out) const { Read(layer, slot, 0, out); }
  void ReadV(int32_t layer, int64_t slot, float* out) const { Read(layer, slot, 1, out); }

  // The stored bytes of one block (every layer's K and V, as laid out
  // above): what a copy of the block elsewhere (the disk tier) keeps.
  std::span<const uint8_t> BlockBytes(int32_t block) const {
    return {Part(0, block, 0), static_cast<size_t>(2 * config_.num_layers * part_bytes_)};
  }
  // Overwrites one block with bytes BlockBytes gave (same config).
  // REQUIRES: bytes.size() == BlockBytes(block).size().
  void LoadBlock(int32_t block, std::span<const uint8_t> bytes);

  // Returns the memory of these blocks to the system. Their contents are
  // gone (zeros); the caller guarantees no sequence still needs them.
  void Release(std::span<const int32_t> block_ids);
  // Bytes of blocks written since their last release (committed memory).
  int64_t committed_bytes() const { return num_dirty_ * block_stride_; }
  int64_t block_stride() const { return block_stride_; }
  // Whether heads are stored head-major (HeadRows::first == 0 always).
  bool head_major() const { return head_major_; }

 private:
  explicit KvCache(const KvCacheConfig& c) : config_(c) {}
  // Part `kv` (0 = K, 1 = V) of `layer` in `block`.
  uint8_t* Part(int32_t layer, int64_t block, int kv) const {
    return base_ + block * block_stride_ + (2 * static_cast<int64_t>(layer) + kv) * part_bytes_;
  }
  HeadRows Head(int32_t layer, int32_t block, int32_t kv_head, int kv) const;
  void Read(int32_t layer, int64_t slot, int kv, float* out) const;

  KvCacheConfig config_;
  bool head_major_ = true;
  int64_t head_bytes_ = 0;    // one head's values of one token (head-major)
  int64_t row_bytes_ = 0;     // one token's K (or V) row
  int64_t part_bytes_ = 0;    // block_size rows: the K (or V) of one layer in one block
  int64_t block_stride_ = 0;  // 2 * num_layers * part_bytes_, rounded up to whole pages
  uint8_t* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  std::vector<uint8_t> dirty_;  // [num_blocks] written since the last release
  int64_t num_dirty_ = 0;
};

}  // namespace kvs::kvcache
