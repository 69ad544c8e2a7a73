#include "engine/block_pool.h"

#include <algorithm>

namespace kvs::engine {

BlockPool::BlockPool(int32_t num_blocks) : blocks_(static_cast<size_t>(num_blocks)) {
  KVS_CHECK(num_blocks > 0);
  free_ids_.reserve(blocks_.size());
  // Stack: block 0 is handed out first.
  for (int32_t id = num_blocks - 1; id >= 0; --id) free_ids_.push_back(id);
  // None has been used: all clean. (Left at 0, OldestDirtyFree, called every
  // engine step, walked every never-used block: ~7 % of a decode step with
  // a 100K-block pool.)
  clean_below_ = free_ids_.size();
}

int32_t BlockPool::Take() {
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
    if (events_) events_->Evicted(*b.hash, group_);
    b.hash.reset();
    b.salt.clear();
    if (chained_) DropDependents(id, b.generation);
  }
  Block& b = blocks_[static_cast<size_t>(id)];
  KVS_CHECK(b.ref_count == 0 && !b.hash.has_value());
  b.ref_count = 1;
  b.dirty = true;
  ++b.generation;  // new KV: blocks published against the old content no longer verify
  ++num_used_;
  return id;
}

void BlockPool::Ref(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  KVS_CHECK(b.hash.has_value() || b.ref_count > 0);
  if (b.ref_count == 0) {
    LruRemove(id);
    ++num_used_;
  }
  ++b.ref_count;
}

void BlockPool::Release(int32_t id) {
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

int32_t BlockPool::Find(const kvcache::BlockHash& h) const {
  const auto it = hash_to_block_.find(h);
  return it == hash_to_block_.end() ? -1 : it->second;
}

void BlockPool::Publish(int32_t id, const kvcache::BlockHash& h, int32_t link, uint64_t link_generation,
                        std::span<const int32_t> tokens, const std::string& salt) {
  Block& b = blocks_[static_cast<size_t>(id)];
  KVS_CHECK(b.ref_count > 0 && !b.hash.has_value() && !IsPublished(h));
  b.hash = h;
  b.link = link;
  b.link_generation = link_generation;
  b.tokens.assign(tokens.begin(), tokens.end());
  b.salt = salt;
  hash_to_block_.emplace(h, id);
  if (events_) events_->Stored(h, group_);
  if (chained_ && link >= 0) {
    const Block& l = blocks_[static_cast<size_t>(link)];
    KVS_CHECK_MSG(l.hash.has_value() && l.generation == link_generation,
                  "block {} published against block {}, which is not published with that content", id, link);
    std::vector<int32_t>& deps = dependents_[static_cast<size_t>(link)];
    // Drop stale entries now and then (a long-lived block sees many
    // dependents come and go): amortized O(1) per publish.
    if (deps.size() >= 8 && (deps.size() & (deps.size() - 1)) == 0) {
      std::erase_if(deps, [&](int32_t d) {
        const Block& db = blocks_[static_cast<size_t>(d)];
        return !db.hash.has_value() || db.link != link || db.link_generation != l.generation;
      });
    }
    deps.push_back(id);
  }
}

void BlockPool::set_chained(std::function<void(int32_t id)> on_dropped) {
  chained_ = true;
  on_dropped_ = std::move(on_dropped);
  dependents_.assign(blocks_.size(), {});
}

void BlockPool::DropHash(int32_t id) {
  Block& b = blocks_[static_cast<size_t>(id)];
  hash_to_block_.erase(*b.hash);
  if (events_) events_->Evicted(*b.hash, group_);
  b.hash.reset();
  b.salt.clear();
  if (b.ref_count == 0) {  // cached: now free
    LruRemove(id);
    b.freed_at = Clock::now();
    free_ids_.push_back(id);
    num_dirty_free_ += b.dirty ? 1 : 0;
  }
}

void BlockPool::DropDependents(int32_t id, uint64_t generation) {
  // Most evicted blocks have no dependents (a sequence's tail goes first):
  // no worklist, so no allocation, on the engine step's common path.
  if (dependents_[static_cast<size_t>(id)].empty()) return;
  // A worklist, not recursion: a long prompt's chain has one block per block
  // of context.
  std::vector<std::pair<int32_t, uint64_t>> work = {{id, generation}};
  while (!work.empty()) {
    const auto [parent, gen] = work.back();
    work.pop_back();
    std::vector<int32_t> deps = std::move(dependents_[static_cast<size_t>(parent)]);
    dependents_[static_cast<size_t>(parent)].clear();
    for (const int32_t d : deps) {
      const Block& b = blocks_[static_cast<size_t>(d)];
      if (!b.hash.has_value() || b.link != parent || b.link_generation != gen) continue;  // stale entry
      if (on_dropped_) on_dropped_(d);
      DropHash(d);
      work.emplace_back(d, b.generation);
    }
  }
}

void BlockPool::Unpublish(int32_t id) {
  const Block& b = blocks_[static_cast<size_t>(id)];
  KVS_CHECK(b.ref_count == 0 && b.hash.has_value());
  DropHash(id);
  if (chained_) DropDependents(id, b.generation);
}

std::vector<int32_t> BlockPool::TakeIdleFree(Clock::time_point cutoff) {
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

std::optional<Clock::time_point> BlockPool::OldestDirtyFree() const {
  for (size_t i = clean_below_; i < free_ids_.size(); ++i) {
    const Block& b = blocks_[static_cast<size_t>(free_ids_[i])];
    if (b.dirty) return b.freed_at;
  }
  return std::nullopt;
}

void BlockPool::LruPushBack(int32_t id) {
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

void BlockPool::LruRemove(int32_t id) {
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

std::string BlockPool::CheckInvariants() const {
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
  if (chained_) {
    for (size_t id = 0; id < blocks_.size(); ++id) {
      const Block& b = blocks_[id];
      if (!b.hash.has_value() || b.link < 0) continue;
      const Block& l = blocks_[static_cast<size_t>(b.link)];
      if (!l.hash.has_value() || l.generation != b.link_generation) {
        return fmt::format("published block {} outlived the content of block {} it was published against", id, b.link);
      }
    }
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
