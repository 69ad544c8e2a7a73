// BlockManager: owns the KV block ids (the runner owns the bytes) and the
// prefix cache over them. Blocks are ids with reference counts, never
// pointers; each KV group's ids live in a BlockPool (engine/block_pool.h:
// used / cached / free states, LRU, idle memory).
//
// KV groups: a model without sliding-window layers has one group, kFull
// (every layer, seq.block_table). A model with sliding layers of window W
// (WindowGroupConfig) has two: kFull holds its global layers (zero of them
// for an all-sliding model: then its blocks are bookkeeping only, still the
// chain the prefix cache verifies), kWindow its sliding layers, through
// seq.window_block_table (same indexing: position p in entry p / block_size).
// A query at p sees keys (p - W, p], so once num_computed_tokens = c, window
// blocks before FirstWindowBlock(c) are never read again: CommitComputed
// drops their reference and their entry becomes -1 (seq.num_window_dropped
// counts those leading entries). A sequence thus holds about W / block_size
// + 1 window blocks however long it grows, plus the blocks of its chunk.
//
// Prefix cache: only FULL blocks are hashed, as a chain of 128-bit hashes
// (kvcache/block_hash.h defines it: XXH3-128 over the parent hash and the
// block's token ids, rooted at the hash of the cache salt), so a hash names
// the whole prefix up to its block and two salts never share a block.
// A hash is only an index: a hit also compares the block's token ids, the
// identity of its parent (the block matched at i-1, still holding the KV it
// held when this block was published: ids plus a generation that changes
// whenever a block is reused) and, for block 0, the salt. By induction a hit
// on block i holds KV computed for exactly this prefix, so even a forced
// hash collision is a miss, never another prefix's KV.
// With a window group, a hit of L blocks also needs the window blocks that
// queries from position L * block_size on still see ([FirstWindowBlock(L *
// block_size), L)) cached in kWindow and verified: same hash, same tokens
// (and salt for block 0) and the same "twin": the kFull block (id and
// generation) at the same index when the window block was published, which
// the kFull match just proved holds exactly this prefix. Otherwise L shrinks
// to the longest prefix whose window blocks are all there (possibly 0).
// A window block's twin is the published kFull block of its hash: the
// sequence's own, or (when its own is a private duplicate) the published one
// if that verifies against the previous block's twin, so a prefix whose
// window blocks were evicted is published again by the next sequence that
// recomputes it; a window block without such a twin stays private. A cached
// window block that no longer verifies against the twin of its hash is
// replaced when that prefix is committed again.
// A block's hash is published only by CommitComputed, after the forward pass
// wrote its KV: nobody can hit a block whose KV is missing. A lookup never
// covers the last token of a sequence, so at least one token is computed
// (its logits are the point). With caching disabled nothing is published and
// every freed block is free.
// PrefixCacheEvents: kFull reports its published and evicted hashes; kWindow
// reports a hash as held while its cached window block still verifies
// against its twin: published, and gone when either the window block or
// its twin goes (a twin is only ever replaced after that, so that is when
// the window block stops being a hit). A full block is published only after
// the published block before it (not after a private duplicate, which no
// hit reaches), and when a full block's content goes (evicted or
// unpublished) the full blocks published after it are unpublished with it
// (BlockPool's chained mode): so every hash held is reachable, and a router
// replaying both sets and the window rule above gets exactly the L
// MatchPrefix would (cache_events_test).
//
// Check, then commit: CanAllocate/CanAppend are dry runs over every group;
// Allocate/Append change state and CHECK that the dry run would have passed.
// Thread-safety: none; owned by the engine thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "kvcache/block_hash.h"
#include "engine/block_pool.h"
#include "engine/kv_tier.h"
#include "kvcache/cache_events.h"
#include "engine/sequence.h"

namespace kvs::engine {

// The cached blocks that hold a prefix of a sequence (MatchPrefix).
struct PrefixMatch {
  std::vector<int32_t> block_ids;  // [num_blocks matched], in position order
  int32_t num_evictable = 0;       // how many of them are cached (ref 0), not used
  // Blocks right after block_ids that the KV tier holds (set_tier): they
  // take new pool blocks and Allocate restores them instead of computing.
  int32_t num_tier_blocks = 0;
  // With a window group: [block_ids.size()] window blocks, -1 before the window.
  std::vector<int32_t> window_block_ids;
  int32_t num_window_evictable = 0;
  // Tokens the RAM pool holds.
  int32_t num_tokens(int32_t block_size) const {
    return static_cast<int32_t>(block_ids.size()) * block_size;
  }
  // Tokens the RAM pool and the tier hold.
  int32_t num_tokens_with_tier(int32_t block_size) const {
    return (static_cast<int32_t>(block_ids.size()) + num_tier_blocks) * block_size;
  }
};

enum class KvGroup { kFull = 0, kWindow = 1 };

// The sliding layers' group: its block count and their window (tokens).
struct WindowGroupConfig {
  int32_t num_blocks = 0;
  int32_t window = 0;  // > 0 when there is a window group
};

// The most window blocks one sequence holds at once when a forward pass
// computes at most `max_chunk_tokens` of it: after c computed tokens it
// keeps [FirstWindowBlock(c), ...) and a chunk adds entries up to
// c + max_chunk_tokens, at most ceil((W - 1 + chunk) / bs) + 1 blocks for
// any c. Engine::Create refuses a window group smaller than this (one
// sequence alone must always run), and MaxAdmissibleTokens uses it.
inline int32_t WindowBlocksPerSequence(int32_t window, int32_t max_chunk_tokens, int32_t block_size) {
  return NumBlocksFor(static_cast<int64_t>(window) - 1 + max_chunk_tokens, block_size) + 1;
}

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, WindowGroupConfig window = {});
  BlockManager(const BlockManager&) = delete;
  BlockManager& operator=(const BlockManager&) = delete;

  // Counts of the kFull group (the only one without sliding layers).
  int32_t num_blocks() const { return full_.num_blocks(); }
  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  int32_t num_free() const { return full_.num_free(); }
  int32_t num_cached() const { return full_.num_cached(); }
  int32_t num_used() const { return full_.num_used(); }
  // Blocks an allocation may take: free ones, then evicted cached ones.
  int32_t num_available() const { return full_.num_available(); }

  // Whether there is a window group, and its window (0: none).
  bool has_window() const { return window_ != nullptr; }
  int32_t window() const { return window_size_; }
  // A group's pool. REQUIRES: has_window() for kWindow.
  const BlockPool& pool(KvGroup g) const { return g == KvGroup::kWindow ? *window_ : full_; }
  // The first block a query at position `pos` reads in the window group.
  int32_t FirstWindowBlock(int64_t pos) const {
    return static_cast<int32_t>(std::max<int64_t>(0, pos - window_size_ + 1) / block_size_);
  }

  // The longest request (prompt + output tokens, no prefix hit) whose KV
  // fits in the blocks every group has available now (free + cached), with
  // forward passes of at most `max_chunk_tokens`: n tokens take ceil(n / bs)
  // kFull blocks, and min(ceil(n / bs), WindowBlocksPerSequence) window
  // blocks at most at once, so the window group limits only while fewer
  // than WindowBlocksPerSequence are available. A cold prompt of exactly
  // this length passes CanAllocate (in one chunk, with reserve 0); one
  // token more fails it (test: block_manager_window_test).
  int64_t MaxAdmissibleTokens(int32_t max_chunk_tokens) const;

  // Longest run of cached full blocks that starts the sequence's tokens,
  // never covering its last token. Read-only for the pool; it caches the
  // sequence's block hashes in seq.block_hashes. REQUIRES: seq holds no blocks.
  PrefixMatch MatchPrefix(Sequence& seq) const;

  // Whether Allocate(seq, match, num_positions) would succeed while leaving at
  // least `reserve` kFull blocks available (and the window group can serve it).
  bool CanAllocate(const PrefixMatch& match, int32_t num_positions, int32_t reserve = 0) const;
  // Gives a sequence without blocks the matched blocks (one more reference
  // each) plus new blocks up to `num_positions` positions. Sets
  // num_computed_tokens to the matched tokens and counts query/hit tokens.
  // With a tier, the match's tier blocks are then restored into the new
  // blocks in order, and published as if computed; num_computed_tokens
  // covers those restored (all of them unless the tier lost one).
  // REQUIRES: CanAllocate(match, num_positions); match from MatchPrefix(seq)
  // with no state change in between.
  void Allocate(Sequence& seq, const PrefixMatch& match, int32_t num_positions);

  // Whether the block tables of `seq` can grow to cover `num_positions`.
  bool CanAppend(const Sequence& seq, int32_t num_positions) const;
  // REQUIRES: CanAppend(seq, num_positions).
  void Append(Sequence& seq, int32_t num_positions);

  // Publishes the hashes of the sequence's full blocks whose KV is now
  // written (below num_computed_tokens) and drops the window blocks no
  // query reads any more. Call after each forward pass.
  void CommitComputed(Sequence& seq);

  // Drops the sequence's references (tail first, so its prefix blocks outlive
  // its tail in the LRU) and clears its block tables.
  void Free(Sequence& seq);

  // Free (not cached) blocks of group `g` that may hold committed memory and
  // were freed before `cutoff`, oldest first; they count as clean afterwards.
  // The caller returns their memory (ModelRunner::ReleaseBlocks).
  std::vector<int32_t> TakeIdleFree(Clock::time_point cutoff, KvGroup g = KvGroup::kFull);
  // When the longest-free dirty block (of any group) was freed; nullopt if
  // there is none.
  std::optional<Clock::time_point> OldestDirtyFree() const;
  int32_t num_dirty_free() const { return full_.num_dirty_free(); }

  // Metrics: prompt tokens looked up at admissions, and those found cached.
  int64_t num_query_tokens() const { return num_query_tokens_; }
  int64_t num_hit_tokens() const { return num_hit_tokens_; }
  int32_t ref_count(int32_t block_id, KvGroup g = KvGroup::kFull) const { return pool(g).block(block_id).ref_count; }

  // Recounts every state of every group; "" when consistent, else what is wrong.
  std::string CheckInvariants() const;

  // The KV tier below the pool (nullptr: none); it must outlive the
  // manager. Only models without a window group use one.
  void set_tier(KvTier* tier) { tier_ = window_ ? nullptr : tier; }
  // Announces to the tier the blocks MatchPrefix would restore for `seq`
  // (past its RAM hit), so they can be read ahead while it waits.
  // REQUIRES: seq holds no blocks.
  void PrefetchTier(Sequence& seq) const;
  // Metrics: prompt tokens restored from the tier at admissions.
  int64_t num_tier_hit_tokens() const { return num_tier_hit_tokens_; }

  // Reports every published and evicted hash of both groups to `events`
  // (nullptr: none); it must outlive the manager.
  void set_events(kvcache::PrefixCacheEvents* events);

  // Tests only: replaces the chain hash (to force collisions).
  using HashFn = kvcache::BlockHash (*)(const kvcache::BlockHash& parent, std::span<const int32_t> tokens);
  void TEST_SetHashFunction(HashFn fn) { hash_fn_ = fn; }

 private:
  // Fills seq.block_hashes for its first `n` full blocks.
  void EnsureHashes(Sequence& seq, int32_t n) const;
  // Whether cached block b holds the KV of `tokens` after the KV of block
  // `parent` (-1: at the start of a sequence with this salt).
  bool Verifies(const BlockPool::Block& b, int32_t parent, std::span<const int32_t> tokens,
                const std::string& salt) const;
  // Whether cached window block w holds the KV of full block `twin` (tokens
  // at index i of `seq`).
  bool VerifiesTwin(const BlockPool::Block& w, int32_t twin, int32_t i, const Sequence& seq) const;
  // Cuts a kFull match to the longest prefix whose window blocks are cached.
  void MatchWindow(const Sequence& seq, PrefixMatch& match) const;
  // Drops the window blocks no query will read again.
  void DropOutOfWindow(Sequence& seq);
  // A full block whose content goes (evicted, or unpublished after the block
  // before it): reports the window block twinned with it (if any) gone from
  // kWindow's hits.
  void ForgetWindowTwin(int32_t full_id);
  // Takes a full block (ForgetWindowTwin on the one it evicts).
  int32_t TakeFull();
  std::span<const int32_t> BlockTokens(const Sequence& seq, int32_t i) const;
  // What the tier keys and checks block i of `seq` by.
  kvcache::DiskBlockMeta TierMeta(const Sequence& seq, int32_t i) const;

  int32_t block_size_;
  bool prefix_caching_;
  HashFn hash_fn_;
  BlockPool full_;
  std::unique_ptr<BlockPool> window_;  // nullptr: no window group
  int32_t window_size_ = 0;
  kvcache::PrefixCacheEvents* events_ = nullptr;
  KvTier* tier_ = nullptr;
  int64_t num_tier_hit_tokens_ = 0;
  int64_t num_query_tokens_ = 0;
  int64_t num_hit_tokens_ = 0;
};

}  // namespace kvs::engine
