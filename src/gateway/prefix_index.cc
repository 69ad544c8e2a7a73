#include "gateway/prefix_index.h"

#include <fmt/format.h>

#include "engine/cache_events.h"

namespace kvs::gateway {

namespace {
constexpr size_t kMaxRouted = size_t{1} << 20;  // 16 MiB-ish of routing record per replica at most
}

std::string PrefixIndex::NextQuery() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fmt::format("epoch={}&since={}", epoch_.empty() ? "0" : epoch_, seq_);
}

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
  // Parse everything first: a malformed page changes nothing.
  std::vector<BlockHash> blocks;
  std::vector<std::pair<bool, BlockHash>> events;
  if (reset) {
    if (!page.contains("blocks") || !page["blocks"].is_array()) {
      MarkFailed();
      return false;
    }
    for (const auto& b : page["blocks"]) {
      BlockHash h;
      if (!b.is_string() || !engine::ParseBlockHashHex(b.get_ref<const std::string&>(), &h)) {
        MarkFailed();
        return false;
      }
      blocks.push_back(h);
    }
  }
  for (const auto& e : page["events"]) {
    BlockHash h;
    if (!e.is_string()) {
      MarkFailed();
      return false;
    }
    const std::string& s = e.get_ref<const std::string&>();
    if (s.size() != 33 || (s[0] != '+' && s[0] != '-') || !engine::ParseBlockHashHex(std::string_view(s).substr(1), &h)) {
      MarkFailed();
      return false;
    }
    events.emplace_back(s[0] == '+', h);
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (reset) {
    held_.clear();
    held_.insert(blocks.begin(), blocks.end());
    ++resyncs_;
  }
  for (const auto& [stored, h] : events) {
    if (stored) {
      held_.insert(h);
    } else {
      held_.erase(h);
    }
  }
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
  }
  int64_t routed = 0;
  for (; routed < static_cast<int64_t>(hashes.size()); ++routed) {
    auto it = routed_.find(hashes[static_cast<size_t>(routed)]);
    if (it == routed_.end() || now - it->second > horizon) break;
  }
  if (replica >= routed && replica > 0) {
    m.blocks = replica;
    m.source = Source::kReplica;
  } else if (routed > 0) {
    m.blocks = routed;
    m.source = Source::kRouted;
  }
  return m;
}

size_t PrefixIndex::num_replica_blocks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return held_.size();
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
