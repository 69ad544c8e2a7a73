#include "gateway/discovery.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/types.h>

#include <algorithm>
#include <arpa/inet.h>
#include <set>

#include <spdlog/spdlog.h>

#include "gateway/gateway_metrics.h"
#include "gateway/router.h"

namespace kvs::gateway {

ReplicaDiscovery::ReplicaDiscovery(Router* router, Resolver resolver, Hooks hooks, std::chrono::milliseconds refresh,
                                   GatewayMetrics* metrics)
    : router_(router), resolver_(std::move(resolver)), hooks_(std::move(hooks)), refresh_(refresh), metrics_(metrics) {}

ReplicaDiscovery::~ReplicaDiscovery() { Stop(); }

bool ReplicaDiscovery::active() const {
  for (const auto& p : router_->pools()) {
    if (!p->config.replicas_dns.empty()) return true;
  }
  return false;
}

void ReplicaDiscovery::RefreshAll() {
  for (const auto& p : router_->pools()) {
    for (size_t i = 0; i < p->config.replicas_dns.size(); ++i) Refresh(p.get(), i);
  }
}

void ReplicaDiscovery::Refresh(Pool* pool, size_t entry) {
  const ReplicaConfig& rc = pool->config.replicas_dns[entry];
  auto name = http::Url::Parse(rc.url);
  KVS_CHECK_MSG(name.ok(), "{}", name.status().message());  // ValidateGatewayConfig checked it
  StatusOr<std::vector<std::string>> found = resolver_(name->host);
  const char* outcome = found.ok() ? "ok" : found.status().code() == StatusCode::kNotFound ? "empty" : "error";
  if (metrics_) metrics_->dns_lookups.With({pool->name(), name->HostPort(), outcome}).Inc();
  if (!found.ok() && found.status().code() != StatusCode::kNotFound) {
    // Keep what the entry had: a resolver hiccup must not empty the pool.
    spdlog::warn("gateway: pool {}: resolving {} failed (its {} replicas stay): {}", pool->name(), name->host,
                 std::count_if(pool->replicas.begin(), pool->replicas.end(),
                               [&](const Replica* r) { return r->listed() && r->dns_entry() == int(entry); }),
                 found.status().message());
    return;
  }
  std::set<std::string> now;  // replica names: http://ADDRESS:PORT
  std::vector<http::Url> urls;
  if (found.ok()) {
    for (const std::string& address : *found) {
      http::Url u = *name;
      u.host = address;
      if (now.insert(u.ToString()).second) urls.push_back(std::move(u));
    }
  }
  for (Replica* r : pool->replicas) {
    if (r->dns_entry() != int(entry) || !r->listed() || now.count(r->name())) continue;
    r->set_listed(false);
    spdlog::info("gateway: replica {} (pool {}) left: {} no longer resolves to it", r->name(), pool->name(),
                 name->host);
    if (hooks_.unlisted) hooks_.unlisted(r);
  }
  for (const http::Url& u : urls) {
    Replica* r = pool->replicas.Find(u.ToString());
    if (r && r->dns_entry() != int(entry)) continue;  // listed in the config or by another entry: that one owns it
    if (r && r->listed()) continue;
    if (r) {
      r->set_listed(true);
      spdlog::info("gateway: replica {} (pool {}) is back in {}", r->name(), pool->name(), name->host);
    } else {
      r = pool->replicas.Add(std::make_unique<Replica>(pool->name(), u, rc.weight, rc.version, int(entry)));
      if (!r) {
        spdlog::error("gateway: pool {}: {} replica addresses seen; {} not added (restart the gateway to start "
                      "the list over)",
                      pool->name(), ReplicaList::kCapacity, u.ToString());
        continue;
      }
      r->set_fault_rate(rc.fault_rate);
      spdlog::info("gateway: replica {} (pool {}) joined from {}", r->name(), pool->name(), name->host);
    }
    if (hooks_.listed) hooks_.listed(r);
  }
  if (metrics_) metrics_->pool_replicas.With({pool->name()}).Set(static_cast<double>(pool->replicas.num_listed()));
}

void ReplicaDiscovery::Start() {
  if (!active() || thread_.joinable()) return;
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, refresh_, [this] { return stop_; })) {
      lock.unlock();
      RefreshAll();
      lock.lock();
    }
  });
}

void ReplicaDiscovery::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

ReplicaDiscovery::Resolver ReplicaDiscovery::SystemResolver() {
  return [](const std::string& host) -> StatusOr<std::vector<std::string>> {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
    if (rc == EAI_NONAME
#ifdef EAI_NODATA
        || rc == EAI_NODATA
#endif
    ) {
      return NotFound("{} has no addresses", host);
    }
    if (rc != 0) return Status(StatusCode::kUnavailable, fmt::format("{}: {}", host, gai_strerror(rc)));
    std::vector<std::string> out;
    for (addrinfo* a = res; a; a = a->ai_next) {
      char buf[INET6_ADDRSTRLEN] = {};
      const void* src = a->ai_family == AF_INET6 ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr)
                                                 : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr);
      if ((a->ai_family != AF_INET && a->ai_family != AF_INET6) || !inet_ntop(a->ai_family, src, buf, sizeof buf)) continue;
      if (std::find(out.begin(), out.end(), buf) == out.end()) out.emplace_back(buf);
    }
    freeaddrinfo(res);
    if (out.empty()) return NotFound("{} has no addresses", host);
    return out;
  };
}

}  // namespace kvs::gateway
