#include "engine/block_manager.h"

#include <algorithm>

namespace kvs::engine {

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                           WindowGroupConfig window)
    : block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      hash_fn_(&kvcache::ChainBlockHash),
      full_(num_blocks) {
  KVS_CHECK(num_blocks > 0 && block_size > 0);
  // A full block's link is the previous full block (Verifies): when its KV
  // goes, the blocks after it go too, and so do their window twins' hits.
  full_.set_chained([this](int32_t id) { ForgetWindowTwin(id); });
  if (window.window > 0) {
    KVS_CHECK(window.num_blocks > 0);
    window_ = std::make_unique<BlockPool>(window.num_blocks);
    window_size_ = window.window;
  }
}

std::span<const int32_t> BlockManager::BlockTokens(const Sequence& seq, int32_t i) const {
  return std::span<const int32_t>(seq.token_ids)
      .subspan(static_cast<size_t>(i) * block_size_, static_cast<size_t>(block_size_));
}

void BlockManager::EnsureHashes(Sequence& seq, int32_t n) const {
  KVS_CHECK(n <= seq.num_tokens() / block_size_);
  std::vector<kvcache::BlockHash>& h = seq.block_hashes;
  for (auto i = static_cast<int32_t>(h.size()); i < n; ++i) {
    const kvcache::BlockHash parent = i == 0 ? kvcache::BlockHashRoot(seq.cache_salt) : h[static_cast<size_t>(i - 1)];
    h.push_back(hash_fn_(parent, BlockTokens(seq, i)));
  }
}

bool BlockManager::Verifies(const BlockPool::Block& b, int32_t parent, std::span<const int32_t> tokens,
                            const std::string& salt) const {
  if (b.link != parent || !std::equal(tokens.begin(), tokens.end(), b.tokens.begin(), b.tokens.end())) return false;
  if (parent < 0) return b.salt == salt;
  return b.link_generation == full_.block(parent).generation;
}

bool BlockManager::VerifiesTwin(const BlockPool::Block& w, int32_t twin, int32_t i, const Sequence& seq) const {
  const std::span<const int32_t> tokens = BlockTokens(seq, i);
  if (w.link != twin || w.link_generation != full_.block(twin).generation) return false;
  if (!std::equal(tokens.begin(), tokens.end(), w.tokens.begin(), w.tokens.end())) return false;
  return i != 0 || w.salt == seq.cache_salt;
}

PrefixMatch BlockManager::MatchPrefix(Sequence& seq) const {
  KVS_CHECK(seq.block_table.empty() && seq.window_block_table.empty());
  PrefixMatch match;
  if (!prefix_caching_) return match;
  // Never the last token: at least one position is computed for its logits.
  const int32_t max_blocks = (seq.num_tokens() - 1) / block_size_;
  EnsureHashes(seq, max_blocks);
  for (int32_t i = 0; i < max_blocks; ++i) {
    const int32_t id = full_.Find(seq.block_hashes[static_cast<size_t>(i)]);
    if (id < 0) break;
    const int32_t parent = i == 0 ? -1 : match.block_ids.back();
    if (!Verifies(full_.block(id), parent, BlockTokens(seq, i), seq.cache_salt)) break;  // a collision: a miss
    match.block_ids.push_back(id);
  }
  if (window_) MatchWindow(seq, match);
  for (int32_t id : match.block_ids) match.num_evictable += full_.block(id).ref_count == 0 ? 1 : 0;
  if (tier_) {
    for (auto i = static_cast<int32_t>(match.block_ids.size()); i < max_blocks; ++i) {
      if (!tier_->Holds(seq.block_hashes[static_cast<size_t>(i)])) break;
      ++match.num_tier_blocks;
    }
  }
  return match;
}

void BlockManager::MatchWindow(const Sequence& seq, PrefixMatch& match) const {
  const auto n = static_cast<int32_t>(match.block_ids.size());
  // found[i]: the verified window twin of matched block i, else -1;
  // run[i]: how many consecutive blocks up to i have one.
  std::vector<int32_t> found(static_cast<size_t>(n), -1), run(static_cast<size_t>(n), 0);
  for (int32_t i = 0; i < n; ++i) {
    const int32_t w = window_->Find(seq.block_hashes[static_cast<size_t>(i)]);
    if (w >= 0 && VerifiesTwin(window_->block(w), match.block_ids[static_cast<size_t>(i)], i, seq)) {
      found[static_cast<size_t>(i)] = w;
      run[static_cast<size_t>(i)] = (i > 0 ? run[static_cast<size_t>(i - 1)] : 0) + 1;
    }
  }
  // The longest hit whose needed window blocks [first, len) are all there.
  int32_t len = n;
  for (; len > 0; --len) {
    const int32_t first = FirstWindowBlock(static_cast<int64_t>(len) * block_size_);
    if (first >= len || run[static_cast<size_t>(len - 1)] >= len - first) break;
  }
  match.block_ids.resize(static_cast<size_t>(len));
  match.window_block_ids.assign(static_cast<size_t>(len), -1);
  for (int32_t i = FirstWindowBlock(static_cast<int64_t>(len) * block_size_); i < len; ++i) {
    const int32_t w = found[static_cast<size_t>(i)];
    match.window_block_ids[static_cast<size_t>(i)] = w;
    match.num_window_evictable += window_->block(w).ref_count == 0 ? 1 : 0;
  }
}

int64_t BlockManager::MaxAdmissibleTokens(int32_t max_chunk_tokens) const {
  const int64_t full = static_cast<int64_t>(full_.num_available()) * block_size_;
  if (!window_) return full;
  const int32_t w = window_->num_available();
  // Enough for one sequence's worst case: any length fits the window group.
  if (w >= WindowBlocksPerSequence(window_size_, max_chunk_tokens, block_size_)) return full;
  return std::min(full, static_cast<int64_t>(w) * block_size_);
}

bool BlockManager::CanAllocate(const PrefixMatch& match, int32_t num_positions, int32_t reserve) const {
  const int32_t needed = NumBlocksFor(num_positions, block_size_) - static_cast<int32_t>(match.block_ids.size());
  // Matched cached blocks stop being available once they are referenced.
  if (std::max(needed, 0) + reserve > full_.num_available() - match.num_evictable) return false;
  return !window_ || std::max(needed, 0) <= window_->num_available() - match.num_window_evictable;
}

void BlockManager::Allocate(Sequence& seq, const PrefixMatch& match, int32_t num_positions) {
  KVS_CHECK(seq.block_table.empty() && seq.window_block_table.empty());
  KVS_CHECK(CanAllocate(match, num_positions));
  for (int32_t id : match.block_ids) {
    KVS_CHECK(full_.block(id).hash.has_value());
    full_.Ref(id);
  }
  seq.block_table = match.block_ids;
  seq.num_committed_blocks = static_cast<int32_t>(match.block_ids.size());
  seq.num_computed_tokens = match.num_tokens(block_size_);
  seq.num_window_dropped = 0;
  seq.last_twin = match.block_ids.empty() ? -1 : match.block_ids.back();
  if (window_) {
    KVS_CHECK(match.window_block_ids.size() == match.block_ids.size());
    for (int32_t id : match.window_block_ids) {
      if (id >= 0) window_->Ref(id);
    }
    seq.window_block_table = match.window_block_ids;
    seq.num_window_dropped = match.block_ids.empty() ? 0 : FirstWindowBlock(seq.num_computed_tokens);
  }
  num_query_tokens_ += seq.num_tokens();
  num_hit_tokens_ += seq.num_computed_tokens;
  Append(seq, num_positions);
  if (tier_ && match.num_tier_blocks > 0) {
    // Restored in order, each checked against the block before it, so the
    // restored run is a prefix; published by CommitComputed like computed KV.
    const auto first = static_cast<int32_t>(match.block_ids.size());
    const int32_t end = std::min(first + match.num_tier_blocks, static_cast<int32_t>(seq.block_table.size()));
    int32_t i = first;
    while (i < end && tier_->Restore(TierMeta(seq, i), seq.block_table[static_cast<size_t>(i)])) ++i;
    seq.num_computed_tokens = i * block_size_;
    num_tier_hit_tokens_ += static_cast<int64_t>(i - first) * block_size_;
    CommitComputed(seq);
  }
}

void BlockManager::PrefetchTier(Sequence& seq) const {
  if (!tier_) return;
  const PrefixMatch match = MatchPrefix(seq);
  std::vector<kvcache::DiskBlockMeta> metas;
  const auto first = static_cast<int32_t>(match.block_ids.size());
  for (int32_t i = first; i < first + match.num_tier_blocks; ++i) metas.push_back(TierMeta(seq, i));
  tier_->Prefetch(std::move(metas));
}

kvcache::DiskBlockMeta BlockManager::TierMeta(const Sequence& seq, int32_t i) const {
  kvcache::DiskBlockMeta m;
  m.hash = seq.block_hashes[static_cast<size_t>(i)];
  m.parent = i == 0 ? kvcache::BlockHashRoot(seq.cache_salt) : seq.block_hashes[static_cast<size_t>(i - 1)];
  const auto tokens = BlockTokens(seq, i);
  m.tokens.assign(tokens.begin(), tokens.end());
  if (i == 0) m.salt = seq.cache_salt;
  return m;
}

bool BlockManager::CanAppend(const Sequence& seq, int32_t num_positions) const {
  const int32_t needed = NumBlocksFor(num_positions, block_size_) - static_cast<int32_t>(seq.block_table.size());
  if (needed > full_.num_available()) return false;
  // New window entries are all needed: they hold positions to be computed.
  return !window_ ||
         NumBlocksFor(num_positions, block_size_) - static_cast<int32_t>(seq.window_block_table.size()) <=
             window_->num_available();
}

void BlockManager::Append(Sequence& seq, int32_t num_positions) {
  KVS_CHECK(CanAppend(seq, num_positions));
  const int32_t target = NumBlocksFor(num_positions, block_size_);
  while (static_cast<int32_t>(seq.block_table.size()) < target) seq.block_table.push_back(TakeFull());
  if (!window_) return;
  while (static_cast<int32_t>(seq.window_block_table.size()) < target) {
    seq.window_block_table.push_back(window_->Take());
  }
}

void BlockManager::set_events(kvcache::PrefixCacheEvents* events) {
  events_ = events;
  full_.set_events(events, kvcache::CacheGroup::kFull);
  if (window_) window_->set_events(events, kvcache::CacheGroup::kWindow);
}

void BlockManager::ForgetWindowTwin(int32_t full_id) {
  if (!window_ || !events_) return;
  // The twin of a window block goes: no hit verifies that window block again
  // (VerifiesTwin compares the generation; a hit stops before an unpublished
  // full block), though it stays cached until it is evicted or replaced.
  const BlockPool::Block& f = full_.block(full_id);
  const int32_t w = window_->Find(*f.hash);
  if (w >= 0 && window_->block(w).link == full_id && window_->block(w).link_generation == f.generation) {
    events_->Evicted(*f.hash, kvcache::CacheGroup::kWindow);
  }
}

int32_t BlockManager::TakeFull() {
  if (const int32_t victim = full_.next_evicted(); victim >= 0) ForgetWindowTwin(victim);
  return full_.Take();
}

std::vector<int32_t> BlockManager::TakeIdleFree(Clock::time_point cutoff, KvGroup g) {
  if (g == KvGroup::kWindow) return window_ ? window_->TakeIdleFree(cutoff) : std::vector<int32_t>{};
  return full_.TakeIdleFree(cutoff);
}

std::optional<Clock::time_point> BlockManager::OldestDirtyFree() const {
  std::optional<Clock::time_point> t = full_.OldestDirtyFree();
  if (window_) {
    const std::optional<Clock::time_point> w = window_->OldestDirtyFree();
    if (w && (!t || *w < *t)) t = w;
  }
  return t;
}

void BlockManager::CommitComputed(Sequence& seq) {
  const int32_t full = std::min(seq.num_computed_tokens / block_size_, static_cast<int32_t>(seq.block_table.size()));
  if (full > seq.num_committed_blocks && prefix_caching_) {
    EnsureHashes(seq, full);
    for (int32_t i = seq.num_committed_blocks; i < full; ++i) {
      const kvcache::BlockHash h = seq.block_hashes[static_cast<size_t>(i)];
      const int32_t id = seq.block_table[static_cast<size_t>(i)];
      const std::string& salt = i == 0 ? seq.cache_salt : std::string();
      // The same content computed twice (two sequences prefilled it in the
      // same step) is published once; the other copy stays private, and so
      // do the blocks after it (a hit reaches the published copy, so no hit
      // would verify them).
      const int32_t parent = i == 0 ? -1 : seq.block_table[static_cast<size_t>(i - 1)];
      if (!full_.block(id).hash.has_value() && !full_.IsPublished(h) &&
          (parent < 0 || full_.block(parent).hash == seq.block_hashes[static_cast<size_t>(i - 1)])) {
        full_.Publish(id, h, parent, parent < 0 ? 0 : full_.block(parent).generation, BlockTokens(seq, i), salt);
        if (tier_ && !tier_->Holds(h)) tier_->Published(TierMeta(seq, i), id);
      }
      if (!window_) continue;
      // The window block's twin: the published full block a hit on this
      // prefix would find, provided it holds this very prefix: its own
      // block, or another one that verifies against the previous twin.
      int32_t twin = -1;
      if (full_.block(id).hash == h) {
        twin = id;
      } else if (const int32_t f = full_.Find(h); f >= 0 && (i == 0 || seq.last_twin >= 0) &&
                                                  Verifies(full_.block(f), i == 0 ? -1 : seq.last_twin,
                                                           BlockTokens(seq, i), seq.cache_salt)) {
        twin = f;
      }
      seq.last_twin = twin;
      const int32_t w = seq.window_block_table[static_cast<size_t>(i)];
      if (twin < 0 || w < 0 || window_->block(w).hash.has_value()) continue;
      // A cached window block under this hash that no longer verifies (its
      // twin was reused, or a colliding prefix) can never hit: replace it.
      if (const int32_t old = window_->Find(h);
          old >= 0 && window_->block(old).ref_count == 0 && !VerifiesTwin(window_->block(old), twin, i, seq)) {
        window_->Unpublish(old);
      }
      if (window_->IsPublished(h)) continue;
      window_->Publish(w, h, twin, full_.block(twin).generation, BlockTokens(seq, i), salt);
    }
  }
  seq.num_committed_blocks = std::max(seq.num_committed_blocks, full);
  if (window_) DropOutOfWindow(seq);
}

void BlockManager::DropOutOfWindow(Sequence& seq) {
  const int32_t first = FirstWindowBlock(seq.num_computed_tokens);
  KVS_CHECK(first <= static_cast<int32_t>(seq.window_block_table.size()));
  for (; seq.num_window_dropped < first; ++seq.num_window_dropped) {
    int32_t& id = seq.window_block_table[static_cast<size_t>(seq.num_window_dropped)];
    if (id >= 0) window_->Release(id);
    id = -1;
  }
}

void BlockManager::Free(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) full_.Release(*it);
  for (auto it = seq.window_block_table.rbegin(); it != seq.window_block_table.rend(); ++it) {
    if (*it >= 0) window_->Release(*it);
  }
  seq.block_table.clear();
  seq.window_block_table.clear();
  seq.num_committed_blocks = 0;
  seq.num_window_dropped = 0;
  seq.last_twin = -1;
}

std::string BlockManager::CheckInvariants() const {
  if (std::string e = full_.CheckInvariants(); !e.empty()) return e;
  if (window_) {
    if (std::string e = window_->CheckInvariants(); !e.empty()) return "window group: " + e;
  }
  return "";
}

}  // namespace kvs::engine
