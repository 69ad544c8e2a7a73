#include "gateway/prefix_index.h"

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kvcache/cache_events.h"

namespace kvs::gateway {

namespace {
constexpr size_t kMaxRouted = size_t{1} << 20;  // 16 MiB-ish of routing record per replica at most
}

std::string PrefixIndex::NextQuery() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fmt::format("epoch={}&since={}", epoch_.empty() ? "0" : epoch_, seq_);
}

namespace {

// Hex hashes ("<32 hex>"), or events ("+<32 hex>" / "-<32 hex>") when
// `signed_events`; false when anything is malformed.
bool ParseHashes(const nlohmann::json& list, bool signed_events, std::vector<std::pair<bool, kvcache::BlockHash>>* out) {
  if (!list.is_array()) return false;
  for (const auto& e : list) {
    if (!e.is_string()) return false;
    std::string_view s = e.get_ref<const std::string&>();
    bool stored = true;
    if (signed_events) {
      if (s.empty() || (s[0] != '+' && s[0] != '-')) return false;
      stored = s[0] == '+';
      s.remove_prefix(1);
    }
    kvcache::BlockHash h;
    if (!kvcache::ParseBlockHashHex(s, &h)) return false;
    out->emplace_back(stored, h);
  }
  return true;
}

}  // namespace

bool PrefixIndex::Apply(const nlohmann::json& page, Clock::time_point now, bool* more) {
  *more = false;
  if (!page.is_object() || !page.contains("epoch") || !page["epoch"].is_string() || !page.contains("seq") ||
      !page["seq"].is_number_integer() || page["seq"].get<int64_t>() < 0 || !page.contains("block_size") || !page["block_size"].is_number_integer() || page["block_size"].get<int64_t>() <= 0 ||
      page["block_size"].get<int64_t>() > (1 << 20) ||
      !page.contains("events") || !page["events"].is_array()) {
    MarkFailed();
    return false;
  }
  const bool reset = page.value("reset", false);
  // A sliding-window replica also sends its window and the window group's
  // sets (kvcache/cache_events_json.h); an older replica or a model without
  // sliding layers sends neither: window 0, the full group alone.
  int32_t window = 0;
  if (page.contains("window")) {
    const auto& w = page["window"];
    if (!w.is_number_integer() || w.get<int64_t>() < 0 || w.get<int64_t>() > (int64_t{1} << 30)) {
      MarkFailed();
      return false;
    }
    window = w.get<int32_t>();
  }
  // Parse everything first: a malformed page changes nothing.
  std::vector<std::pair<bool, BlockHash>> blocks, events, window_blocks, window_events, disk_blocks, disk_events;
  const bool disk = page.contains("disk") && page["disk"].is_boolean() && page["disk"].get<bool>();
  bool ok = ParseHashes(page["events"], true, &events);
  if (ok && reset) ok = page.contains("blocks") && ParseHashes(page["blocks"], false, &blocks);
  if (ok && window > 0) {
    if (reset) ok = page.contains("window_blocks") && ParseHashes(page["window_blocks"], false, &window_blocks);
    if (ok && page.contains("window_events")) ok = ParseHashes(page["window_events"], true, &window_events);
  }
  if (ok && disk) {
    if (reset) ok = page.contains("disk_blocks") && ParseHashes(page["disk_blocks"], false, &disk_blocks);
    if (ok && page.contains("disk_events")) ok = ParseHashes(page["disk_events"], true, &disk_events);
  }
  if (!ok) {
    MarkFailed();
    return false;
  }
  auto apply = [](std::unordered_set<BlockHash, kvcache::BlockHashHasher>& held,
                  const std::vector<std::pair<bool, BlockHash>>& evs) {
    for (const auto& [stored, h] : evs) {
      if (stored) {
        held.insert(h);
      } else {
        held.erase(h);
      }
    }
  };
  std::lock_guard<std::mutex> lock(mu_);
  if (reset) {
    held_.clear();
    window_held_.clear();
    disk_held_.clear();
    apply(held_, blocks);
    apply(window_held_, window_blocks);
    apply(disk_held_, disk_blocks);
    ++resyncs_;
  }
  apply(held_, events);
  apply(window_held_, window_events);
  apply(disk_held_, disk_events);
  if (window == 0) window_held_.clear();
  if (!disk) disk_held_.clear();
  window_ = window;
  epoch_ = page["epoch"].get<std::string>();
  seq_ = page["seq"].get<uint64_t>();
  block_size_ = page["block_size"].get<int32_t>();
  failed_ = false;
  synced_at_ = now;
  *more = page.value("more", false);
  return true;
}

void PrefixIndex::MarkFailed() {
  std::lock_guard<std::mutex> lock(mu_);
  failed_ = true;
}

int32_t PrefixIndex::block_size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return block_size_;
}

bool PrefixIndex::Fresh(Clock::time_point now, Clock::duration stale_after) const {
  std::lock_guard<std::mutex> lock(mu_);
  return !failed_ && now - synced_at_ <= stale_after;
}

void PrefixIndex::PruneRouted(Clock::time_point now, Clock::duration ttl) {
  for (auto it = routed_.begin(); it != routed_.end();) {
    it = now - it->second > ttl ? routed_.erase(it) : std::next(it);
  }
}

void PrefixIndex::Routed(std::span<const BlockHash> hashes, Clock::time_point now, Clock::duration ttl) {
  std::lock_guard<std::mutex> lock(mu_);
  if (routed_.size() + hashes.size() > kMaxRouted) {
    PruneRouted(now, ttl);
    // Still full (a flood of distinct prompts): halve the horizon until it fits.
    for (auto t = ttl / 2; routed_.size() + hashes.size() > kMaxRouted && t > Clock::duration::zero(); t /= 2) {
      PruneRouted(now, t);
    }
    if (routed_.size() + hashes.size() > kMaxRouted) routed_.clear();
  }
  for (const BlockHash& h : hashes) routed_[h] = now;
}

PrefixIndex::Match PrefixIndex::Longest(std::span<const BlockHash> hashes, Clock::time_point now,
                                        Clock::duration stale_after, Clock::duration ttl) const {
  std::lock_guard<std::mutex> lock(mu_);
  Match m;
  int64_t replica = 0;
  const bool fresh = !failed_ && now - synced_at_ <= stale_after;
  // With a fresh replica index the routing record only bridges the poll
  // interval (a prompt sent a moment ago); older entries are the replica's
  // to confirm (it may have evicted them).
  const Clock::duration horizon = fresh ? std::min(ttl, stale_after) : ttl;
  if (fresh) {
    while (replica < static_cast<int64_t>(hashes.size()) && held_.count(hashes[static_cast<size_t>(replica)])) {
      ++replica;
    }
    if (window_ > 0) replica = LongestWithWindow(hashes, replica);
    // Then the blocks on disk, which the replica restores (it keeps no disk
    // tier for a sliding-window model).
    const int64_t ram = replica;
    while (window_ == 0 && replica < static_cast<int64_t>(hashes.size()) &&
           disk_held_.count(hashes[static_cast<size_t>(replica)])) {
      ++replica;
    }
    m.disk_blocks = replica - ram;
  }
  int64_t routed = 0;
  for (; routed < static_cast<int64_t>(hashes.size()); ++routed) {
    auto it = routed_.find(hashes[static_cast<size_t>(routed)]);
    if (it == routed_.end() || now - it->second > horizon) break;
  }
  if (replica >= routed && replica > 0) {
    m.blocks = replica;
    m.source = Source::kReplica;
  } else {
    m.disk_blocks = 0;
    if (routed > 0) {
      m.blocks = routed;
      m.source = Source::kRouted;
    }
  }
  return m;
}

int64_t PrefixIndex::LongestWithWindow(std::span<const BlockHash> hashes, int64_t full) const {
  // The engine's rule (BlockManager::MatchWindow): a hit of L blocks needs
  // the window blocks of [first(L), L), first(L) = max(0, L * bs - W + 1) / bs.
  // run: how many consecutive blocks up to i have their window block held.
  std::vector<int64_t> run(static_cast<size_t>(full), 0);
  for (int64_t i = 0; i < full; ++i) {
    if (window_held_.count(hashes[static_cast<size_t>(i)])) run[static_cast<size_t>(i)] = (i > 0 ? run[static_cast<size_t>(i - 1)] : 0) + 1;
  }
  const int64_t bs = block_size_, w = window_;
  int64_t len = full;
  for (; len > 0; --len) {
    const int64_t first = std::max<int64_t>(0, len * bs - w + 1) / bs;
    if (first >= len || run[static_cast<size_t>(len - 1)] >= len - first) break;
  }
  return len;
}

size_t PrefixIndex::num_replica_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
}

size_t PrefixIndex::num_disk_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return disk_held_.size();
}

size_t PrefixIndex::num_routed_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return routed_.size();
}

uint64_t PrefixIndex::resyncs() const {
  std::lock_guard<std::mutex> lock(mu_);
  return resyncs_;
}

}  // namespace kvs::gateway
