// Router: the gateway's pools, built from the configuration, each with the
// routing policy its config names (routing.h); PoolsFor gives the pools a
// request of some length fits, smallest first (pool.h says why).
// Its own component, above pool.h and routing.h: the pools and the policies
// that pick among their replicas know nothing of how they are assembled.
// Thread-safety: thread-safe; the pool list is fixed after construction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gateway/config.h"
#include "gateway/pool.h"

namespace kvs::gateway {

class Router {
 public:
  // Each pool gets the policy its config names (MakeRoutingPolicy), unless
  // `policy` is given: then every pool uses it (tests).
  Router(const std::vector<PoolConfig>& pools, std::unique_ptr<RoutingPolicy> policy = nullptr,
         double health_interval_seconds = 1);

  // Pools sorted by max_context, smallest first.
  const std::vector<std::unique_ptr<Pool>>& pools() const { return pools_; }
  Pool* FindPool(const std::string& name) const;
  // Pools whose max_context is at least `needed`, smallest first.
  std::vector<Pool*> PoolsFor(int64_t needed) const;
  int64_t largest_context() const;
  RoutingPolicy& policy(const Pool& p) { return policy_ ? *policy_ : *p.policy; }
  RoutingPolicy& policy() { return policy(*pools_.front()); }
  // The listed replicas of every pool (ReplicaList::Listed).
  std::vector<Replica*> AllReplicas() const;

 private:
  std::vector<std::unique_ptr<Pool>> pools_;
  std::unique_ptr<RoutingPolicy> policy_;  // overrides the pools' own (tests)
};

}  // namespace kvs::gateway
