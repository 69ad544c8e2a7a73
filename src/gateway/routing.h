// The routing policies of a pool (PoolConfig::routing), behind the
// RoutingPolicy seam of pool.h; MakeRoutingPolicy picks one by name.
//
// LeastOutstandingTokens ("least_load", the default): outstanding tokens /
// weight (slow start ramps a joining replica's weight), tie-broken by
// scraped queue length, then KV use, then round robin; replicas over the
// pool's max_kv_usage / max_queue are skipped while any other is within them.
//
// RoundRobin ("round_robin"): the available replicas in turn; a baseline.
//
// CacheAware ("cache_aware"): for each available replica r,
//     cost(r) = (prompt tokens - tokens r holds in its prefix cache)
//             + outstanding tokens on r / weight(r)
// (a request routed here adds to r's outstanding tokens its uncached prompt
// tokens, as predicted at its pick, plus its max_tokens: proxy.cc)
// and the cheapest wins (ties: shorter scraped queue, lower KV use, then in
// turn). Why this sum: a request's time to first token on r is the work
// queued ahead of it on r plus its own prefill, and both are counted in
// tokens the replica must process. The cached prefix is the part of the
// prefill r skips, so affinity wins exactly as long as what it saves
// exceeds the extra load -- and a hot prefix stops piling onto one replica
// as soon as that replica's backlog outweighs the prefill of the prefix
// elsewhere (the "death spiral" of pure affinity cannot start). A replica
// whose scraped KV use is at or above max_kv_usage, or whose queue holds
// max_queue requests, is skipped while any other is below its limits.
//
// Tokens the replica holds only on its disk tier count as kDiskRestoreCost
// of a computed token each: restoring a block reads and checks its file
// and copies it into the pool (measured at 1/16 to 1/6 of computing it,
// docs/benchmarks.md "Disk KV tier"; 0.2 errs toward RAM), so RAM wins a tie with disk, and a
// replica that holds a long prefix on disk still beats one that must
// compute it.
// The tokens a replica holds come from its PrefixIndex (prefix_index.h):
// the gateway computes the request's chained block hashes (kvcache/
// block_hash.h, the replica's own definition) from the token ids it counted,
// with the salt the replica will use (PrefixCacheNamespace of the pool's
// key digest and the request's cache_salt), never covering the last prompt
// token (the replica always computes it). The pick records the prompt's
// hashes in the picked replica's routing record.
// Thread-safety: Pick is thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "gateway/pool.h"

namespace kvs::gateway {

class LeastOutstandingTokens : public RoutingPolicy {
 public:
  const char* name() const override { return kLeastLoad; }
  Replica* Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) override;

 private:
  std::atomic<uint64_t> rr_{0};
};

class RoundRobin : public RoutingPolicy {
 public:
  const char* name() const override { return kRoundRobin; }
  Replica* Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) override;

 private:
  std::atomic<uint64_t> next_{0};
};

inline constexpr double kDiskRestoreCost = 0.2;

class CacheAware : public RoutingPolicy {
 public:
  // stale_after: a replica's index older than this is not trusted; ttl: the
  // routing record's horizon.
  CacheAware(std::chrono::steady_clock::duration stale_after, std::chrono::steady_clock::duration ttl)
      : stale_after_(stale_after), ttl_(ttl) {}
  const char* name() const override { return kCacheAware; }
  Replica* Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) override;

  // Before a replica has said its block size.
  static constexpr int32_t kDefaultBlockSize = 16;

 private:
  const std::chrono::steady_clock::duration stale_after_;
  const std::chrono::steady_clock::duration ttl_;
  std::atomic<uint64_t> rr_{0};
};

// The policy PoolConfig::routing names. A replica's index counts as stale
// after 3 health intervals (at least 2 s) without a successful poll.
std::unique_ptr<RoutingPolicy> MakeRoutingPolicy(const PoolConfig& pc, double health_interval_seconds);

}  // namespace kvs::gateway
