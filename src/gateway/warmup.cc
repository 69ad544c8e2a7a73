#include "gateway/warmup.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvs::gateway {

namespace {
using WarmClock = std::chrono::steady_clock;
}  // namespace

struct Warmer::Run {
  Replica* replica = nullptr;
  const std::vector<WarmPrompt>* prompts = nullptr;
  std::string model;
  std::vector<std::pair<std::string, std::string>> headers;
  size_t concurrency = 1;
  std::chrono::milliseconds connect_timeout{2000};
  WarmClock::time_point started, deadline;
  uint64_t joins = 0;  // Replica::joins() when it started
  std::mutex mu;
  size_t next = 0;       // guarded by mu: the next prompt to send
  size_t in_flight = 0;  // guarded by mu
  size_t ok = 0, failed = 0;  // guarded by mu
  std::string first_error;    // guarded by mu
  bool finished = false;      // guarded by mu
};

Warmer::Warmer(Router* router, http::HttpClient* client, GatewayMetrics* metrics,
               std::map<std::string, std::vector<WarmPrompt>> prompts)
    : router_(router), client_(client), metrics_(metrics), prompts_(std::move(prompts)) {}

void Warmer::Begin(Replica* r) {
  const Pool* pool = router_->FindPool(r->pool());
  auto it = prompts_.find(r->pool());
  if (!pool || it == prompts_.end() || !r->warming()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!running_.insert(r).second) return;
  }
  auto run = std::make_shared<Run>();
  run->replica = r;
  run->prompts = &it->second;
  run->joins = r->joins();
  run->concurrency = static_cast<size_t>(std::max<int64_t>(pool->config.warm_concurrency, 1));
  run->connect_timeout = std::chrono::milliseconds(static_cast<int64_t>(pool->config.connect_timeout_seconds * 1000));
  run->started = WarmClock::now();
  run->deadline = run->started + std::chrono::duration_cast<WarmClock::duration>(
                                     std::chrono::duration<double>(pool->config.warm_timeout_seconds));
  run->headers.emplace_back("Content-Type", "application/json");
  for (auto& h : pool->AuthHeaders()) run->headers.push_back(std::move(h));
  const auto models = r->models();
  metrics_->warmups_started.With({r->pool(), r->name()}).Inc();
  metrics_->replica_warming.With({r->pool(), r->name()}).Set(1);
  if (models.empty()) {
    // Its /v1/models has not answered: nothing can name the model.
    std::lock_guard<std::mutex> lock(run->mu);
    run->first_error = "its /v1/models did not answer";
    run->failed = run->prompts->size();
    run->next = run->prompts->size();
  } else {
    run->model = models.front();
    spdlog::info("gateway: replica {} (pool {}) joined: replaying {} warm prompts before it takes traffic", r->name(),
                 r->pool(), run->prompts->size());
  }
  Pump(run);
}

void Warmer::Pump(const std::shared_ptr<Run>& run) {
  std::vector<size_t> send;
  bool done = false;
  {
    std::lock_guard<std::mutex> lock(run->mu);
    const bool expired = WarmClock::now() >= run->deadline;
    while (!expired && run->in_flight < run->concurrency && run->next < run->prompts->size()) {
      send.push_back(run->next++);
      ++run->in_flight;
    }
    if (run->in_flight == 0 && (expired || run->next >= run->prompts->size()) && !run->finished) {
      run->finished = true;
      done = true;
    }
  }
  for (size_t i : send) Send(run, i);
  if (done) Finish(run);
}

void Warmer::Send(const std::shared_ptr<Run>& run, size_t index) {
  const WarmPrompt& p = (*run->prompts)[index];
  http::ClientRequest req;
  req.method = "POST";
  req.target = p.chat ? "/v1/chat/completions" : "/v1/completions";
  req.headers = run->headers;
  req.body = WarmRequestBody(p, run->model);
  // Every replay ends by the deadline, so the warm-up does too (rounded up:
  // a replay timed out a fraction of a millisecond early would let Pump send
  // the next prompt just before the deadline).
  const auto left = std::max(std::chrono::ceil<std::chrono::milliseconds>(run->deadline - WarmClock::now()),
                             std::chrono::milliseconds(1));
  req.timeouts.connect = std::min(run->connect_timeout, left);
  req.timeouts.total = left;
  auto status = std::make_shared<int>(0);
  auto body = std::make_shared<std::string>();
  http::ClientCallbacks cb;
  cb.on_head = [status](const http::ClientResponseHead& h) { *status = h.status; };
  cb.on_data = [body](std::string_view d) {
    if (body->size() < 512) body->append(d.substr(0, 512 - body->size()));
  };
  cb.on_done = [this, run, status, body, line = p.line](const http::ClientResult& res) {
    const bool good = res.ok() && *status == 200;
    Replica* r = run->replica;
    metrics_->warm_prompts.With({r->pool(), r->name(), good ? "ok" : "error"}).Inc();
    {
      std::lock_guard<std::mutex> lock(run->mu);
      --run->in_flight;
      if (good) {
        ++run->ok;
      } else {
        ++run->failed;
        if (run->first_error.empty()) {
          run->first_error = res.ok() ? fmt::format("line {}: HTTP {}: {}", line, *status, *body)
                                      : fmt::format("line {}: {}", line, res.message);
        }
      }
    }
    Pump(run);
  };
  client_->Start(run->replica->url(), std::move(req), std::move(cb));
}

void Warmer::Finish(const std::shared_ptr<Run>& run) {
  Replica* r = run->replica;
  const double seconds = std::chrono::duration<double>(WarmClock::now() - run->started).count();
  size_t ok, failed, skipped;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(run->mu);
    ok = run->ok;
    failed = run->failed;
    skipped = run->prompts->size() - run->next;
    error = run->first_error;
  }
  const bool completed = failed == 0 && skipped == 0;
  metrics_->warmups_finished.With({r->pool(), r->name(), completed ? "completed" : "failed"}).Inc();
  if (completed) {
    spdlog::info("gateway: replica {} (pool {}) warmed with {} prompts in {:.2f} s; it takes traffic", r->name(),
                 r->pool(), ok, seconds);
  } else {
    spdlog::warn("gateway: replica {} (pool {}) warm-up incomplete after {:.2f} s ({} of {} prompts replayed, {} "
                 "failed, {} not sent{}){}; it takes traffic all the same",
                 r->name(), r->pool(), seconds, ok, run->prompts->size(), failed, skipped,
                 skipped > 0 ? ": warm_timeout_seconds passed" : "", error.empty() ? "" : "; first error: " + error);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    running_.erase(r);
  }
  // Re-joined meanwhile (ejected and back, perhaps restarted): its cache may
  // be cold again, so it is warmed again.
  if (r->joins() != run->joins && r->warming()) return Begin(r);
  r->EndWarmup();
  metrics_->replica_warming.With({r->pool(), r->name()}).Set(0);
}

}  // namespace kvs::gateway
