// ProxyRequest's attempts on the replicas, on the exchange's strand
// (proxy_request.h), and StartProxy.
#include "gateway/proxy.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gateway/proxy_errors.h"
#include "gateway/proxy_request.h"
#include "gateway/routing.h"
#include "http/sse.h"

namespace kvs::gateway {

namespace {
std::mt19937_64& ProxyRng() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}
}  // namespace

void ProxyRequest::Begin() {
  ex_->SetCloseHandler([self = shared_from_this()] { self->OnClientGone(); });
  if (ex_->client_closed()) return OnClientGone();
  StartAttempt();
}

// Every pool the request fits is at max_requests_per_replica (or others
// wait already, who come first): wait in the first pool's fair queue
// (503 when it is full). True when the request waits or was answered.
bool ProxyRequest::Enqueue() {
  if (attempts_ > 0 || dequeued_ || pools_.empty()) return false;
  Pool* p = pools_.front();
  if (p->config.max_requests_per_replica <= 0) return false;
  const bool others_wait = p->queue->size() > 0;
  if (!others_wait && !std::all_of(pools_.begin(), pools_.end(), [](Pool* q) { return q->saturated(); })) return false;
  if (static_cast<int64_t>(p->queue->size()) >= p->config.max_queued_requests) {
    FinishWithError(QueueFull(p->name(), p->config.max_queued_requests));
    return true;
  }
  queue_pool_ = p;
  auto self = shared_from_this();
  queue_cancel_ = p->queue->Push(principal_.tenant, principal_.limits.weight, static_cast<double>(reserved_),
                                 [self] { self->ex_->Post([self] { self->OnTurn(); }); });
  gw_->metrics().queued_requests.With({p->name()}).Inc();
  ex_->SetDeadline(Clock::now() + proxy_detail::ToMs(p->config.queue_timeout_seconds), [self] { self->OnQueueTimeout(); });
  return true;
}

// Its turn in the fair queue (strand).
void ProxyRequest::OnTurn() {
  if (dequeued_) {  // it timed out or left meanwhile: the turn goes to the next
    queue_pool_->queue->PopAndResume();
    return;
  }
  dequeued_ = true;
  gw_->metrics().queued_requests.With({queue_pool_->name()}).Dec();
  StartAttempt();
}

void ProxyRequest::OnQueueTimeout() {
  if (finished_ || dequeued_) return;
  queue_cancel_->store(true);
  dequeued_ = true;
  gw_->metrics().queued_requests.With({queue_pool_->name()}).Dec();
  gw_->metrics().queue_timeouts.With({queue_pool_->name()}).Inc();
  FinishWithError(QueueTimeout(queue_pool_->name(), queue_pool_->config.queue_timeout_seconds));
}

void ProxyRequest::StartAttempt() {
  if (finished_) return;
  if (Enqueue()) return;
  Replica* pick = nullptr;
  std::unique_lock<std::mutex> route_lock;  // pick and reserve as one step (Pool::route_mu)
  for (Pool* p : pools_) {
    route_lock = std::unique_lock<std::mutex>(p->route_mu);
    route_.prediction = RoutePrediction{};
    // Canary pools: the sticky key's version, else (none of it available) any.
    route_.canary_version = p->canary->version();
    route_.version_filter = route_.canary_version.empty() ? 0 : (p->canary->ForCanary(StickyKey(*p)) ? 1 : -1);
    pick = gw_->router().policy(*p).Pick(*p, route_, tried_);
    if (!pick && route_.version_filter != 0) {
      route_.version_filter = 0;
      pick = gw_->router().policy(*p).Pick(*p, route_, tried_);
    }
    if (pick) {
      pool_ = p;
      break;
    }
  }
  if (!pick) {
    if (route_lock) route_lock.unlock();
    if (attempts_ == 0) return FinishWithError(NoReplica());
    return GiveUp();
  }
  if (attempts_ > 0) {
    ++retries_;
    gw_->metrics().retries.With({pool_->name()}).Inc();
  }
  ++attempts_;
  replica_ = pick;
  tried_.push_back(pick);
  // The replica's work for this request: the prefill it cannot take from
  // its prefix cache plus the tokens it may generate. (The whole reserved
  // prompt would count the cached prefix as backlog and push the next
  // request of the same conversation off the replica that holds it.)
  outstanding_ = std::max<int64_t>(reserved_ - (route_.prediction.made ? route_.prediction.cached_tokens : 0), 0);
  replica_->AddOutstanding(outstanding_, 1);
  route_lock.unlock();
  gw_->metrics().replica_outstanding_tokens.With({pool_->name(), replica_->name()}).Set(
      static_cast<double>(replica_->outstanding_tokens()));
  ResetAttemptState();
  const uint64_t attempt = ++attempt_id_;
  const PoolConfig& pc = pool_->config;
  attempt_start_ = Clock::now();

  http::ClientRequest req;
  req.method = "POST";
  req.target = ex_->request().path;
  req.body = upstream_body_;
  req.headers = {{"Content-Type", "application/json"}, {"X-Request-Id", id_}, {"X-Forwarded-For", gw_->ClientIp(*ex_)}};
  for (auto& h : pool_->AuthHeaders()) req.headers.push_back(std::move(h));
  const auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - attempt_start_);
  if (remaining.count() <= 0) return GiveUp();
  req.timeouts.connect = std::min(proxy_detail::ToMs(pc.connect_timeout_seconds), remaining);
  req.timeouts.total = remaining;
  // Streams: no first token in time is a failed attempt (retried while
  // nothing reached the client). Non-streaming answers come whole, at the
  // end: only the total limit applies.
  if (stream_) {
    ex_->SetDeadline(std::min(deadline_, attempt_start_ + proxy_detail::ToMs(pc.first_token_timeout_seconds)),
                     [self = shared_from_this(), attempt] { self->OnDeadline(attempt); });
  } else {
    ex_->SetDeadline(deadline_, [self = shared_from_this(), attempt] { self->OnDeadline(attempt); });
  }
  auto self = shared_from_this();
  if (replica_->fault_rate() > 0 && std::uniform_real_distribution<double>(0, 1)(ProxyRng()) < replica_->fault_rate()) {
    // A drill: this attempt fails as a replica's 503 would, without reaching it.
    ex_->Post([self, attempt] {
      if (attempt != self->attempt_id_ || self->finished_) return;
      self->AttemptFailed("injected", fmt::format("fault injected for {} (fault_rate)", self->replica_->name()), false);
    });
    return;
  }
  auto ex = ex_;
  http::ClientCallbacks cb;
  cb.on_head = [self, ex, attempt](const http::ClientResponseHead& h) {
    ex->Post([self, attempt, h] { self->OnHead(attempt, h); });
  };
  cb.on_data = [self, ex, attempt](std::string_view d) {
    ex->Post([self, attempt, d = std::string(d)] { self->OnData(attempt, d); });
  };
  cb.on_done = [self, ex, attempt](const http::ClientResult& r) {
    ex->Post([self, attempt, r] { self->OnDone(attempt, r); });
  };
  call_ = gw_->client().Start(replica_->url(), std::move(req), std::move(cb));
}

void ProxyRequest::ResetAttemptState() {
  upstream_status_ = 0;
  upstream_sse_ = false;
  upstream_body_in_.clear();
  upstream_content_type_.clear();
  held_.clear();
  sse_ = http::SseParser();
  delta_events_ = 0;
  stream_events_ = 0;
  start_prompt_ = -1;
  usage_ = UsageReport();
}

void ProxyRequest::OnHead(uint64_t attempt, const http::ClientResponseHead& h) {
  if (attempt != attempt_id_ || finished_) return;
  upstream_status_ = h.status;
  upstream_content_type_ = std::string(h.Header("Content-Type"));
  upstream_sse_ = h.status == 200 && upstream_content_type_.find("text/event-stream") != std::string::npos;
  if (!stream_ || !upstream_sse_) return;
  gw_->metrics().upstream_first_byte.With({pool_->name()});  // created; observed at the first token
}

void ProxyRequest::OnData(uint64_t attempt, const std::string& d) {
  if (attempt != attempt_id_ || finished_) return;
  if (!upstream_sse_) {
    if (relaying_) return RelayBody(d);
    upstream_body_in_ += d;
    // An answer larger than the gateway holds is relayed as it comes,
    // never cut (its usage is read from its tail at the end).
    if (upstream_body_in_.size() > static_cast<size_t>(gw_->config().gateway.max_response_buffer_bytes)) StartRelay();
    return;
  }
  for (http::SseMessage& m : sse_.Feed(d)) OnEvent(std::move(m));
}

void ProxyRequest::OnDone(uint64_t attempt, const http::ClientResult& r) {
  if (attempt != attempt_id_ || finished_) return;
  gw_->metrics().upstream_duration.With({pool_->name()}).Observe(
      std::chrono::duration<double>(Clock::now() - attempt_start_).count());
  if (relaying_) {
    // The whole body went through; a relay cut by an error ends as it is.
    if (r.ok()) {
      ReadUsageFromTail();
      replica_->OnSuccess();
    } else {
      error_note_ = "relay failed: " + std::string(ClientErrorKindName(r.error));
    }
    return Finish(r.ok() ? upstream_status_ : 502);
  }
  if (!r.ok()) return AttemptFailed(ClientErrorKindName(r.error), r.message, r.error != http::ClientErrorKind::kCancelled);
  if (upstream_sse_ && stream_) {
    if (!committed_) Commit();
    // A stream that ended without its final usage (or [DONE]) still ends.
    replica_->OnSuccess();
    return Finish(200);
  }
  const int s = upstream_status_;
  if (s >= 500 || s == 429) {
    return AttemptFailed(fmt::format("status_{}", s >= 500 ? "5xx" : "429"),
                         fmt::format("{} answered {}", replica_->name(), s), s != 503 && s != 429);
  }
  // The client passed the gateway's own authentication, so a 401 from the
  // replica refuses the pool's api_key: the gateway's misconfiguration (or a
  // release deployed with other keys), not the client's. It counts against
  // the replica (ejection, canary) and another replica is tried.
  if (s == 401) {
    return AttemptFailed("status_401", fmt::format("{} refused the pool's api_key (401)", replica_->name()), true);
  }
  replica_->OnSuccess();
  if (s == 200) {
    nlohmann::json j = nlohmann::json::parse(upstream_body_in_, nullptr, false);
    if (j.is_object() && j.contains("usage") && j["usage"].is_object()) ReadUsage(j["usage"]);
    ttft_ = Clock::now();
    ObserveFirstToken(std::chrono::duration<double>(*ttft_ - attempt_start_).count());
  }
  // Passed through as the replica answered (4xx errors are the same on
  // every replica: no retry).
  RespondWithUpstreamBody(s);
  Finish(s);
}

// A non-streaming answer over gateway.max_response_buffer_bytes: from now
// on it goes to the client as it arrives (chunked), and only its last
// proxy_detail::kUsageTailBytes are kept to read the usage from.
void ProxyRequest::StartRelay() {
  relaying_ = true;
  committed_ = true;  // bytes reached the client: no retry
  http::HttpResponse h;
  h.status = upstream_status_;
  h.SetHeader("Content-Type", upstream_content_type_.empty() ? "application/json" : upstream_content_type_);
  h.SetHeader("X-Request-Id", id_);
  MarkTruncation(&h);
  ex_->StartStream(std::move(h));
  std::string head = std::move(upstream_body_in_);
  upstream_body_in_.clear();
  RelayBody(head);
}

void ProxyRequest::RelayBody(std::string_view d) {
  ex_->Write(std::string(d));
  upstream_body_in_ += d;
  constexpr size_t kTail = proxy_detail::kUsageTailBytes;
  if (upstream_body_in_.size() > 2 * kTail) upstream_body_in_.erase(0, upstream_body_in_.size() - kTail);
}

// Answers the client with the replica's body as it came (and its content type).
void ProxyRequest::RespondWithUpstreamBody(int status) {
  http::HttpResponse res;
  res.status = status;
  res.SetHeader("Content-Type", upstream_content_type_.empty() ? "application/json" : upstream_content_type_);
  res.SetHeader("X-Request-Id", id_);
  MarkTruncation(&res);
  if (truncated_tokens_ > 0 && status == 200) {
    api::Json j = api::Json::parse(upstream_body_in_, nullptr, false);  // in the replica's key order
    if (j.is_object() && j.contains("usage") && j["usage"].is_object()) {
      j["usage"]["truncated_prompt_tokens"] = truncated_tokens_;
      upstream_body_in_ = j.dump(-1, ' ', false, api::Json::error_handler_t::replace);
    }
  }
  res.body = std::move(upstream_body_in_);
  ex_->Respond(std::move(res));
}

// kind: a metric label. passive: counts toward ejecting the replica.
void ProxyRequest::AttemptFailed(const std::string& kind, const std::string& message, bool passive) {
  call_.Cancel();
  if (kind != "status_429") RecordOutcome(false);
  gw_->metrics().upstream_errors.With({pool_->name(), replica_->name(), kind}).Inc();
  spdlog::warn("gateway: {} attempt {} on {} failed: {}", id_, attempts_, replica_->name(), message);
  if (passive && replica_->OnFailure(gw_->config().gateway.eject_after_failures)) {
    gw_->metrics().ejections.With({pool_->name(), replica_->name(), "failures"}).Inc();
    gw_->metrics().replica_healthy.With({pool_->name(), replica_->name()}).Set(0);
    spdlog::warn("gateway: replica {} (pool {}) ejected after {} consecutive failures", replica_->name(),
                 pool_->name(), gw_->config().gateway.eject_after_failures);
  }
  if (upstream_status_ == 503 && upstream_body_in_.find("draining") != std::string::npos) {
    replica_->OnProbe(false, true, gw_->config().gateway.readmit_after_probes);
  }
  last_error_kind_ = kind;
  last_error_ = message;
  ReleaseReplica();
  if (relaying_) {  // part of a JSON body went out: it ends where it was cut
    error_note_ = "relay failed: " + kind;
    return Finish(502);
  }
  if (committed_) {
    gw_->metrics().stream_errors.Inc();
    ex_->Write(StreamErrorEvents(dialect_, UpstreamFailedMidStream(message), stream_events_));
    error_note_ = "stream failed: " + kind;
    return Finish(200);
  }
  const bool time_left = Clock::now() < deadline_;
  if (time_left && attempts_ <= pool_->config.max_retries && !ex_->client_closed()) return StartAttempt();
  GiveUp();
}

void ProxyRequest::GiveUp() {
  // The replica's own error answer, when there was one (not a 401: that
  // one is about the gateway's key, and the client's was good).
  if (upstream_status_ >= 400 && upstream_status_ != 401 && !upstream_body_in_.empty()) {
    RespondWithUpstreamBody(upstream_status_);
    error_note_ = last_error_kind_;
    return Finish(upstream_status_);
  }
  const bool timeout = last_error_kind_.find("timeout") != std::string::npos || Clock::now() >= deadline_;
  error_note_ = last_error_kind_;
  FinishWithError(UpstreamFailed(timeout, attempts_, last_error_));
}

void ProxyRequest::OnDeadline(uint64_t attempt) {
  if (attempt != attempt_id_ || finished_) return;
  const bool total = Clock::now() >= deadline_ - std::chrono::milliseconds(1);
  if (!replica_) return GiveUp();
  AttemptFailed(total ? "total_timeout" : "first_token_timeout",
                fmt::format("no {} from {} within {} s", total ? "complete response" : "first token", replica_->name(),
                            total ? pools_.front()->config.total_timeout_seconds
                                  : pool_->config.first_token_timeout_seconds),
                true);
}

void ProxyRequest::OnClientGone() {
  if (finished_) return;
  gw_->metrics().client_disconnects.Inc();
  call_.Cancel();
  ReleaseReplica();
  error_note_ = "client disconnected";
  Finish(499);
}

void ProxyRequest::ReleaseReplica() {
  if (!replica_ || replica_released_for_ == attempt_id_) return;
  replica_released_for_ = attempt_id_;
  replica_->AddOutstanding(-outstanding_, -1);
  pool_->queue->PopAndResume();  // the freed slot goes to the next in fair order
  gw_->metrics().replica_outstanding_tokens.With({pool_->name(), replica_->name()}).Set(
      static_cast<double>(replica_->outstanding_tokens()));
}

std::string ProxyRequest::StickyKey(const Pool& p) const {
  if (!p.config.sticky_header.empty()) {
    std::string_view v = ex_->request().Header(p.config.sticky_header);
    if (!v.empty()) return "h:" + std::string(v);
  }
  return principal_.tenant.empty() ? "r:" + id_ : "t:" + principal_.tenant;
}

// The attempt's outcome for its version (canary judgement, metrics); once per attempt.
void ProxyRequest::RecordOutcome(bool ok) {
  if (!replica_ || outcome_recorded_for_ == attempt_id_) return;
  outcome_recorded_for_ = attempt_id_;
  GatewayMetrics& m = gw_->metrics();
  m.version_attempts.With({pool_->name(), replica_->version(), ok ? "ok" : "error"}).Inc();
  if (ok) {
    m.version_seconds.With({pool_->name(), replica_->version()})
        .Inc(std::chrono::duration<double>(Clock::now() - attempt_start_).count());
  }
  Canary& c = *pool_->canary;
  if (!c.enabled()) return;
  if (c.Record(replica_->version() == c.version(), ok, Clock::now())) {
    m.canary_rollbacks.With({pool_->name()}).Inc();
    m.canary_weight.With({pool_->name()}).Set(0);
    gw_->CanaryRolledBack(*pool_);
    const Canary::Rates r = c.Window(Clock::now());
    spdlog::warn("gateway: pool {}: canary {} rolled back (weight 0): {} of {} attempts failed vs {} of {} on the "
                 "stable version, margin {}",
                 pool_->name(), c.version(), r.canary_errors, r.canary_attempts, r.stable_errors, r.stable_attempts,
                 pool_->config.canary_max_error_rate_margin);
  }
}

void ProxyRequest::ObserveFirstToken(double seconds) {
  gw_->metrics().upstream_first_byte.With({pool_->name()}).Observe(seconds);
  gw_->metrics().version_first_token.With({pool_->name(), replica_->version()}).Observe(seconds);
}

void StartProxy(ProxyHost* gw, std::shared_ptr<http::Exchange> ex, const api::ApiRoute& route, Principal principal,
                std::string request_id) {
  gw->RequestStarted();
  gw->metrics().in_flight.Inc();
  auto p = std::make_shared<ProxyRequest>(gw, ex, route, std::move(principal), request_id);
  if (!gw->prep().TrySubmit([p] { p->Prepare(); })) {
    gw->metrics().in_flight.Dec();
    gw->RequestEnded();
    ReplyGatewayError(gw, ex, GatewayOverloaded(), request_id, nullptr, &route.route);
  }
}

}  // namespace kvs::gateway
