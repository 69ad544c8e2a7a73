// KvTier: a KV store below the RAM block pool (the disk tier,
// kvcache/disk_store.h, through the runner's bytes). The BlockManager asks it,
// past the end of a RAM prefix hit, which further blocks it holds
// (Holds), has it copy those into newly allocated pool blocks at admission
// (Restore), and tells it of every block it publishes (Published), whose KV
// the tier may keep; when a request is queued, the blocks a restore would
// read are announced (Prefetch), so the tier can read them ahead. A block the tier cannot restore exactly (missing,
// corrupt, another prefix under the same hash) is recomputed: Restore says
// false, and the hit stops there.
// Thread-safety: called only from the engine thread.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcache/disk_store.h"

namespace kvs::engine {

class KvTier {
 public:
  virtual ~KvTier() = default;
  // Whether the tier holds a block under this hash (an index lookup).
  virtual bool Holds(const kvcache::BlockHash& h) const = 0;
  // Writes into pool block `block_id` the KV of the block `meta` describes;
  // false when the tier has no such block (it then holds none under its hash).
  virtual bool Restore(const kvcache::DiskBlockMeta& meta, int32_t block_id) = 0;
  // Pool block `block_id` now holds the KV of the block `meta` describes.
  virtual void Published(const kvcache::DiskBlockMeta& meta, int32_t block_id) = 0;
  // These blocks (in order) will likely be restored soon: a request that
  // holds them was queued. The tier may read them ahead, off this thread.
  virtual void Prefetch(std::vector<kvcache::DiskBlockMeta> metas) = 0;
};

}  // namespace kvs::engine
