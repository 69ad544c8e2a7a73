// PrefixCacheEvents: the log of what a replica's prefix cache holds, for
// routers outside the process (the gateway's cache-aware routing).
//
// The BlockManager reports every block hash it publishes (Stored) and every
// published block it evicts (Evicted); each event gets the next sequence
// number (1, 2, ...). Events are of one of two groups: kFull (the global
// layers' blocks, the chain a hit walks) and, for a model with sliding
// layers, kWindow: the hashes whose window block a hit may use, i.e. a
// published window block whose twin (block_manager.h) is still the kFull
// block published under that hash. A hit of L blocks needs kFull hashes
// 0..L-1 and the kWindow hashes of blocks [FirstWindowBlock(L * bs), L);
// a reader with both sets computes what MatchPrefix would hit. A hash may
// be reported evicted from kWindow twice (its twin went, then the block);
// the held sets are sets, so that changes nothing. A replica with a disk
// KV tier (kvcache/disk_store.h) also reports kDisk: the hashes whose block
// file the store holds (written, indexed at start-up; gone when evicted or
// dropped). A hit then goes on past the RAM blocks with blocks on disk,
// which the replica restores instead of computing (engine/block_manager.h).
// A reader polls Since(epoch, seq it has applied) and gets the events
// after it, in order, or -- when it is new, restarted (other epoch),
// or so far behind that the log no longer holds what it missed -- a reset:
// the whole set of hashes held now, with the sequence number it is current
// at. Applying a reset then every later page reproduces the held set
// exactly (test: cache_events_test).
//
// `epoch` is random per log: a replica that restarted numbers from 1 again,
// and a reader that compares epochs never mixes the two histories.
// Memory: the held sets (16 bytes a block of each group) plus at most `capacity` events.
// Thread-safety: every method is thread-safe (one mutex; the engine thread
// writes, HTTP threads read).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "kvcache/block_hash.h"

namespace kvs::kvcache {

enum class CacheGroup : uint8_t { kFull = 0, kWindow = 1, kDisk = 2 };

struct CacheEvent {
  bool stored = true;  // false: evicted
  BlockHash hash;
  CacheGroup group = CacheGroup::kFull;
};

struct CacheEventsPage {
  uint64_t epoch = 0;
  uint64_t seq = 0;      // the reader is current up to this event after applying the page
  bool reset = false;    // `blocks` is the whole held set; forget what was known
  bool more = false;     // events after `seq` were left for the next page
  std::vector<BlockHash> blocks;         // reset only: the kFull held set
  std::vector<BlockHash> window_blocks;  // reset only: the kWindow held set
  std::vector<BlockHash> disk_blocks;    // reset only: the kDisk held set
  std::vector<CacheEvent> events;        // !reset: events (since, seq] of both groups, in order
};

class PrefixCacheEvents {
 public:
  explicit PrefixCacheEvents(size_t capacity = 1 << 16);

  void Stored(const BlockHash& h, CacheGroup g = CacheGroup::kFull);
  void Evicted(const BlockHash& h, CacheGroup g = CacheGroup::kFull);

  // Events after `since` of log `epoch` (at most max_events of them), or a
  // reset when `epoch` is not this log's (0: the reader knows nothing yet).
  CacheEventsPage Since(uint64_t epoch, uint64_t since, size_t max_events) const;
  uint64_t epoch() const { return epoch_; }
  size_t num_held(CacheGroup g = CacheGroup::kFull) const;

 private:
  void Append(bool stored, const BlockHash& h, CacheGroup g);  // REQUIRES: mu_ held
  std::unordered_set<BlockHash, BlockHashHasher>& held(CacheGroup g) {  // REQUIRES: mu_ held
    return g == CacheGroup::kWindow ? window_held_ : g == CacheGroup::kDisk ? disk_held_ : held_;
  }
  const std::unordered_set<BlockHash, BlockHashHasher>& held(CacheGroup g) const {  // REQUIRES: mu_ held
    return g == CacheGroup::kWindow ? window_held_ : g == CacheGroup::kDisk ? disk_held_ : held_;
  }

  const size_t capacity_;
  const uint64_t epoch_;
  mutable std::mutex mu_;
  std::deque<CacheEvent> log_;                                 // guarded by mu_; events (next_seq_ - size, next_seq_)
  uint64_t last_seq_ = 0;                                      // guarded by mu_
  std::unordered_set<BlockHash, BlockHashHasher> held_;        // guarded by mu_
  std::unordered_set<BlockHash, BlockHashHasher> window_held_; // guarded by mu_
  std::unordered_set<BlockHash, BlockHashHasher> disk_held_;   // guarded by mu_
};

// 32 lowercase hex digits: hi then lo (the wire form of a block hash).
std::string BlockHashHex(const BlockHash& h);
bool ParseBlockHashHex(std::string_view s, BlockHash* out);

}  // namespace kvs::kvcache
