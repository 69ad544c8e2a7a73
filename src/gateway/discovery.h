// Replicas from DNS: the pools' replicas_dns entries.
//
// In Kubernetes a pool's replicas are the pods behind a headless Service:
// its name resolves to one address per ready pod. Pointing the gateway at a
// Service's virtual IP instead would make the whole pool one "replica" and
// defeat per-replica routing, cache-aware routing, ejection and canaries.
// ReplicaDiscovery resolves each entry's name at start and every `refresh`,
// and keeps the pool's replicas equal to the addresses: a new address is
// added (health kUnknown: probed before it gets work), one that left is
// unlisted (Replica::set_listed), one that came back is listed again.
//
// A lookup that fails (no answer from the resolver, a server failure) keeps
// the replicas the entry had: a DNS hiccup must not empty a pool. A name
// that exists with no addresses (NotFound: an empty Service, every pod gone)
// unlists them all.
//
// Thread-safety: Refresh / RefreshAll run on the caller's thread (start-up)
// or on the discovery thread (Start); the hooks run on that thread. Stop
// joins it; the destructor stops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "gateway/pool.h"

namespace kvs::gateway {

struct GatewayMetrics;
class Router;

class ReplicaDiscovery {
 public:
  // The addresses of `host` as text ("10.0.0.5", "fd00::5"), each once.
  // NotFound: the name has no addresses; any other error: the lookup failed.
  using Resolver = std::function<StatusOr<std::vector<std::string>>(const std::string& host)>;
  struct Hooks {
    std::function<void(Replica*)> listed;    // a replica joined (new, or back)
    std::function<void(Replica*)> unlisted;  // a replica left
  };

  // metrics may be null (tests).
  ReplicaDiscovery(Router* router, Resolver resolver, Hooks hooks, std::chrono::milliseconds refresh,
                   GatewayMetrics* metrics = nullptr);
  ~ReplicaDiscovery();
  ReplicaDiscovery(const ReplicaDiscovery&) = delete;
  ReplicaDiscovery& operator=(const ReplicaDiscovery&) = delete;

  // Whether any pool has replicas_dns entries (else there is nothing to run).
  bool active() const;
  // One round over every pool's entries.
  void RefreshAll();
  // Resolves again every `refresh` on a thread of its own.
  void Start();
  void Stop();

  // getaddrinfo (the system's resolver: /etc/hosts, then DNS).
  static Resolver SystemResolver();

 private:
  void Refresh(Pool* pool, size_t entry);

  Router* router_;
  Resolver resolver_;
  Hooks hooks_;
  std::chrono::milliseconds refresh_;
  GatewayMetrics* metrics_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace kvs::gateway
