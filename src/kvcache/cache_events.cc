#include "kvcache/cache_events.h"

#include <random>

namespace kvs::kvcache {

namespace {

uint64_t RandomEpoch() {
  std::random_device rd;
  const uint64_t e = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return e == 0 ? 1 : e;
}

}  // namespace

PrefixCacheEvents::PrefixCacheEvents(size_t capacity) : capacity_(capacity < 1 ? 1 : capacity), epoch_(RandomEpoch()) {}

void PrefixCacheEvents::Append(bool stored, const BlockHash& h, CacheGroup g) {
  log_.push_back({stored, h, g});
  ++last_seq_;
  if (log_.size() > capacity_) log_.pop_front();
}

void PrefixCacheEvents::Stored(const BlockHash& h, CacheGroup g) {
  std::lock_guard<std::mutex> lock(mu_);
  held(g).insert(h);
  Append(true, h, g);
}

void PrefixCacheEvents::Evicted(const BlockHash& h, CacheGroup g) {
  std::lock_guard<std::mutex> lock(mu_);
  held(g).erase(h);
  Append(false, h, g);
}

size_t PrefixCacheEvents::num_held(CacheGroup g) const {
  std::lock_guard<std::mutex> lock(mu_);
  return held(g).size();
}

CacheEventsPage PrefixCacheEvents::Since(uint64_t epoch, uint64_t since, size_t max_events) const {
  std::lock_guard<std::mutex> lock(mu_);
  CacheEventsPage p;
  p.epoch = epoch_;
  const uint64_t first = last_seq_ - log_.size() + 1;  // oldest event kept
  // Ahead of us (another epoch's numbers) or behind what the log keeps.
  if (epoch != epoch_ || since > last_seq_ || since + 1 < first) {
    p.reset = true;
    p.seq = last_seq_;
    p.blocks.assign(held_.begin(), held_.end());
    p.window_blocks.assign(window_held_.begin(), window_held_.end());
    p.disk_blocks.assign(disk_held_.begin(), disk_held_.end());
    return p;
  }
  const uint64_t n = std::min<uint64_t>(last_seq_ - since, max_events);
  const size_t start = static_cast<size_t>(since + 1 - first);
  p.events.assign(log_.begin() + static_cast<std::ptrdiff_t>(start),
                  log_.begin() + static_cast<std::ptrdiff_t>(start + n));
  p.seq = since + n;
  p.more = p.seq < last_seq_;
  return p;
}

std::string BlockHashHex(const BlockHash& h) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[static_cast<size_t>(15 - i)] = kHex[(h.hi >> (4 * i)) & 0xF];
    s[static_cast<size_t>(31 - i)] = kHex[(h.lo >> (4 * i)) & 0xF];
  }
  return s;
}

bool ParseBlockHashHex(std::string_view s, BlockHash* out) {
  if (s.size() != 32) return false;
  uint64_t v[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    const char c = s[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v[i / 16] = (v[i / 16] << 4) | static_cast<uint64_t>(d);
  }
  out->hi = v[0];
  out->lo = v[1];
  return true;
}

}  // namespace kvs::kvcache
