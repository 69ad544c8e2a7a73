// Pools of replicas, their state, and the routing policy.
//
// A Pool is a set of `kvserve serve` replicas sized for one range of request
// lengths (max_context). Router (router.h) picks the smallest pool whose max_context
// holds prompt + max_tokens, so short requests never queue behind long ones;
// when that pool has no available replica, the next larger pools are
// candidates too (a short request fits anywhere larger).
//
// Replica carries what routing needs: the gateway's own accounting of
// outstanding tokens and requests, the queue length and KV use scraped from
// the replica's /metrics, and its health: kUnknown (never probed: not used)
// -> kHealthy <-> kEjected. A failed /ready probe ejects at once; so do
// `eject_after_failures` consecutive failed requests (passive); an ejected
// replica comes back after `readmit_after_probes` consecutive good probes. A
// draining replica (its /ready says so) gets no new work. In a pool with
// warm prompts (warmup.h) a replica that becomes healthy is first `warming`:
// held out of routing until the gateway has replayed them (EndWarmup).
//
// RoutingPolicy is the seam for other policies (cache-aware routing,
// fairness): given a pool, the request and the replicas already tried, it
// picks one available replica or none. The policies are in routing.h.
// Thread-safety: Replica's state is atomics and a mutex; the policies are
// thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/canary.h"
#include "gateway/config.h"
#include "gateway/fair_queue.h"
#include "gateway/prefix_index.h"
#include "http/http_client.h"

namespace kvs::gateway {

class Replica {
 public:
  enum class Health { kUnknown, kHealthy, kEjected };

  // dns_entry: the index of the pool's replicas_dns entry the replica was
  // discovered from (discovery.h); -1 for a replica listed in the config.
  Replica(std::string pool, http::Url url, double weight, std::string version = "stable", int dns_entry = -1);

  const std::string& pool() const { return pool_; }
  const std::string& name() const { return name_; }  // "http://host:port"
  const http::Url& url() const { return url_; }
  double weight() const { return weight_.load(); }
  void set_weight(double w) { weight_.store(w); }
  // The weight routing uses: during slow start (`ramp` after the replica
  // became ready) from 10 % of weight() up to all of it.
  double EffectiveWeight(std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration ramp) const;
  void TEST_SetReadySince(std::chrono::steady_clock::time_point t) { ready_since_.store(t); }
  const std::string& version() const { return version_; }
  // Drills: the fraction of attempts the gateway fails as if the replica had (ReplicaConfig::fault_rate).
  double fault_rate() const { return fault_rate_.load(); }
  void set_fault_rate(double f) { fault_rate_.store(f); }

  Health health() const { return health_.load(); }
  bool draining() const { return draining_.load(); }
  bool available() const { return listed() && health() == Health::kHealthy && !draining() && !warming(); }

  // Whether the replica is in the pool now. A discovered replica whose
  // address left its DNS name is unlisted: not routed to, probed, counted or
  // shown, its health back to kUnknown and its prefix record dropped; it is
  // listed again (and probed before it gets work) if the address comes back.
  bool listed() const { return listed_.load(); }
  void set_listed(bool listed);
  int dns_entry() const { return dns_entry_; }

  // Warm-up on joining (warmup.h). With warm_on_join set, every transition
  // to kHealthy also sets warming (before the health is published, so no
  // reader sees the replica available in between) and counts one join.
  void set_warm_on_join(bool on) { warm_on_join_.store(on); }
  bool warming() const { return warming_.load(); }
  uint64_t joins() const { return joins_.load(); }
  // Releases the replica to routing; slow start ramps from now.
  void EndWarmup();

  // The gateway's own accounting (reserved tokens of requests in flight).
  void AddOutstanding(int64_t tokens, int64_t requests) {
    outstanding_tokens_.fetch_add(tokens);
    outstanding_requests_.fetch_add(requests);
  }
  int64_t outstanding_tokens() const { return outstanding_tokens_.load(); }
  int64_t outstanding_requests() const { return outstanding_requests_.load(); }

  // Scraped from the replica's /metrics.
  void SetScraped(double waiting, double running, double kv_usage);
  double queue_length() const { return queue_length_.load(); }
  double running() const { return running_.load(); }
  double kv_usage() const { return kv_usage_.load(); }

  // Results of requests. OnFailure returns true when it ejected the replica.
  void OnSuccess() { consecutive_failures_.store(0); }
  bool OnFailure(int64_t eject_after);
  // A /ready probe. Returns +1 when it (re)admitted the replica, -1 when it
  // ejected it, 0 otherwise.
  int OnProbe(bool ready, bool draining, int64_t readmit_after);

  std::vector<std::string> models() const;
  void set_models(std::vector<std::string> m);

  // What the gateway knows of the replica's prefix cache (cache_aware pools).
  PrefixIndex& prefix_index() { return prefix_index_; }
  const PrefixIndex& prefix_index() const { return prefix_index_; }

 private:
  const std::string pool_;
  const http::Url url_;
  const std::string name_;
  const std::string version_;
  const int dns_entry_;
  std::atomic<bool> listed_{true};
  std::atomic<double> weight_;
  std::atomic<double> fault_rate_{0};
  std::atomic<std::chrono::steady_clock::time_point> ready_since_{};  // when it last became healthy
  std::atomic<Health> health_{Health::kUnknown};
  std::atomic<bool> draining_{false};
  std::atomic<bool> warm_on_join_{false};
  std::atomic<bool> warming_{false};
  std::atomic<uint64_t> joins_{0};
  std::atomic<int64_t> outstanding_tokens_{0};
  std::atomic<int64_t> outstanding_requests_{0};
  std::atomic<double> queue_length_{0};
  std::atomic<double> running_{0};
  std::atomic<double> kv_usage_{0};
  std::atomic<int64_t> consecutive_failures_{0};
  std::mutex mu_;                 // serializes health transitions
  int64_t good_probes_ = 0;       // guarded by mu_
  mutable std::mutex models_mu_;
  std::vector<std::string> models_;  // guarded by models_mu_
  PrefixIndex prefix_index_;
};

// The replicas of a pool. It grows (discovery adds replicas, a reload may)
// but never shrinks, so a Replica* stays valid for the gateway's life:
// requests in flight, probes and warm-ups hold plain pointers. A replica that
// leaves is unlisted (Replica::set_listed) and listed again if it comes back,
// so the list holds each address once; kCapacity bounds how many different
// addresses one gateway process can have seen in a pool.
// Thread-safety: Add is serialized by an internal mutex; readers iterate
// without locks over the prefix that size() publishes (release on Add,
// acquire on size()), and the slots below it never change.
class ReplicaList {
 public:
  static constexpr size_t kCapacity = 4096;

  ReplicaList() : slots_(kCapacity) {}
  size_t size() const { return size_.load(std::memory_order_acquire); }
  bool empty() const { return size() == 0; }
  Replica* operator[](size_t i) const { return slots_[i].get(); }
  // The replica added, or nullptr when the list is full.
  Replica* Add(std::unique_ptr<Replica> r);
  // The replica named `name` ("http://host:port"), listed or not; nullptr if none.
  Replica* Find(const std::string& name) const;
  // The listed replicas, in the order they were added.
  std::vector<Replica*> Listed() const;
  size_t num_listed() const;

  // Iteration over every replica added (listed or not) up to size() at begin().
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Replica*;
    using difference_type = std::ptrdiff_t;
    using pointer = Replica* const*;
    using reference = Replica*;
    Iterator() = default;
    Iterator(const ReplicaList* list, size_t i) : list_(list), i_(i) {}
    Replica* operator*() const { return (*list_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator old = *this;
      ++i_;
      return old;
    }
    bool operator!=(const Iterator& o) const { return i_ != o.i_; }
    bool operator==(const Iterator& o) const { return i_ == o.i_; }

   private:
    const ReplicaList* list_ = nullptr;
    size_t i_ = 0;
  };
  Iterator begin() const { return Iterator(this, 0); }
  Iterator end() const { return Iterator(this, size()); }

 private:
  std::mutex add_mu_;
  std::vector<std::unique_ptr<Replica>> slots_;  // [kCapacity]; [0, size_) set, never changed after
  std::atomic<size_t> size_{0};
};

class RoutingPolicy;

struct Pool {
  // The key the replicas of this pool require, and its digest (the
  // replicas' prefix-cache namespace: block hashes are salted with it).
  // Swapped whole when a reload rotates the key; readers take a snapshot.
  struct Credentials {
    std::string api_key;     // "" : none
    std::string key_digest;  // Sha256Hex(api_key), "" without one
  };
  std::shared_ptr<const Credentials> credentials() const { return std::atomic_load(&credentials_); }
  void set_api_key(const std::string& key);
  // {"Authorization", "Bearer KEY"} for a request to a replica; none without a key.
  std::vector<std::pair<std::string, std::string>> AuthHeaders() const;

  PoolConfig config;  // config.api_key: as at start; credentials() is current
  ReplicaList replicas;  // listed and unlisted (ReplicaList::Listed for the current set)
  std::unique_ptr<RoutingPolicy> policy;  // config.routing's (routing.h)
  std::unique_ptr<Canary> canary;         // the release split (disabled without config.canary_version)
  std::unique_ptr<FairQueue> queue = std::make_unique<FairQueue>();  // requests waiting (max_requests_per_replica)
  // Held from a policy's Pick until the request's outstanding tokens are added
  // to the replica picked: picks that ran side by side would all see the same
  // loads and send a burst to one replica.
  std::mutex route_mu;

  // Every available replica has max_requests_per_replica requests in flight (false when that is 0).
  bool saturated() const;

  const std::string& name() const { return config.name; }
  bool has_available() const;
  // Whether a request for this pool can be served now (an available replica).
  bool can_serve() const { return has_available(); }

 private:
  std::shared_ptr<const Credentials> credentials_ = std::make_shared<const Credentials>();
};

// What a cache-aware policy predicted for the replica it picked (metrics:
// predicted vs the replica's reported cached_tokens).
struct RoutePrediction {
  bool made = false;
  int64_t cached_tokens = 0;       // on the replica picked
  int64_t disk_tokens = 0;         // of cached_tokens, those on its disk tier only
  int64_t best_cached_tokens = 0;  // on the replica holding the most (> cached_tokens: load won over affinity)
  PrefixIndex::Source source = PrefixIndex::Source::kNone;
};

// What a policy may look at to place one request.
struct RouteInput {
  int64_t prompt_tokens = 0;  // the longest prompt
  int64_t cost = 0;           // tokens reserved (prompt + max_tokens, x n)
  std::string tenant;
  const std::vector<std::vector<int32_t>>* prompt_ids = nullptr;  // for cache-aware policies
  std::string cache_salt;     // the client's cache_salt ("": none)
  // Canary pools: +1 only replicas of the canary version, -1 only others, 0 any.
  int version_filter = 0;
  std::string canary_version;  // the pool's canary version when version_filter != 0
  mutable RoutePrediction prediction;  // written by Pick
};

// Whether a replica is within the pool's max_kv_usage and max_queue (every
// policy prefers the replicas that are).
bool WithinLimits(const Pool& pool, const Replica& r);

// Whether the replica's version is one `in` may use in this pool.
inline bool VersionAdmits(const Replica& r, const RouteInput& in) {
  if (in.version_filter == 0) return true;
  return (r.version() == in.canary_version) == (in.version_filter > 0);
}

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  virtual const char* name() const = 0;
  // An available replica of the pool not in `tried`, or nullptr.
  virtual Replica* Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) = 0;
};

}  // namespace kvs::gateway
