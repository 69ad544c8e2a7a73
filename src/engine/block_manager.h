// BlockManager: owns the KV block ids [0, num_blocks) (the runner owns the
// bytes) and the prefix cache over them. Blocks are ids with reference
// counts, never pointers.
//
// Every block is in exactly one state:
//   used    ref_count > 0: in some sequence's block_table (shared when > 1);
//   cached  ref_count == 0 with a published hash: reusable by a prefix hit,
//           evictable, kept in LRU order (oldest freed evicted first);
//   free    ref_count == 0 without a hash.
// Invariant: num_free() + num_cached() + num_used() == num_blocks().
//
// Prefix cache: only FULL blocks are hashed, as a chain of 128-bit hashes
// (engine/block_hash.h defines it: XXH3-128 over the parent hash and the
// block's token ids, rooted at the hash of the cache salt), so a hash names
// the whole prefix up to its block and two salts never share a block.
// A hash is only an index: a hit also compares the block's token ids, the
// identity of its parent (the block matched at i-1, still holding the KV it
// held when this block was published: ids plus a generation that changes
// whenever a block is reused) and, for block 0, the salt. By induction a hit
// on block i holds KV computed for exactly this prefix, so even a forced
// hash collision is a miss, never another prefix's KV.
// A block's hash is published only by CommitComputed, after the forward pass
// wrote its KV: nobody can hit a block whose KV is missing. A lookup never
// covers the last token of a sequence, so at least one token is computed
// (its logits are the point). With caching disabled nothing is published and
// every freed block is free.
//
// Check, then commit: CanAllocate/CanAppend are dry runs; Allocate/Append
// change state and CHECK that the dry run would have passed.
//
// Memory: a block handed to a sequence may hold committed memory in the
// runner's storage ("dirty") until TakeIdleFree returns it for release.
// Free blocks are reused most recently freed first, so a burst reuses warm
// blocks and the long-unused ones sink to where TakeIdleFree finds them.
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_hash.h"
#include "engine/cache_events.h"
#include "engine/sequence.h"

namespace kvs::engine {

// The cached blocks that hold a prefix of a sequence (MatchPrefix).
struct PrefixMatch {
  std::vector<int32_t> block_ids;  // [num_blocks matched], in position order
  int32_t num_evictable = 0;       // how many of them are cached (ref 0), not used
  int32_t num_tokens(int32_t block_size) const {
    return static_cast<int32_t>(block_ids.size()) * block_size;
  }
};

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching);
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  int32_t num_free() const { return static_cast<int32_t>(free_ids_.size()); }
  int32_t num_cached() const { return lru_size_; }
  int32_t num_used() const { return num_used_; }
  // Blocks an allocation may take: free ones, then evicted cached ones.
  int32_t num_available() const { return num_free() + num_cached(); }

  // Longest run of cached full blocks that starts the sequence's tokens,
  // never covering its last token. Read-only for the pool; it caches the
  // sequence's block hashes in seq.block_hashes. REQUIRES: seq holds no blocks.
  PrefixMatch MatchPrefix(Sequence& seq) const;

  // Whether Allocate(seq, match, num_positions) would succeed while leaving at
  // least `reserve` blocks available.
  bool CanAllocate(const PrefixMatch& match, int32_t num_positions, int32_t reserve = 0) const;
  // Gives a sequence without blocks the matched blocks (one more reference
  // each) plus new blocks up to `num_positions` positions. Sets
  // num_computed_tokens to the matched tokens and counts query/hit tokens.
  // REQUIRES: CanAllocate(match, num_positions); match from MatchPrefix(seq)
  // with no state change in between.
  void Allocate(Sequence& seq, const PrefixMatch& match, int32_t num_positions);

  // Whether the block table of `seq` can grow to cover `num_positions`.
  bool CanAppend(const Sequence& seq, int32_t num_positions) const;
  // REQUIRES: CanAppend(seq, num_positions).
  void Append(Sequence& seq, int32_t num_positions);

  // Publishes the hashes of the sequence's full blocks whose KV is now
  // written (below num_computed_tokens). Call after each forward pass.
  void CommitComputed(Sequence& seq);

  // Drops the sequence's references (tail first, so its prefix blocks outlive
  // its tail in the LRU) and clears its block table.
  void Free(Sequence& seq);

  // Free (not cached) blocks that may hold committed memory and were freed
  // before `cutoff`, oldest first; they count as clean afterwards. The caller
  // returns their memory (ModelRunner::ReleaseBlocks).
  std::vector<int32_t> TakeIdleFree(Clock::time_point cutoff);
  // When the longest-free dirty block was freed; nullopt if there is none.
  std::optional<Clock::time_point> OldestDirtyFree() const;
  int32_t num_dirty_free() const { return num_dirty_free_; }

  // Metrics: prompt tokens looked up at admissions, and those found cached.
  int64_t num_query_tokens() const { return num_query_tokens_; }
  int64_t num_hit_tokens() const { return num_hit_tokens_; }
  int32_t ref_count(int32_t block_id) const { return blocks_[static_cast<size_t>(block_id)].ref_count; }

  // Recounts every state; "" when consistent, else what is wrong.
  std::string CheckInvariants() const;

  // Reports every published and evicted hash to `events` (nullptr: none);
  // it must outlive the manager.
  void set_events(PrefixCacheEvents* events) { events_ = events; }

  // Tests only: replaces the chain hash (to force collisions).
  using HashFn = BlockHash (*)(const BlockHash& parent, std::span<const int32_t> tokens);
  void TEST_SetHashFunction(HashFn fn) { hash_fn_ = fn; }

 private:
  struct Block {
    int32_t ref_count = 0;
    uint64_t generation = 0;          // bumped each time the block is handed out for new KV
    std::optional<BlockHash> hash;    // published; then also parent/tokens/salt are set
    int32_t parent = -1;              // the block holding the previous block's KV; -1 for block 0
    uint64_t parent_generation = 0;   // parent's generation when this block was published
    std::vector<int32_t> tokens;      // [block_size] tokens whose KV the block holds
    std::string salt;                 // first blocks only
    int32_t lru_prev = -1;         // LRU links while cached
    int32_t lru_next = -1;
    bool dirty = false;            // used since its memory was last released
    Clock::time_point freed_at;    // when it last became free
  };

  // Fills seq.block_hashes for its first `n` full blocks.
  void EnsureHashes(Sequence& seq, int32_t n) const;
  // Whether cached block b holds the KV of `tokens` after the KV of block
  // `parent` (-1: at the start of a sequence with this salt).
  bool Verifies(const Block& b, int32_t parent, std::span<const int32_t> tokens, const std::string& salt) const;
  int32_t TakeBlock();  // a free block, else the oldest cached one (evicted)
  void Release(int32_t id);
  void LruPushBack(int32_t id);
  void LruRemove(int32_t id);

  int32_t block_size_;
  bool prefix_caching_;
  HashFn hash_fn_;
  PrefixCacheEvents* events_ = nullptr;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_ids_;  // stack; dirty entries are in freed_at order
  size_t clean_below_ = 0;         // free_ids_[0, clean_below_) are all clean
  int32_t num_dirty_free_ = 0;
  int32_t lru_head_ = -1;          // oldest cached
  int32_t lru_tail_ = -1;
  int32_t lru_size_ = 0;
  int32_t num_used_ = 0;
  std::unordered_map<BlockHash, int32_t, BlockHashHasher> hash_to_block_;
  int64_t num_query_tokens_ = 0;
  int64_t num_hit_tokens_ = 0;
};

}  // namespace kvs::engine
