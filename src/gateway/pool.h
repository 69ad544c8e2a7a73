// Pools of replicas, their state, and the routing policy.
//
// A Pool is a set of `kvserve serve` replicas sized for one range of request
// lengths (max_context). Router picks the smallest pool whose max_context
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
// draining replica (its /ready says so) gets no new work.
//
// RoutingPolicy is the seam for other policies (cache-aware routing,
// fairness): given a pool, the request and the replicas already tried, it
// picks one available replica or none. LeastOutstandingTokens scores
// outstanding tokens / weight, tie-broken by scraped queue length, then KV
// use, then round robin.
// Thread-safety: Replica's state is atomics and a mutex; Router and the
// policies are thread-safe (the pool list is fixed after construction).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gateway/config.h"
#include "http/http_client.h"

namespace kvs::gateway {

class Replica {
 public:
  enum class Health { kUnknown, kHealthy, kEjected };

  Replica(std::string pool, http::Url url, double weight);

  const std::string& pool() const { return pool_; }
  const std::string& name() const { return name_; }  // "http://host:port"
  const http::Url& url() const { return url_; }
  double weight() const { return weight_.load(); }
  void set_weight(double w) { weight_.store(w); }

  Health health() const { return health_.load(); }
  bool draining() const { return draining_.load(); }
  bool available() const { return health() == Health::kHealthy && !draining(); }

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

 private:
  const std::string pool_;
  const http::Url url_;
  const std::string name_;
  std::atomic<double> weight_;
  std::atomic<Health> health_{Health::kUnknown};
  std::atomic<bool> draining_{false};
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
};

struct Pool {
  PoolConfig config;
  std::vector<std::unique_ptr<Replica>> replicas;

  const std::string& name() const { return config.name; }
  bool has_available() const;
};

// What a policy may look at to place one request.
struct RouteInput {
  int64_t prompt_tokens = 0;  // the longest prompt
  int64_t cost = 0;           // tokens reserved (prompt + max_tokens, x n)
  std::string tenant;
  const std::vector<std::vector<int32_t>>* prompt_ids = nullptr;  // for cache-aware policies
};

class RoutingPolicy {
 public:
  virtual ~RoutingPolicy() = default;
  virtual const char* name() const = 0;
  // An available replica of the pool not in `tried`, or nullptr.
  virtual Replica* Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) = 0;
};

class LeastOutstandingTokens : public RoutingPolicy {
 public:
  const char* name() const override { return "least_outstanding_tokens"; }
  Replica* Pick(const Pool& pool, const RouteInput& in, const std::vector<const Replica*>& tried) override;

 private:
  std::atomic<uint64_t> rr_{0};
};

class Router {
 public:
  Router(const std::vector<PoolConfig>& pools, std::unique_ptr<RoutingPolicy> policy);

  // Pools sorted by max_context, smallest first.
  const std::vector<std::unique_ptr<Pool>>& pools() const { return pools_; }
  Pool* FindPool(const std::string& name) const;
  // Pools whose max_context is at least `needed`, smallest first.
  std::vector<Pool*> PoolsFor(int64_t needed) const;
  int64_t largest_context() const;
  RoutingPolicy& policy() { return *policy_; }
  std::vector<Replica*> AllReplicas() const;

 private:
  std::vector<std::unique_ptr<Pool>> pools_;
  std::unique_ptr<RoutingPolicy> policy_;
};

}  // namespace kvs::gateway
