// Test support: a reader of a PrefixCacheEvents log that keeps the held
// sets as a router does (kvcache and engine tests).
// Thread-safety: none; one test thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>
#include <utility>

#include "kvcache/cache_events.h"

namespace kvs::kvcache::testing {

// A reader as a router keeps it: applies pages until current.
struct CacheEventsReader {
  using HashSet = std::set<std::pair<uint64_t, uint64_t>>;
  uint64_t epoch = 0, seq = 0;
  HashSet held, window_held, disk_held;
  int resets = 0;
  void Poll(const PrefixCacheEvents& log, size_t page_size = 1000) {
    for (;;) {
      CacheEventsPage p = log.Since(epoch, seq, page_size);
      if (p.reset) {
        ++resets;
        held.clear();
        window_held.clear();
        disk_held.clear();
        for (const auto& h : p.disk_blocks) disk_held.insert({h.lo, h.hi});
        for (const auto& h : p.blocks) held.insert({h.lo, h.hi});
        for (const auto& h : p.window_blocks) window_held.insert({h.lo, h.hi});
      }
      for (const auto& e : p.events) {
        HashSet& set = e.group == CacheGroup::kWindow ? window_held : e.group == CacheGroup::kDisk ? disk_held : held;
        if (e.stored) {
          set.insert({e.hash.lo, e.hash.hi});
        } else {
          set.erase({e.hash.lo, e.hash.hi});
        }
      }
      epoch = p.epoch;
      seq = p.seq;
      if (!p.more) return;
    }
  }
};

}  // namespace kvs::kvcache::testing
