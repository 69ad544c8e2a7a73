// DiskTier: the KvTier (kv_tier.h) of a DiskKvStore (kvcache/disk_store.h):
// a published block's bytes are copied from the runner and queued for the
// store's writer (the disk write is off the engine thread; the copy is one
// memcpy of the block); the blocks of a queued request are read and checked
// ahead on the store's reader thread (Prefetch), and a restore loads the
// bytes into the pool block on the engine thread, timed (reading the file
// there only when it was not read ahead).
// Thread-safety: engine thread only (the store itself is thread-safe).
#pragma once

#include <cstdint>

#include "engine/kv_tier.h"
#include "engine/model_runner.h"
#include "kvcache/disk_store.h"

namespace kvs::engine {

class DiskTier : public KvTier {
 public:
  DiskTier(ModelRunner* runner, kvcache::DiskKvStore* store) : runner_(runner), store_(store) {}

  bool Holds(const kvcache::BlockHash& h) const override { return store_->Contains(h); }
  bool Restore(const kvcache::DiskBlockMeta& meta, int32_t block_id) override;
  void Published(const kvcache::DiskBlockMeta& meta, int32_t block_id) override;
  void Prefetch(std::vector<kvcache::DiskBlockMeta> metas) override;

  int64_t restored_blocks() const { return restored_blocks_; }
  // Wall time of the restores (read, check, load), seconds.
  double restore_seconds() const { return restore_seconds_; }

 private:
  ModelRunner* runner_;
  kvcache::DiskKvStore* store_;
  int64_t restored_blocks_ = 0;
  double restore_seconds_ = 0;
};

}  // namespace kvs::engine
