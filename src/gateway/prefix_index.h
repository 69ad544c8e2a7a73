// PrefixIndex: what the gateway knows of one replica's prefix cache, for
// cache-aware routing (routing.h).
//
// Two sources:
//   * the replica's own index: the chained block hashes it holds, kept in
//     step by polling GET /v1/cache/blocks?epoch=E&since=N (the health
//     checker, every health interval): Apply takes each page (events in
//     order, or a reset with the whole set when the gateway is new, the
//     replica restarted, or the gateway fell behind the replica's log).
//     It is "fresh" while the last poll succeeded within `stale_after`.
//     With a sliding-window model the page also carries the window (W
//     tokens) and the hashes whose window blocks a hit can use (the window
//     group's set, kvcache/cache_events_json.h): a hit of L blocks then also
//     needs the window blocks of [max(0, L * bs - W + 1) / bs, L), the
//     engine's own rule (engine/block_manager.h), so the index never counts
//     a prefix whose window blocks the replica no longer has. Pages without
//     a window (older replicas, models without sliding layers) count the
//     full blocks alone, as before.
//     A replica with a disk KV tier also sends the hashes its disk holds
//     (the kDisk group): a hit goes on past the RAM blocks with blocks on
//     disk, which the replica restores instead of computing (the engine's
//     rule: the RAM prefix, then the blocks its tier holds, in order).
//   * the gateway's own record of the prompts it sent there (Routed), kept
//     for routed_prefix_ttl_seconds (eviction by age): the fallback when the
//     replica's index is stale or missing (an older replica, a failing
//     poll), and the bridge over the poll interval (a prompt sent a moment
//     ago is not in the replica's index yet).
// Match gives the longest run of a request's block hashes either source
// says the replica holds, and which source said so.
// Thread-safety: every method is thread-safe (one mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "kvcache/block_hash.h"

namespace kvs::gateway {

class PrefixIndex {
 public:
  using Clock = std::chrono::steady_clock;
  using BlockHash = kvcache::BlockHash;

  enum class Source { kNone, kReplica, kRouted };
  struct Match {
    int64_t blocks = 0;
    int64_t disk_blocks = 0;  // of `blocks`, the last ones, held on the replica's disk only (kReplica)
    Source source = Source::kNone;
  };

  // "epoch=E&since=N" for the next poll.
  std::string NextQuery() const;
  // Applies one page; false (and stale) when it is malformed. *more: the
  // replica has more events after this page.
  bool Apply(const nlohmann::json& page, Clock::time_point now, bool* more);
  // The poll failed (no answer, an error status, no such endpoint).
  void MarkFailed();

  // The replica's block size (0 until the first page).
  int32_t block_size() const;
  bool Fresh(Clock::time_point now, Clock::duration stale_after) const;

  // Records that the gateway sent a prompt with these block hashes.
  void Routed(std::span<const BlockHash> hashes, Clock::time_point now, Clock::duration ttl);
  // Leading hashes held. The replica's index counts only when fresh; the
  // routing record for entries younger than ttl, or, while the replica's
  // index is fresh, younger than stale_after (the poll's blind spot).
  Match Longest(std::span<const BlockHash> hashes, Clock::time_point now, Clock::duration stale_after,
                Clock::duration ttl) const;

  size_t num_replica_blocks() const;
  size_t num_disk_blocks() const;
  size_t num_routed_blocks() const;
  uint64_t resyncs() const;

 private:
  void PruneRouted(Clock::time_point now, Clock::duration ttl);  // REQUIRES: mu_ held
  // The longest L <= full (hashes[0, full) held) whose needed window
  // blocks are held too. REQUIRES: mu_ held, window_ > 0.
  int64_t LongestWithWindow(std::span<const BlockHash> hashes, int64_t full) const;

  mutable std::mutex mu_;
  std::string epoch_;  // hex, as the replica sends it ("" : none yet)
  uint64_t seq_ = 0;
  int32_t block_size_ = 0;
  int32_t window_ = 0;  // the replica's sliding window (tokens); 0: none, or an older replica
  bool failed_ = true;
  Clock::time_point synced_at_{};
  uint64_t resyncs_ = 0;
  std::unordered_set<BlockHash, kvcache::BlockHashHasher> held_;
  std::unordered_set<BlockHash, kvcache::BlockHashHasher> window_held_;  // window group's hits (window_ > 0)
  std::unordered_set<BlockHash, kvcache::BlockHashHasher> disk_held_;    // on the replica's disk tier
  std::unordered_map<BlockHash, Clock::time_point, kvcache::BlockHashHasher> routed_;
};

}  // namespace kvs::gateway
