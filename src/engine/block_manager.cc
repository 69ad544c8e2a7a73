#include "engine/block_manager.h"

#include <algorithm>

namespace kvs::engine {

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching)
    : block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      hash_fn_(&ChainBlockHash),
      blocks_(static_cast<size_t>(num_blocks)) {
  KVS_CHECK(num_blocks > 0 && block_size > 0);
  free_ids_.reserve(blocks_.size());
  // Stack: block 0 is handed out first.
  for (int32_t id = num_blocks - 1; id >= 0; --id) free_ids_.push_back(id);
  // None has been used: all clean. (Left at 0, OldestDirtyFree, called every
  // engine step, walked every never-used block: ~7 % of a decode step with
  // a 100K-block pool.)
  clean_below_ = free_ids_.size();
}

void BlockManager::EnsureHashes(Sequence& seq, int32_t n) const {
  KVS_CHECK(n <= seq.num_tokens() / block_size_);
  std::vector<BlockHash>& h = seq.block_hashes;
  for (auto i = static_cast<int32_t>(h.size()); i < n; ++i) {
    const BlockHash parent = i == 0 ? BlockHashRoot(seq.cache_salt) : h[static_cast<size_t>(i - 1)];
    const auto tokens = std::span<const int32_t>(seq.token_ids)
                            .subspan(static_cast<size_t>(i) * block_size_, static_cast<size_t>(block_size_));
    h.push_back(hash_fn_(parent, tokens));
  }
}

bool BlockManager::Verifies(const Block& b, int32_t parent, std::span<const int32_t> tokens,
                            const std::string& salt) const {
  if (b.parent != parent || !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end())) return false;
  if (parent < 0) return b.salt == salt;
  return b.parent_generation == blocks_[static_cast<size_t>(parent)].generation;
}

PrefixMatch BlockManager::MatchPrefix(Sequence& seq) const {
  KVS_CHECK(seq.block_table.empty());
  PrefixMatch match;
  if (!prefix_caching_) return match;
  // Never the last token: at least one position is computed for its logits.
  const int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  EnsureHashes(seq, max_blocks);
  for (int32_t i = 0; i < max_blocks; ++i) {
    const auto it = hash_to_block_.find(seq.block_hashes[static_cast<size_t>(i)]);
    if (it == hash_to_block_.end()) break;
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    const int32_t parent = i == 0 ? -1 : match.block_ids.back();
    const auto tokens = std::span<const int32_t>(seq.token_ids)
                            .subspan(static_cast<size_t>(i) * block_size_, static_cast<size_t>(block_size_));
    if (!Verifies(b, parent, tokens, seq.cache_salt)) break;  // a collision: a miss
    match.block_ids.push_back(it->second);
    if (b.ref_count == 0) ++match.num_evictable;
  }
  return match;
}

bool BlockManager::CanAllocate(const PrefixMatch& match, int32_t num_positions, int32_t reserve) const {
  const int32_t needed = NumBlocksFor(num_positions, block_size_) - static_cast<int32_t>(match.block_ids.size());
  // Matched cached blocks stop being available once they are referenced.
  return std::max(needed, 0) + reserve <= num_available() - match.num_evictable;
}

void BlockManager::Allocate(Sequence& seq, const PrefixMatch& match, int32_t num_positions) {
  KVS_CHECK(seq.block_table.empty());
  KVS_CHECK(CanAllocate(match, num_positions));
  for (int32_t id : match.block_ids) {
    Block& b = blocks_[static_cast<size_t>(id)];
    KVS_CHECK(b.hash.has_value());
    if (b.ref_count == 0) {
      LruRemove(id);
      ++num_used_;
    }
    ++b.ref_count;
  }
  seq.block_table = match.block_ids;
  seq.num_committed_blocks = static_cast<int32_t>(match.block_ids.size());
  seq.num_computed_tokens = match.num_tokens(block_size_);
  num_query_tokens_ += seq.num_tokens();
  num_hit_tokens_ += seq.num_computed_tokens;
  Append(seq, num_positions);
}

bool BlockManager::CanAppend(const Sequence& seq, int32_t num_positions) const {
  const int32_t needed = NumBlocksFor(num_positions, block_size_) - static_cast<int32_t>(seq.block_table.size());
  return needed <= num_available();
}

void BlockManager::Append(Sequence& seq, int32_t num_positions) {
  KVS_CHECK(CanAppend(seq, num_positions));
  const int32_t target = NumBlocksFor(num_positions, block_size_);
  while (static_cast<int32_t>(seq.block_table.size()) < target) seq.block_table.push_back(TakeBlock());
}

int32_t BlockManager::TakeBlock() {
  int32_t id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
    clean_below_ = std::min(clean_below_, free_ids_.size());
    num_dirty_free_ -= blocks_[static_cast<size_t>(id)].dirty ? 1 : 0;
  } else {
    KVS_CHECK(lru_head_ >= 0);
    id = lru_head_;
    LruRemove(id);
    Block& b = blocks_[static_cast<size_t>(id)];
    hash_to_block_.erase(*b.hash);
    if (events_) events_->Evicted(*b.hash);
    b.hash.reset();
    b.salt.clear();
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  KVS_CHECK(b.ref_count == 0 && !b.hash.has_value());
  b.ref_count = 1;
  b.dirty = true;
  ++b.generation;  // new KV: children published under the old content no longer verify
  ++num_used_;
  return id;
}

std::vector<int32_t> BlockManager::TakeIdleFree(Clock::time_point cutoff) {
  std::vector<int32_t> ids;
  size_t i = clean_below_;
  for (; i < free_ids_.size(); ++i) {
    Block& b = blocks_[static_cast<size_t>(free_ids_[i])];
    if (!b.dirty) continue;
    if (b.freed_at >= cutoff) break;  // the rest were freed later
    b.dirty = false;
    --num_dirty_free_;
    ids.push_back(free_ids_[i]);
  }
  // Everything below the first dirty entry left is clean now.
  while (clean_below_ < i && !blocks_[static_cast<size_t>(free_ids_[clean_below_])].dirty) ++clean_below_;
  return ids;
}

std::optional<Clock::time_point> BlockManager::OldestDirtyFree() const {
  for (size_t i = clean_below_; i < free_ids_.size(); ++i) {
    const Block& b = blocks_[static_cast<size_t>(free_ids_[i])];
    if (b.dirty) return b.freed_at;
  }
  return std::nullopt;
}

void BlockManager::CommitComputed(Sequence& seq) {
  const int32_t full = std::min(seq.num_computed_tokens / block_size_, static_cast<int32_t>(seq.block_table.size()));
  if (full <= seq.num_committed_blocks) return;
  if (prefix_caching_) {
    EnsureHashes(seq, full);
    for (int32_t i = seq.num_committed_blocks; i < full; ++i) {
      const BlockHash h = seq.block_hashes[static_cast<size_t>(i)];
      const int32_t id = seq.block_table[static_cast<size_t>(i)];
      Block& b = blocks_[static_cast<size_t>(id)];
      // The same content computed twice (two sequences prefilled it in the
      // same step) is published once; the other copy stays private.
      if (b.hash.has_value() || hash_to_block_.count(h) != 0) continue;
      b.hash = h;
      b.parent = i == 0 ? -1 : seq.block_table[static_cast<size_t>(i - 1)];
      b.parent_generation = b.parent < 0 ? 0 : blocks_[static_cast<size_t>(b.parent)].generation;
      const auto tokens = std::span<const int32_t>(seq.token_ids)
                              .subspan(static_cast<size_t>(i) * block_size_, static_cast<size_t>(block_size_));
      b.tokens.assign(tokens.begin(), tokens.end());
      if (i == 0) b.salt = seq.cache_salt;
      hash_to_block_.emplace(h, id);
      if (events_) events_->Stored(h);
    }
  }
  seq.num_committed_blocks = full;
}

void BlockManager::Free(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) Release(*it);
  seq.block_table.clear();
  seq.num_committed_blocks = 0;
}

void BlockManager::Release(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  KVS_CHECK_MSG(b.ref_count > 0, "block {} freed twice", id);
  if (--b.ref_count > 0) return;
  --num_used_;
  if (b.hash.has_value()) {
    LruPushBack(id);
  } else {
    b.freed_at = Clock::now();
    free_ids_.push_back(id);
    num_dirty_free_ += b.dirty ? 1 : 0;
  }
}

void BlockManager::LruPushBack(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  b.lru_prev = lru_tail_;
  b.lru_next = -1;
  if (lru_tail_ >= 0) {
    blocks_[static_cast<size_t>(lru_tail_)].lru_next = id;
  } else {
    lru_head_ = id;
  }
  lru_tail_ = id;
  ++lru_size_;
}

void BlockManager::LruRemove(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  if (b.lru_prev >= 0) {
    blocks_[static_cast<size_t>(b.lru_prev)].lru_next = b.lru_next;
  } else {
    lru_head_ = b.lru_next;
  }
  if (b.lru_next >= 0) {
    blocks_[static_cast<size_t>(b.lru_next)].lru_prev = b.lru_prev;
  } else {
    lru_tail_ = b.lru_prev;
  }
  b.lru_prev = b.lru_next = -1;
  --lru_size_;
}

std::string BlockManager::CheckInvariants() const {
  int32_t used = 0, cached = 0, unhashed_free = 0;
  for (const Block& b : blocks_) {
    if (b.ref_count < 0) return "negative ref count";
    if (b.ref_count > 0) {
      ++used;
    } else if (b.hash.has_value()) {
      ++cached;
    } else {
      ++unhashed_free;
    }
  }
  int32_t walked = 0;
  for (int32_t id = lru_head_; id >= 0; id = blocks_[static_cast<size_t>(id)].lru_next) {
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (b.ref_count != 0 || !b.hash.has_value()) return fmt::format("LRU holds non-cached block {}", id);
    if (++walked > num_blocks()) return "LRU has a cycle";
  }
  std::vector<char> in_free(blocks_.size(), 0);
  int32_t dirty_free = 0;
  std::optional<Clock::time_point> last_freed;
  for (size_t i = 0; i < free_ids_.size(); ++i) {
    const int32_t id = free_ids_[i];
    const Block& b = blocks_[static_cast<size_t>(id)];
    if (in_free[static_cast<size_t>(id)]++) return fmt::format("block {} twice in the free list", id);
    if (b.ref_count != 0 || b.hash.has_value()) return fmt::format("free list holds non-free block {}", id);
    if (!b.dirty) continue;
    if (i < clean_below_) return fmt::format("dirty block {} below the clean mark", id);
    if (last_freed && b.freed_at < *last_freed) return "dirty free blocks are not in the order they were freed";
    last_freed = b.freed_at;
    ++dirty_free;
  }
  if (dirty_free != num_dirty_free_) return fmt::format("{} dirty free blocks, counter says {}", dirty_free, num_dirty_free_);
  for (const auto& [h, id] : hash_to_block_) {
    if (blocks_[static_cast<size_t>(id)].hash != h) return fmt::format("hash map points at block {} wrongly", id);
  }
  if (used != num_used_ || cached != lru_size_ || walked != lru_size_ ||
      unhashed_free != static_cast<int32_t>(free_ids_.size())) {
    return fmt::format("counters disagree: used {} vs {}, cached {} vs {} (walked {}), free {} vs {}", used,
                       num_used_, cached, lru_size_, walked, unhashed_free, free_ids_.size());
  }
  if (num_free() + num_cached() + num_used() != num_blocks()) return "free + cached + used != num_blocks";
  return "";
}

}  // namespace kvs::engine
