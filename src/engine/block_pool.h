// BlockPool: one KV group's block ids [0, num_blocks) with reference counts,
// a free list, an LRU of cached blocks and the hash index of the published
// ones. The bookkeeping under BlockManager (engine/block_manager.h), which
// holds one pool per KV group (all layers; or global layers and sliding
// layers) and decides what a hit or a commit means. The runner owns the
// bytes; a pool owns ids only.
//
// Every block is in exactly one state:
//   used    ref_count > 0;
//   cached  ref_count == 0 with a published hash: reusable, evictable, kept
//           in LRU order (oldest freed evicted first);
//   free    ref_count == 0 without a hash.
// Invariant: num_free() + num_cached() + num_used() == num_blocks().
// A block's generation changes each time it is handed out for new KV, so a
// (id, generation) pair names one content of a block.
// Chained pools (set_chained; BlockManager's full group, where a block's link
// is the previous block of the same pool): when a block's KV stops being
// published (evicted by Take, or Unpublish), the blocks published against it
// can never verify again, so they are unpublished too, down the chain
// (cached ones become free; used ones keep their KV and lose the hash).
// Invariant there: every published block's link is published and still has
// the generation the block was published against.
//
// Memory: a block handed out may hold committed memory in the runner's
// storage ("dirty") until TakeIdleFree returns it for release. Free blocks
// are reused most recently freed first, so a burst reuses warm blocks and
// the long-unused ones sink to where TakeIdleFree finds them.
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvcache/block_hash.h"
#include "kvcache/cache_events.h"
#include "engine/sequence.h"

namespace kvs::engine {

class BlockPool {
 public:
  struct Block {
    int32_t ref_count = 0;
    uint64_t generation = 0;          // bumped each time the block is handed out for new KV
    std::optional<kvcache::BlockHash> hash;    // published; then also link/tokens/salt are set
    // The block this one's KV was verified against when published, and its
    // generation then (BlockManager's meaning: the previous block of the
    // same pool, or the twin in another pool); -1: none.
    int32_t link = -1;
    uint64_t link_generation = 0;
    std::vector<int32_t> tokens;      // [block_size] tokens whose KV the block holds
    std::string salt;                 // first blocks only
    int32_t lru_prev = -1;            // LRU links while cached
    int32_t lru_next = -1;
    bool dirty = false;               // used since its memory was last released
    Clock::time_point freed_at;       // when it last became free
  };

  explicit BlockPool(int32_t num_blocks);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_ids_.size()); }
  int32_t num_cached() const { return lru_size_; }
  int32_t num_used() const { return num_used_; }
  // Blocks Take may hand out: free ones, then evicted cached ones.
  int32_t num_available() const { return num_free() + num_cached(); }
  const Block& block(int32_t id) const { return blocks_[static_cast<size_t>(id)]; }

  // A free block, else the oldest cached one (evicted): ref 1, new generation.
  // REQUIRES: num_available() > 0.
  int32_t Take();
  // One more reference to a used or cached block (a prefix hit).
  void Ref(int32_t id);
  // Drops one reference; at 0 the block becomes cached (published) or free.
  void Release(int32_t id);

  // The published block with this hash; -1 if none.
  int32_t Find(const kvcache::BlockHash& h) const;
  bool IsPublished(const kvcache::BlockHash& h) const { return hash_to_block_.count(h) != 0; }
  // Drops the hash of a cached block (one that can no longer be a valid
  // hit): it becomes free.
  void Unpublish(int32_t id);
  // Publishes a used, unpublished block under a hash nobody else holds.
  void Publish(int32_t id, const kvcache::BlockHash& h, int32_t link, uint64_t link_generation, std::span<const int32_t> tokens,
               const std::string& salt);

  // Free (not cached) blocks that may hold committed memory and were freed
  // before `cutoff`, oldest first; they count as clean afterwards.
  std::vector<int32_t> TakeIdleFree(Clock::time_point cutoff);
  // When the longest-free dirty block was freed; nullopt if there is none.
  std::optional<Clock::time_point> OldestDirtyFree() const;
  int32_t num_dirty_free() const { return num_dirty_free_; }

  // Recounts every state; "" when consistent, else what is wrong.
  std::string CheckInvariants() const;

  // Makes the pool chained (see above). `on_dropped` (may be empty) hears of
  // each block unpublished because its link went, before its hash is dropped.
  void set_chained(std::function<void(int32_t id)> on_dropped);

  // Reports every published and evicted hash to `events` (nullptr: none)
  // as events of `group`.
  void set_events(kvcache::PrefixCacheEvents* events, kvcache::CacheGroup group) {
    events_ = events;
    group_ = group;
  }
  // The block the next Take evicts (the oldest cached one when none is
  // free); -1 when it takes a free block.
  int32_t next_evicted() const { return free_ids_.empty() ? lru_head_ : -1; }

 private:
  void LruPushBack(int32_t id);
  void LruRemove(int32_t id);
  // Drops a block's hash (index, event); a cached block becomes free.
  void DropHash(int32_t id);
  // Chained pools: unpublishes the blocks published against block `id` at
  // generation `generation`, and theirs in turn.
  void DropDependents(int32_t id, uint64_t generation);

  kvcache::PrefixCacheEvents* events_ = nullptr;
  kvcache::CacheGroup group_ = kvcache::CacheGroup::kFull;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_ids_;  // stack; dirty entries are in freed_at order
  size_t clean_below_ = 0;         // free_ids_[0, clean_below_) are all clean
  int32_t num_dirty_free_ = 0;
  int32_t lru_head_ = -1;          // oldest cached
  int32_t lru_tail_ = -1;
  int32_t lru_size_ = 0;
  int32_t num_used_ = 0;
  std::unordered_map<kvcache::BlockHash, int32_t, kvcache::BlockHashHasher> hash_to_block_;
  bool chained_ = false;
  std::function<void(int32_t)> on_dropped_;
  // Chained pools: [num_blocks] the blocks published with this one as link
  // (entries go stale when those are dropped or reused; checked on use).
  std::vector<std::vector<int32_t>> dependents_;
};

}  // namespace kvs::engine
