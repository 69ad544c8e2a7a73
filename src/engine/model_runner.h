// ModelRunner: the engine's only view of a model and its KV storage (the
// backend interface). The engine decides what to compute and which KV blocks
// hold which positions; a runner computes. A CPU runner lives in
// src/backend/cpu_runner.h; a fake one for scheduler tests in engine tests; a
// CUDA runner would be another implementation.
//
// KV layout contract: position p of a sequence lives in block
// block_table[p / block_size] at slot p % block_size. Blocks are ids in
// [0, num_blocks); the runner owns the storage for all of them.
// A runner whose model has sliding-window layers may keep them in a second
// KV group (window() > 0): blocks [0, num_window_blocks()) read through
// ForwardSeq::window_block_table, whose entries before each query's window
// are -1 (engine/block_manager.h); the global layers keep block_table.
// Thread-safety: called only from the engine thread.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "kvcache/forward_batch.h"

namespace kvs::engine {

// The batch description is shared with the layers below (model, attention):
// kvcache/forward_batch.h.
using ForwardSeq = kvcache::ForwardSeq;
using ForwardBatch = kvcache::ForwardBatch;

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual int32_t vocab_size() const = 0;
  virtual int32_t block_size() const = 0;
  virtual int32_t num_blocks() const = 0;
  // The sliding layers' window when they have their own KV group; 0: none.
  virtual int32_t window() const { return 0; }
  virtual int32_t num_window_blocks() const { return 0; }
  // Computes every token of the batch, writing its K/V into the blocks, and
  // writes logits [batch.NumLogits(), vocab_size] in the order of the
  // sequences that want them.
  virtual Status Forward(const ForwardBatch& batch, std::span<float> logits) = 0;
  // Returns the memory behind these blocks to the system; they are free (no
  // sequence or cache entry refers to them) and read as unwritten after.
  virtual void ReleaseBlocks(std::span<const int32_t> block_ids) { (void)block_ids; }
  // The same for blocks of the window group.
  virtual void ReleaseWindowBlocks(std::span<const int32_t> block_ids) { (void)block_ids; }
  // A block's KV bytes as stored (every layer, kFull group), for a copy in
  // a KV tier; empty when the runner cannot export blocks.
  virtual std::span<const uint8_t> BlockBytes(int32_t block_id) const {
    (void)block_id;
    return {};
  }
  // Bytes of one block as BlockBytes gives them; 0: the runner cannot
  // export blocks. (A runner whose blocks live in other processes answers
  // without fetching one.)
  virtual int64_t block_bytes() const { return static_cast<int64_t>(BlockBytes(0).size()); }
  // Overwrites a block with bytes BlockBytes gave for this runner's layout.
  // false: the size does not match (nothing written).
  virtual bool LoadBlock(int32_t block_id, std::span<const uint8_t> bytes) {
    (void)block_id;
    (void)bytes;
    return false;
  }
  // Bytes of KV storage currently committed (what the pool adds to RSS).
  virtual int64_t kv_committed_bytes() const { return 0; }
};

}  // namespace kvs::engine
