// DiskKvStore: the second KV tier: a bounded directory of KV blocks, one file
// per block, keyed by the block's chained hash (kvcache/block_hash.h), that
// outlives the process. The engine writes each block it publishes in the
// prefix cache (write-through: a block evicted from RAM, or held at a crash
// or a restart, is already here) and restores blocks a prefix lookup finds
// here instead of recomputing them.
//
// A block file (little-endian):
//   header  magic "KVSDISK1" | fingerprint u64 | hash lo,hi u64 | parent lo,hi u64
//           | num_tokens u32 | salt_len u32 | payload_bytes u64 | checksum u64
//   tokens  [num_tokens] int32: the token ids whose KV the block holds
//   salt    [salt_len] bytes: the cache salt (first blocks of a chain only)
//   payload [payload_bytes]: the block's KV bytes as the runner stores them
// checksum = XXH3-64 over the whole file with the checksum field zeroed.
// The fingerprint names what the bytes mean (model file, KV dtype, block
// size, layer and head shapes: the caller's business); a file of another
// fingerprint is foreign.
//
// Trust: a file is never served on its key alone. Get compares the stored
// parent hash, tokens and salt with what the caller expects (the same
// induction as the RAM prefix cache: a chain verified block by block from
// its root holds exactly this prefix's KV, so even a forced hash collision is
// a miss) and the checksum of the whole file. A corrupt, truncated or
// foreign file is deleted and counted, never returned.
//
// Bounds: the files' bytes stay <= max_bytes: a write beyond it deletes the
// least recently used blocks first (recency survives a restart as the
// files' modification times). Writes are asynchronous: Put queues a copy
// and returns; one writer thread writes each to a temporary name and
// renames it, so a reader (or a restart) only ever sees whole files. The
// queue holds at most max_pending_bytes; a Put beyond it is dropped and
// counted (the block is only lost to the disk tier). A failed write (a full
// disk, a file size limit) is counted and its temporary file removed.
// Thread-safety: every method is thread-safe (the engine thread puts and
// gets, the writer thread writes, metrics readers read stats()).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "kvcache/block_hash.h"

namespace kvs::kvcache {

struct DiskStoreConfig {
  std::string path;                  // directory (created if missing)
  int64_t max_bytes = 0;             // > 0: bound on the block files' bytes
  uint64_t fingerprint = 0;          // what the payload bytes mean
  int64_t max_pending_bytes = 256LL << 20;  // queued, not yet written
  int64_t max_prefetch_bytes = 64LL << 20;  // read ahead (queued or read), not yet claimed by a Get
};

// What a block file says about its block besides the KV bytes.
struct DiskBlockMeta {
  BlockHash hash;
  BlockHash parent;             // the previous block's hash, or the chain root
  std::vector<int32_t> tokens;  // [block_size]
  std::string salt;             // cache salt (block 0 of a chain), else ""
};

struct DiskStoreStats {
  int64_t blocks = 0;           // files held now
  int64_t bytes = 0;            // their bytes
  int64_t pending_bytes = 0;    // queued for the writer
  int64_t written_blocks = 0;
  int64_t written_bytes = 0;
  int64_t read_blocks = 0;      // served by Get
  int64_t read_bytes = 0;
  int64_t evicted_blocks = 0;   // deleted to stay under max_bytes
  int64_t dropped_corrupt = 0;  // failed the checksum, were truncated or did not match what was expected
  int64_t dropped_foreign = 0;  // another fingerprint (or not a block file at all)
  int64_t write_errors = 0;     // the file system refused a write
  int64_t queue_full = 0;       // Puts dropped: the writer was behind by max_pending_bytes
  int64_t prefetched_blocks = 0;  // read ahead by the reader thread
  int64_t prefetch_hits = 0;      // Gets served from what was read ahead (no file read on the caller's thread)
  int64_t prefetch_unused = 0;    // read ahead, then dropped unclaimed (the bound, or the block went)
};

class DiskKvStore {
 public:
  // Opens (creates) the directory, indexes the block files there (headers
  // only; foreign and malformed ones are deleted, temporary ones too) and
  // starts the writer.
  static StatusOr<std::unique_ptr<DiskKvStore>> Open(const DiskStoreConfig& config);
  // Writes what is queued, then stops the writer.
  ~DiskKvStore();
  DiskKvStore(const DiskKvStore&) = delete;
  DiskKvStore& operator=(const DiskKvStore&) = delete;

  // Whether a file for this hash is indexed (written and not evicted).
  bool Contains(const BlockHash& h) const;
  // Queues a block for writing. false: not queued (held or queued already,
  // or the queue is full).
  bool Put(DiskBlockMeta meta, std::vector<uint8_t> payload);
  // The payload of the block `expect.hash` when its file holds exactly the
  // block `expect` describes (parent, tokens, salt) with `payload_bytes`
  // bytes and a good checksum; else an error (NotFound, or the file is
  // deleted as corrupt and DataLoss returned).
  // A block being read ahead (Prefetch) is waited for; one read ahead
  // already is handed over without touching the file.
  StatusOr<std::vector<uint8_t>> Get(const DiskBlockMeta& expect, int64_t payload_bytes);
  // Reads these blocks ahead, in order, on a reader thread (read, check as
  // Get does, keep the payload), so that a Get soon after copies no file on
  // the caller's thread: the engine prefetches the tier blocks of each
  // request it queues and restores them when it admits the request. What is
  // read ahead stays under max_prefetch_bytes (the oldest unclaimed go
  // first); blocks beyond that bound, or not indexed, are not queued.
  void Prefetch(std::vector<DiskBlockMeta> metas, int64_t payload_bytes);
  // `listener(hash, true)` for each block the index gains (its file was
  // written) and `listener(hash, false)` for each it loses (evicted, dropped
  // as corrupt, found missing): first, at this call, once for every block
  // indexed already. It runs under the store's lock, on the thread that
  // changed the index, so its calls are in the index's order; it must not
  // call the store. The replica's cache-event log (kvcache/cache_events.h,
  // group kDisk) listens, so routers see what the disk holds.
  using IndexListener = std::function<void(const BlockHash& hash, bool held)>;
  void SetIndexListener(IndexListener listener);
  // Blocks until the queue is written (tests, shutdown).
  void Flush();
  DiskStoreStats stats() const;
  const DiskStoreConfig& config() const { return config_; }

 private:
  struct Pending {
    DiskBlockMeta meta;
    std::vector<uint8_t> payload;
  };
  struct ReadAhead {
    DiskBlockMeta meta;
    int64_t payload_bytes = 0;
    std::vector<uint8_t> payload;  // empty while queued
    std::list<BlockHash>::iterator order;  // position in ahead_order_ (front: oldest)
  };
  struct Entry {
    int64_t bytes = 0;
    std::list<BlockHash>::iterator lru;  // position in lru_ (front: oldest)
  };

  explicit DiskKvStore(DiskStoreConfig config) : config_(std::move(config)) {}
  Status Scan();
  void WriterLoop();
  void ReaderLoop();
  // Reads and checks the block file of `expect` (Get without the read-ahead).
  StatusOr<std::vector<uint8_t>> ReadChecked(const DiskBlockMeta& expect, int64_t payload_bytes);
  // Forgets a read-ahead entry. REQUIRES: mu_ held.
  void ForgetAheadLocked(std::unordered_map<BlockHash, ReadAhead, BlockHashHasher>::iterator it);
  // Writes one block's file; its bytes, or an error.
  StatusOr<int64_t> WriteFile(const Pending& p) const;
  std::string FileFor(const BlockHash& h) const;
  // Deletes the file of an indexed block and unindexes it. REQUIRES: mu_ held.
  void DropLocked(BlockHash h);
  // Evicts the least recently used blocks until bytes_ <= max_bytes. REQUIRES: mu_ held.
  void EvictLocked();

  const DiskStoreConfig config_;
  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the writer waits for work or stop
  std::condition_variable idle_cv_;  // Flush waits for an empty queue
  std::unordered_map<BlockHash, Entry, BlockHashHasher> index_;  // guarded by mu_
  std::list<BlockHash> lru_;                                     // guarded by mu_
  std::deque<Pending> queue_;                                    // guarded by mu_
  std::unordered_set<BlockHash, BlockHashHasher> queued_;        // guarded by mu_
  bool writing_ = false;                                         // guarded by mu_: a write is in flight
  bool stop_ = false;                                            // guarded by mu_
  int64_t bytes_ = 0;                                            // guarded by mu_
  DiskStoreStats stats_;                                         // guarded by mu_ (blocks/bytes filled on read)
  IndexListener listener_;                                       // guarded by mu_
  // Read-ahead: entries queued (payload empty) or read; ahead_order_ holds
  // their hashes oldest first, reads_ those still to read, in order.
  std::condition_variable read_cv_;       // the reader waits for work or stop
  std::condition_variable read_done_cv_;  // a Get waits for the block being read
  std::unordered_map<BlockHash, ReadAhead, BlockHashHasher> ahead_;  // guarded by mu_
  std::list<BlockHash> ahead_order_;                                 // guarded by mu_
  std::deque<BlockHash> reads_;                                      // guarded by mu_
  int64_t ahead_bytes_ = 0;                                          // guarded by mu_: payload bytes queued or read
  std::optional<BlockHash> reading_;                                 // guarded by mu_: the block being read
  std::thread writer_;
  std::thread reader_;
};

}  // namespace kvs::kvcache
