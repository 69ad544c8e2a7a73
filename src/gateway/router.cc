#include "gateway/router.h"

#include <algorithm>

#include "base/status.h"
#include "gateway/routing.h"

namespace kvs::gateway {

Router::Router(const std::vector<PoolConfig>& pools, std::unique_ptr<RoutingPolicy> policy,
               double health_interval_seconds)
    : policy_(std::move(policy)) {
  for (const auto& pc : pools) {
    auto p = std::make_unique<Pool>();
    p->config = pc;
    p->policy = MakeRoutingPolicy(pc, health_interval_seconds);
    p->set_api_key(pc.api_key);
    p->canary = std::make_unique<Canary>(pc);
    for (const auto& rc : pc.replicas) {
      auto url = http::Url::Parse(rc.url);
      KVS_CHECK_MSG(url.ok(), "{}", url.status().message());  // ValidateGatewayConfig checked it
      url->tls_ca_file = pc.tls_ca_file;
      Replica* r = p->replicas.Add(std::make_unique<Replica>(pc.name, *url, rc.weight, rc.version));
      KVS_CHECK(r != nullptr);  // ValidateGatewayConfig bounds the count
      r->set_fault_rate(rc.fault_rate);
    }
    pools_.push_back(std::move(p));
  }
  std::stable_sort(pools_.begin(), pools_.end(),
                   [](const auto& a, const auto& b) { return a->config.max_context < b->config.max_context; });
}

Pool* Router::FindPool(const std::string& name) const {
  for (const auto& p : pools_) {
    if (p->name() == name) return p.get();
  }
  return nullptr;
}

std::vector<Pool*> Router::PoolsFor(int64_t needed) const {
  std::vector<Pool*> out;
  for (const auto& p : pools_) {
    if (p->config.max_context >= needed) out.push_back(p.get());
  }
  return out;
}

int64_t Router::largest_context() const { return pools_.empty() ? 0 : pools_.back()->config.max_context; }

std::vector<Replica*> Router::AllReplicas() const {
  std::vector<Replica*> out;
  for (const auto& p : pools_) {
    for (Replica* r : p->replicas.Listed()) out.push_back(r);
  }
  return out;
}

}  // namespace kvs::gateway
