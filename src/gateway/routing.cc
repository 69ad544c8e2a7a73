#include "gateway/routing.h"

#include <algorithm>
#include <chrono>
#include <span>

namespace kvs::gateway {

namespace {

// The policies' order of replicas: the lower cost wins; ties go to the
// shorter scraped queue, then to the lower KV use.
bool Cheaper(double cost, double queue, double kv, double best_cost, double best_queue, double best_kv) {
  return cost < best_cost || (cost == best_cost && (queue < best_queue || (queue == best_queue && kv < best_kv)));
}

using Clock = std::chrono::steady_clock;

std::vector<Replica*> Candidates(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) {
  std::vector<Replica*> c;
  for (const auto& r : pool.replicas) {
    if (r->available() && VersionAdmits(*r, in) && std::find(tried.begin(), tried.end(), r) == tried.end()) {
      c.push_back(r);
    }
  }
  return c;
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

Replica* RoundRobin::Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) {
  std::vector<Replica*> c = Candidates(pool, in, tried);
  if (c.empty()) return nullptr;
  return c[static_cast<size_t>(next_.fetch_add(1) % c.size())];
}

Replica* CacheAware::Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) {
  std::vector<Replica*> cands = Candidates(pool, in, tried);
  if (cands.empty()) return nullptr;
  std::vector<Replica*> within;
  for (Replica* r : cands) {
    if (WithinLimits(pool, *r)) within.push_back(r);
  }
  if (!within.empty()) cands.swap(within);  // all over their limits: the least costly of them still

  static const std::vector<int32_t> kNone;
  const std::vector<int32_t>& prompt =
      in.prompt_ids && !in.prompt_ids->empty() ? in.prompt_ids->front() : kNone;
  const std::string salt = kvcache::PrefixCacheNamespace(pool.credentials()->key_digest, in.cache_salt);
  const Clock::time_point now = Clock::now();

  // Hashes per block size (replicas of a pool normally share one).
  int32_t hashed_bs = 0;
  std::vector<kvcache::BlockHash> hashes;
  auto hashes_for = [&](int32_t bs) -> const std::vector<kvcache::BlockHash>& {
    if (bs != hashed_bs) {
      hashes = kvcache::ChainBlockHashes(salt, prompt, bs);
      hashed_bs = bs;
    }
    return hashes;
  };

  const size_t start = static_cast<size_t>(rr_.fetch_add(1) % cands.size());
  Replica* best = nullptr;
  double best_cost = 0, best_queue = 0, best_kv = 0;
  int64_t best_cached = 0, best_disk = 0, most_cached = 0;
  PrefixIndex::Source best_source = PrefixIndex::Source::kNone;
  for (size_t i = 0; i < cands.size(); ++i) {
    Replica* r = cands[(start + i) % cands.size()];
    int32_t bs = r->prefix_index().block_size();
    if (bs <= 0) bs = kDefaultBlockSize;
    const auto& h = hashes_for(bs);
    // Never the block holding the last prompt token: the replica computes it.
    const size_t usable = prompt.empty() ? 0 : std::min(h.size(), (prompt.size() - 1) / static_cast<size_t>(bs));
    const PrefixIndex::Match m =
        r->prefix_index().Longest(std::span(h.data(), usable), now, stale_after_, ttl_);
    const int64_t cached = m.blocks * bs;
    const int64_t on_disk = m.disk_blocks * bs;
    // A token restored from disk is not free: kDiskRestoreCost of computing it.
    const double uncached = static_cast<double>(std::max<int64_t>(in.prompt_tokens - cached, 0)) +
                            kDiskRestoreCost * static_cast<double>(on_disk);
    const double cost = uncached +
                        static_cast<double>(r->outstanding_tokens()) /
                            std::max(r->EffectiveWeight(now, Seconds(pool.config.slow_start_seconds)), 1e-9);
    const double queue = r->queue_length();
    const double kv = r->kv_usage();
    most_cached = std::max(most_cached, cached);
    const bool better = !best || Cheaper(cost, queue, kv, best_cost, best_queue, best_kv);
    if (better) {
      best = r;
      best_cost = cost;
      best_queue = queue;
      best_kv = kv;
      best_cached = cached;
      best_disk = on_disk;
      best_source = m.source;
    }
  }
  int32_t bs = best->prefix_index().block_size();
  if (bs <= 0) bs = kDefaultBlockSize;
  best->prefix_index().Routed(hashes_for(bs), now, ttl_);
  in.prediction.made = true;
  in.prediction.cached_tokens = best_cached;
  in.prediction.disk_tokens = best_disk;
  in.prediction.best_cached_tokens = most_cached;
  in.prediction.source = best_source;
  return best;
}

Replica* LeastOutstandingTokens::Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) {
  std::vector<Replica*> cands = Candidates(pool, in, tried), within;
  if (cands.empty()) return nullptr;
  for (Replica* r : cands) {
    if (WithinLimits(pool, *r)) within.push_back(r);
  }
  if (!within.empty()) cands.swap(within);  // all over their limits: the least loaded of them still
  // Start the scan at a rotating offset so that exact ties spread evenly.
  const size_t start = static_cast<size_t>(rr_.fetch_add(1) % cands.size());
  const auto now = Clock::now();
  const auto ramp = Seconds(pool.config.slow_start_seconds);
  Replica* best = nullptr;
  double best_load = 0, best_queue = 0, best_kv = 0;
  for (size_t i = 0; i < cands.size(); ++i) {
    Replica* r = cands[(start + i) % cands.size()];
    const double load = static_cast<double>(r->outstanding_tokens()) / std::max(r->EffectiveWeight(now, ramp), 1e-9);
    const double queue = r->queue_length();
    const double kv = r->kv_usage();
    const bool better = !best || Cheaper(load, queue, kv, best_load, best_queue, best_kv);
    if (better) {
      best = r;
      best_load = load;
      best_queue = queue;
      best_kv = kv;
    }
  }
  return best;
}

std::unique_ptr<RoutingPolicy> MakeRoutingPolicy(const PoolConfig& pc, double health_interval_seconds) {
  if (pc.routing == kRoundRobin) return std::make_unique<RoundRobin>();
  if (pc.routing == kCacheAware) {
    return std::make_unique<CacheAware>(Seconds(std::max(3 * health_interval_seconds, 2.0)),
                                        Seconds(pc.routed_prefix_ttl_seconds));
  }
  return std::make_unique<LeastOutstandingTokens>();
}

}  // namespace kvs::gateway
