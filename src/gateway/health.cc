#include "gateway/health.h"

#include <future>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "metrics/prom_parse.h"

namespace kvs::gateway {

ScrapedStats ParseReplicaMetrics(std::string_view text) {
  ScrapedStats s;
  // Only the replica-wide series (no labels); the last one of a name wins.
  for (const metrics::PromSample& p : metrics::ParsePrometheusText(text).samples) {
    if (!p.labels.empty()) continue;
    if (p.name == "kvserve:num_requests_waiting") s.waiting = p.value;
    if (p.name == "kvserve:num_requests_running") s.running = p.value;
    if (p.name == "kvserve:kv_cache_usage_ratio") s.kv_usage = p.value;
  }
  return s;
}

HealthChecker::HealthChecker(Router* router, http::HttpClient* client, GatewayMetrics* metrics,
                             HealthOptions options)
    : router_(router), client_(client), metrics_(metrics), options_(options) {}

HealthChecker::~HealthChecker() { Stop(); }

// A probe may take the interval, but never less than 2 s: on a loaded
// machine a short interval must not turn slow answers into ejections (one
// probe per replica is in flight at a time, so they cannot pile up).
std::chrono::milliseconds HealthChecker::ProbeTimeout() const {
  return std::max(options_.interval, std::chrono::milliseconds(2000));
}

void HealthChecker::Start() { thread_ = std::thread([this] { Loop(); }); }

void HealthChecker::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

// Replicas that are out (ejected, loading, not yet seen) are probed four
// times per interval, the others once: one that comes back is readmitted
// after readmit_after_probes quarter intervals, not whole ones (a blue/green
// rollback waits on exactly that), while a healthy pool costs no more.
void HealthChecker::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (uint64_t tick = 0; !stop_; ++tick) {
    lock.unlock();
    ProbeRound(/*only_unavailable=*/tick % 4 != 0);
    lock.lock();
    cv_.wait_for(lock, options_.interval / 4, [&] { return stop_; });
  }
}

void HealthChecker::ProbeRound(bool only_unavailable) {
  const uint64_t round = only_unavailable ? rounds_.load() : rounds_.fetch_add(1);
  for (Replica* r : router_->AllReplicas()) {
    if (only_unavailable && r->available()) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stop_ || in_flight_[r]) continue;
      in_flight_[r] = true;
    }
    // Models now and then (they change only with a replica's restart).
    const bool models = r->models().empty() || round % 10 == 0;
    Probe(r, [this, r, models] {
      AfterProbe(r, models, [this, r] {
        std::lock_guard<std::mutex> lock(mu_);
        in_flight_[r] = false;
      });
    });
  }
}

void HealthChecker::ProbeAllAndWait(std::chrono::milliseconds timeout) {
  auto replicas = router_->AllReplicas();
  auto remaining = std::make_shared<std::atomic<size_t>>(replicas.size());
  auto done = std::make_shared<std::promise<void>>();
  auto fut = done->get_future();
  if (replicas.empty()) return;
  for (Replica* r : replicas) {
    Probe(r, [this, r, remaining, done] {
      AfterProbe(r, true, [remaining, done] {
        if (remaining->fetch_sub(1) == 1) done->set_value();
      });
    });
  }
  fut.wait_for(timeout);
}

void HealthChecker::AfterProbe(Replica* r, bool models, std::function<void()> done) {
  Scrape(r, models || r->warming(), [this, r, done = std::move(done)]() mutable {
    if (r->warming() && r->health() == Replica::Health::kHealthy && options_.on_warming) options_.on_warming(r);
    PollCache(r, 8, std::move(done));
  });
}

namespace {

std::vector<std::pair<std::string, std::string>> AuthHeaders(const Router& router, const Replica& r) {
  const Pool* p = router.FindPool(r.pool());
  if (p) return p->AuthHeaders();
  return {};
}

}  // namespace

void HealthChecker::Probe(Replica* r, std::function<void()> done) {
  Get(r, "/ready", {}, 4096, [this, r, done = std::move(done)](const http::ClientResult& res, int status,
                                                               const std::string& body) {
    const bool ready = res.ok() && status == 200;
    bool draining = false;
    if (res.ok() && status == 503) {
      auto j = nlohmann::json::parse(body, nullptr, false);
      draining = j.is_object() && j.value("status", "") == "draining";
    }
    const bool was_available = r->available();
    const int change = r->OnProbe(ready, draining, options_.readmit_after_probes);
    if (change < 0) {
      metrics_->ejections.With({r->pool(), r->name(), "probe"}).Inc();
      spdlog::warn("gateway: replica {} (pool {}) ejected: /ready {}", r->name(), r->pool(),
                   res.ok() ? "answered " + std::to_string(status) : res.message);
    } else if (change > 0) {
      metrics_->readmissions.With({r->pool(), r->name()}).Inc();
      spdlog::info("gateway: replica {} (pool {}) re-admitted", r->name(), r->pool());
    } else if (!was_available && r->available()) {
      spdlog::info("gateway: replica {} (pool {}) is ready", r->name(), r->pool());
    } else if (was_available && draining) {
      spdlog::info("gateway: replica {} (pool {}) is draining: no new work", r->name(), r->pool());
    }
    if (!res.ok() && !r->available()) {
      std::lock_guard<std::mutex> lock(mu_);
      std::string& last = last_failure_[r];
      // An ejection (change < 0) was logged above with the same message.
      if (res.message != last) {
        last = res.message;
        if (change >= 0) {
          spdlog::warn("gateway: replica {} (pool {}) not available: /ready {}", r->name(), r->pool(), res.message);
        }
      }
    } else if (res.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      last_failure_.erase(r);
    }
    metrics_->replica_healthy.With({r->pool(), r->name()}).Set(r->available() ? 1 : 0);
    done();
  });
}

void HealthChecker::Scrape(Replica* r, bool models, std::function<void()> done) {
  if (r->health() != Replica::Health::kHealthy) {
    done();
    return;
  }
  auto on_metrics = [this, r, models, done = std::move(done)](const http::ClientResult& res, int status,
                                                              const std::string& body) mutable {
    if (res.ok() && status == 200) {
      const ScrapedStats s = ParseReplicaMetrics(body);
      r->SetScraped(s.waiting, s.running, s.kv_usage);
      metrics_->replica_queue_length.With({r->pool(), r->name()}).Set(s.waiting);
      metrics_->replica_kv_usage.With({r->pool(), r->name()}).Set(s.kv_usage);
    }
    if (!models) {
      done();
      return;
    }
    Get(r, "/v1/models", AuthHeaders(*router_, *r), kNoLimit,
        [r, done = std::move(done)](const http::ClientResult& mres, int mstatus, const std::string& mbody) {
      if (mres.ok() && mstatus == 200) {
        auto j = nlohmann::json::parse(mbody, nullptr, false);
        std::vector<std::string> ids;
        if (j.is_object() && j.contains("data") && j["data"].is_array()) {
          for (const auto& m : j["data"]) {
            if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"].get<std::string>());
          }
        }
        if (!ids.empty()) r->set_models(std::move(ids));
      }
      done();
    });
  };
  Get(r, "/metrics", {}, kNoLimit, std::move(on_metrics));
}

void HealthChecker::PollCache(Replica* r, int pages, std::function<void()> done) {
  const Pool* pool = router_->FindPool(r->pool());
  if (!pool || pool->config.routing != kCacheAware || r->health() != Replica::Health::kHealthy || pages <= 0) {
    done();
    return;
  }
  Get(r, "/v1/cache/blocks?" + r->prefix_index().NextQuery(), AuthHeaders(*router_, *r), size_t{64} << 20,
      [this, r, pages, done = std::move(done)](const http::ClientResult& res, int status,
                                               const std::string& body) mutable {
    PrefixIndex& index = r->prefix_index();
    bool more = false;
    const uint64_t resyncs = index.resyncs();
    if (res.ok() && status == 200) {
      if (!index.Apply(nlohmann::json::parse(body, nullptr, false), std::chrono::steady_clock::now(), &more)) {
        spdlog::warn("gateway: replica {} sent a malformed /v1/cache/blocks page", r->name());
      }
    } else {
      index.MarkFailed();
    }
    metrics_->prefix_index_blocks.With({r->pool(), r->name()}).Set(static_cast<double>(index.num_replica_blocks()));
    metrics_->prefix_index_disk_blocks.With({r->pool(), r->name()}).Set(static_cast<double>(index.num_disk_blocks()));
    if (index.resyncs() > resyncs) metrics_->prefix_index_resyncs.With({r->pool(), r->name()}).Inc();
    if (more) return PollCache(r, pages - 1, std::move(done));
    done();
  });
}

void HealthChecker::Get(Replica* r, std::string target, std::vector<std::pair<std::string, std::string>> headers,
                        size_t max_body, GetDone done) {
  http::ClientRequest req;
  req.target = std::move(target);
  req.headers = std::move(headers);
  req.timeouts.connect = ProbeTimeout();
  req.timeouts.total = ProbeTimeout();
  auto status = std::make_shared<int>(0);
  auto body = std::make_shared<std::string>();
  http::ClientCallbacks cb;
  cb.on_head = [status](const http::ClientResponseHead& h) { *status = h.status; };
  cb.on_data = [body, max_body](std::string_view d) {
    if (body->size() < max_body) body->append(d);
  };
  cb.on_done = [status, body, done = std::move(done)](const http::ClientResult& res) mutable {
    done(res, *status, *body);
  };
  client_->Start(r->url(), std::move(req), std::move(cb));
}

}  // namespace kvs::gateway
