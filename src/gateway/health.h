// HealthChecker: every gateway.health_interval_seconds, for each replica,
// an active /ready probe (200: ready; 503 {"status":"draining"}: draining;
// anything else or no answer within max(interval, 2 s): not ready), then a scrape
// of its /metrics (queue length, running sequences, KV use) and, now and
// then, of /v1/models; in cache_aware pools, a poll of the replica's
// prefix-cache blocks (PrefixIndex). A replica that joined a pool with warm
// prompts is handed to HealthOptions::on_warming. Results go to Replica::OnProbe / SetScraped and the
// gateway's metrics. One probe per replica is in flight at a time, so a hung
// replica costs one timed-out probe per interval, never a pile of them.
// Thread-safety: Start/Stop from one thread; the probes run on the HTTP
// client's threads.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "gateway/gateway_metrics.h"
#include "gateway/pool.h"
#include "gateway/router.h"
#include "http/http_client.h"

namespace kvs::gateway {

struct HealthOptions {
  std::chrono::milliseconds interval{1000};
  int64_t readmit_after_probes = 2;
  // Called for a healthy replica that is `warming` (it just joined a pool
  // with warm prompts) after the scrape that follows the probe, so that its
  // /v1/models is fresh; must not block (Warmer::Begin).
  std::function<void(Replica*)> on_warming;
};

// The few kvserve: gauges routing needs, out of a replica's /metrics
// (metrics::ParsePrometheusText); a gauge absent stays 0.
struct ScrapedStats {
  double waiting = 0;
  double running = 0;
  double kv_usage = 0;
};
ScrapedStats ParseReplicaMetrics(std::string_view text);

class HealthChecker {
 public:
  HealthChecker(Router* router, http::HttpClient* client, GatewayMetrics* metrics, HealthOptions options);
  ~HealthChecker();  // Stop()s

  void Start();
  void Stop();
  // Probes every replica once now and waits for the answers (start-up, tests).
  void ProbeAllAndWait(std::chrono::milliseconds timeout);
  uint64_t rounds() const { return rounds_.load(); }

 private:
  void Loop();
  // One probe (and scrape) of every replica, or of the unavailable ones only.
  void ProbeRound(bool only_unavailable);
  void Probe(Replica* r, std::function<void()> done);
  void Scrape(Replica* r, bool models, std::function<void()> done);
  // cache_aware pools: GET /v1/cache/blocks into the replica's PrefixIndex
  // (up to `pages` pages while the replica has more).
  void PollCache(Replica* r, int pages, std::function<void()> done);
  // Scrape (with /v1/models when `models` or the replica is warming), the
  // warm-up hand-off, then PollCache: what follows every probe.
  void AfterProbe(Replica* r, bool models, std::function<void()> done);
  std::chrono::milliseconds ProbeTimeout() const;
  // GET target on the replica with the probe timeouts; the body is kept up
  // to max_body bytes. Every probe, scrape and index poll goes through it.
  using GetDone = std::function<void(const http::ClientResult&, int status, const std::string& body)>;
  static constexpr size_t kNoLimit = ~size_t{0};
  void Get(Replica* r, std::string target, std::vector<std::pair<std::string, std::string>> headers, size_t max_body,
           GetDone done);

  Router* router_;
  http::HttpClient* client_;
  GatewayMetrics* metrics_;
  HealthOptions options_;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;                          // guarded by mu_
  std::map<const Replica*, bool> in_flight_;   // guarded by mu_
  // guarded by mu_: why each replica's last probe failed to connect, so a
  // replica that never became available (e.g. its TLS certificate does not
  // verify) is logged once per reason, not every interval.
  std::map<const Replica*, std::string> last_failure_;
  std::atomic<uint64_t> rounds_{0};
};

}  // namespace kvs::gateway
