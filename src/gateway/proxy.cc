#include "gateway/proxy.h"

#include <algorithm>
#include <cmath>
#include <random>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/sse.h"
#include "http/sse_parser.h"
#include "api/error.h"
#include "gateway/proxy_errors.h"
#include "gateway/routing.h"
#include "gateway/sse_relay.h"

namespace kvs::gateway {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr auto kSsePing = std::chrono::seconds(15);
constexpr size_t kMaxHeldEvents = 64;              // token-less events held before the first token
constexpr size_t kUsageTailBytes = size_t{64} << 10;  // of a relayed body: where its "usage" is

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
std::chrono::milliseconds ToMs(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

class ProxyRequest : public std::enable_shared_from_this<ProxyRequest> {
 public:
  ProxyRequest(Gateway* gw, std::shared_ptr<http::Exchange> ex, api::Endpoint endpoint, Principal principal,
               std::string id)
      : gw_(gw), ex_(std::move(ex)), endpoint_(endpoint), principal_(std::move(principal)), id_(std::move(id)) {}

  // Prep thread.
  void Prepare() {
    if (auto e = api::ParseJsonObject(ex_->request().body, &body_)) return PostError(*e);
    if (auto e = gw_->counter().Count(endpoint_, body_, &counted_)) return PostError(*e);
    const api::ParsedRequest& req = counted_.req;
    stream_ = req.stream;
    client_wants_usage_ = req.include_usage;
    if (auto e = ChoosePools()) return PostError(*e);
    if (auto e = CheckModel()) return PostError(*e);

    AdmitRequest ar;
    ar.tenant = principal_.tenant;
    ar.limits = principal_.limits;
    ar.tokens = reserved_;
    ar.global_rps = gw_->config().gateway.rate_limit_per_second;
    ar.lease_id = id_;
    ar.lease_seconds = pools_.front()->config.total_timeout_seconds + 60;
    AdmitResult r = gw_->limiter().Admit(ar);
    if (!r.admitted) return PostError(LimitError(r));
    lease_ = r.lease;
    admitted_ = true;
    gw_->metrics().tokens_reserved.With({principal_.tenant}).Inc(static_cast<double>(reserved_));
    gw_->metrics().tenant_in_flight.With({principal_.tenant}).Inc();
    if (auto e = BuildUpstreamBody()) return PostError(*e);
    deadline_ = Clock::now() + ToMs(pools_.front()->config.total_timeout_seconds);
    auto self = shared_from_this();
    ex_->Post([self] { self->Begin(); });
  }

 private:
  // --- preparation ----------------------------------------------------------

  void PostError(const api::ApiError& e) {
    auto self = shared_from_this();
    ex_->Post([self, e] { self->FinishWithError(e); });
  }

  std::optional<api::ApiError> ChoosePools() {
    const api::ParsedRequest& req = counted_.req;
    const int64_t prompt = counted_.max_prompt_tokens;
    const Router& router = gw_->router();
    const int64_t largest = router.largest_context();
    const bool chat = endpoint_ == api::Endpoint::kChatCompletions;
    if (req.max_tokens) {
      max_tokens_ = *req.max_tokens;
    } else if (chat) {
      // The smallest pool whose default fits, else the largest room left.
      for (const auto& p : router.pools()) {
        if (prompt + p->config.default_max_tokens <= p->config.max_context) {
          max_tokens_ = p->config.default_max_tokens;
          break;
        }
      }
      if (max_tokens_ == 0 && prompt < largest) max_tokens_ = largest - prompt;
      inject_max_tokens_ = max_tokens_ > 0;
    } else {
      max_tokens_ = std::max<int64_t>(1, std::min<int64_t>(16, largest - prompt));  // the server's default
    }
    const int64_t wanted = std::max<int64_t>(max_tokens_, 1);
    pools_ = router.PoolsFor(prompt + wanted);
    if (pools_.empty()) {
      return ContextTooLong(chat, req.max_tokens ? req.max_tokens_param : "", prompt, wanted, largest);
    }
    const int64_t sequences = static_cast<int64_t>(counted_.prompts.size()) * req.n;
    reserved_ = counted_.total_prompt_tokens + sequences * max_tokens_;
    route_.prompt_tokens = prompt;
    route_.cost = reserved_;
    route_.tenant = principal_.tenant;
    route_.prompt_ids = &counted_.prompts;
    // The replica's prefix-cache namespace: the tenant's own unless the
    // deployment shares one (gateway.prefix_cache_scope). Routing hashes
    // blocks with the salt the replica will see.
    isolate_cache_ = gw_->config().gateway.prefix_cache_scope == "tenant";
    route_.cache_salt = isolate_cache_ ? TenantCacheSalt(principal_.tenant, req.cache_salt) : req.cache_salt;
    return std::nullopt;
  }

  std::optional<api::ApiError> CheckModel() {
    std::vector<std::string> served;
    for (Pool* p : pools_) {
      for (const auto& r : p->replicas) {
        for (auto& m : r->models()) {
          if (std::find(served.begin(), served.end(), m) == served.end()) served.push_back(std::move(m));
        }
      }
    }
    // Nothing known yet (no replica answered): the replica will judge.
    if (served.empty() || std::find(served.begin(), served.end(), counted_.req.model) != served.end()) {
      return std::nullopt;
    }
    return ModelNotFound(counted_.req.model, served);
  }

  api::ApiError LimitError(const AdmitResult& r) {
    gw_->metrics().rate_limited.With({principal_.tenant, LimitReasonName(r.reason)}).Inc();
    gw_->metrics().rate_limited_tokens.With({principal_.tenant}).Inc(static_cast<double>(reserved_));
    error_note_ = fmt::format("rate_limited:{}", LimitReasonName(r.reason));
    gw_->RememberRefusal(principal_.tenant, r);
    return RateLimited(r, principal_.limits, principal_.tenant, gw_->config().gateway.rate_limit_per_second, reserved_);
  }

  std::optional<api::ApiError> BuildUpstreamBody() {
    // The tenant's priority class bounds the request's (lower runs first).
    const int64_t tenant_priority = principal_.limits.priority;
    const bool raise_priority = tenant_priority > counted_.req.priority;
    const bool rewrite = stream_ || inject_max_tokens_ || raise_priority || isolate_cache_;
    if (!rewrite) {
      upstream_body_ = ex_->request().body;
      return std::nullopt;
    }
    // The client's body, parsed once (in its key order), is edited in place.
    api::Json& j = body_;
    if (inject_max_tokens_) j["max_tokens"] = max_tokens_;
    if (raise_priority) j["priority"] = tenant_priority;
    if (isolate_cache_) j["cache_salt"] = route_.cache_salt;
    if (stream_) {
      if (!j.contains("stream_options") || !j["stream_options"].is_object()) {
        j["stream_options"] = nlohmann::ordered_json::object();
      }
      j["stream_options"]["include_usage"] = true;
    }
    upstream_body_ = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    return std::nullopt;
  }

  // --- attempts (strand) ------------------------------------------------------

  void Begin() {
    ex_->SetCloseHandler([self = shared_from_this()] { self->OnClientGone(); });
    if (ex_->client_closed()) return OnClientGone();
    StartAttempt();
  }

  // Every pool the request fits is at max_requests_per_replica (or others
  // wait already, who come first): wait in the first pool's fair queue
  // (503 when it is full). True when the request waits or was answered.
  bool Enqueue() {
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
    ex_->SetDeadline(Clock::now() + ToMs(p->config.queue_timeout_seconds), [self] { self->OnQueueTimeout(); });
    return true;
  }

  // Its turn in the fair queue (strand).
  void OnTurn() {
    if (dequeued_) {  // it timed out or left meanwhile: the turn goes to the next
      queue_pool_->queue->PopAndResume();
      return;
    }
    dequeued_ = true;
    gw_->metrics().queued_requests.With({queue_pool_->name()}).Dec();
    StartAttempt();
  }

  void OnQueueTimeout() {
    if (finished_ || dequeued_) return;
    queue_cancel_->store(true);
    dequeued_ = true;
    gw_->metrics().queued_requests.With({queue_pool_->name()}).Dec();
    gw_->metrics().queue_timeouts.With({queue_pool_->name()}).Inc();
    FinishWithError(QueueTimeout(queue_pool_->name(), queue_pool_->config.queue_timeout_seconds));
  }

  void StartAttempt() {
    if (finished_) return;
    if (Enqueue()) return;
    Replica* pick = nullptr;
    std::unique_lock<std::mutex> route_lock;  // pick and reserve as one step (Pool::route_mu)
    for (Pool* p : pools_) {
      route_lock = std::unique_lock<std::mutex>(p->route_mu);
      route_.prediction = RoutePrediction{};
      // Canary pools: the sticky key's version, else (none of it available) any.
      route_.version_filter = p->canary->enabled() ? (p->canary->ForCanary(StickyKey(*p)) ? 1 : -1) : 0;
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
    req.timeouts.connect = std::min(ToMs(pc.connect_timeout_seconds), remaining);
    req.timeouts.total = remaining;
    // Streams: no first token in time is a failed attempt (retried while
    // nothing reached the client). Non-streaming answers come whole, at the
    // end: only the total limit applies.
    if (stream_) {
      ex_->SetDeadline(std::min(deadline_, attempt_start_ + ToMs(pc.first_token_timeout_seconds)),
                       [self = shared_from_this(), attempt] { self->OnDeadline(attempt); });
    } else {
      ex_->SetDeadline(deadline_, [self = shared_from_this(), attempt] { self->OnDeadline(attempt); });
    }
    auto self = shared_from_this();
    if (replica_->fault_rate() > 0 && std::uniform_real_distribution<double>(0, 1)(Rng()) < replica_->fault_rate()) {
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

  void ResetAttemptState() {
    upstream_status_ = 0;
    upstream_sse_ = false;
    upstream_body_in_.clear();
    upstream_content_type_.clear();
    held_.clear();
    sse_ = http::SseParser();
    delta_events_ = 0;
    usage_prompt_ = -1;
    usage_completion_ = -1;
    usage_cached_.reset();
  }

  void OnHead(uint64_t attempt, const http::ClientResponseHead& h) {
    if (attempt != attempt_id_ || finished_) return;
    upstream_status_ = h.status;
    upstream_content_type_ = std::string(h.Header("Content-Type"));
    upstream_sse_ = h.status == 200 && upstream_content_type_.find("text/event-stream") != std::string::npos;
    if (!stream_ || !upstream_sse_) return;
    gw_->metrics().upstream_first_byte.With({pool_->name()});  // created; observed at the first token
  }

  void OnData(uint64_t attempt, const std::string& d) {
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

  void OnEvent(http::SseMessage m) {
    if (finished_) return;
    if (m.event.empty() && m.data == "[DONE]") {
      if (!committed_) Commit();
      ex_->Write(std::string(http::kSseDone));
      return;
    }
    if (!m.event.empty()) {  // e.g. the replica's own in-band error
      if (!committed_) Commit();
      ex_->Write(http::SseEvent(m.event, m.data));
      return;
    }
    const bool has_usage = m.data.find("\"usage\":{") != std::string::npos;
    if (!committed_ || has_usage) {
      json j = json::parse(m.data, nullptr, false);
      if (has_usage && j.is_object() && j["usage"].is_object()) {
        ReadUsage(j["usage"]);
        const bool usage_only = j.contains("choices") && j["choices"].is_array() && j["choices"].empty();
        if (!client_wants_usage_) {
          if (usage_only) return;  // the client did not ask for it
          j.erase("usage");
          m.data = api::Dump(j);
        }
      }
      if (!committed_) {
        if (!CarriesToken(j)) {
          held_.push_back(std::move(m.data));
          if (held_.size() > kMaxHeldEvents) Commit();
          return;
        }
        Commit();
      }
    }
    ++delta_events_;
    if (!client_wants_usage_) StripNullUsage(&m.data);
    ex_->Write(http::SseData(m.data));
  }

  std::string StickyKey(const Pool& p) const {
    if (!p.config.sticky_header.empty()) {
      std::string_view v = ex_->request().Header(p.config.sticky_header);
      if (!v.empty()) return "h:" + std::string(v);
    }
    return principal_.tenant.empty() ? "r:" + id_ : "t:" + principal_.tenant;
  }

  static std::mt19937_64& Rng() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    return rng;
  }

  // The attempt's outcome for its version (canary judgement, metrics); once per attempt.
  void RecordOutcome(bool ok) {
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
      const Canary::Rates r = c.Window(Clock::now());
      spdlog::warn("gateway: pool {}: canary {} rolled back (weight 0): {} of {} attempts failed vs {} of {} on the "
                   "stable version, margin {}",
                   pool_->name(), c.version(), r.canary_errors, r.canary_attempts, r.stable_errors, r.stable_attempts,
                   pool_->config.canary_max_error_rate_margin);
    }
  }

  void ObserveFirstToken(double seconds) {
    gw_->metrics().upstream_first_byte.With({pool_->name()}).Observe(seconds);
    gw_->metrics().version_first_token.With({pool_->name(), replica_->version()}).Observe(seconds);
  }

  void ReadUsage(const json& u) {
    usage_prompt_ = u.value("prompt_tokens", int64_t{0});
    usage_completion_ = u.value("completion_tokens", int64_t{0});
    auto d = u.find("prompt_tokens_details");
    if (d != u.end() && d->is_object() && d->contains("cached_tokens") && (*d)["cached_tokens"].is_number_integer()) {
      usage_cached_ = (*d)["cached_tokens"].get<int64_t>();
    }
  }

  // Predicted vs reported prefix-cache hits (cache_aware pools).
  void CountPrefixHits(AuditRecord* a) {
    a->cached_tokens = usage_cached_;
    if (!route_.prediction.made || !pool_ || usage_prompt_ < 0) return;
    const RoutePrediction& p = route_.prediction;
    a->predicted_cached_tokens = p.cached_tokens;
    GatewayMetrics& m = gw_->metrics();
    const std::string& pool = pool_->name();
    m.prefix_prompt_tokens.With({pool}).Inc(static_cast<double>(usage_prompt_));
    if (p.cached_tokens > 0) {
      m.prefix_predicted_tokens.With({pool, p.source == PrefixIndex::Source::kRouted ? "routed" : "replica"})
          .Inc(static_cast<double>(p.cached_tokens));
    }
    if (p.best_cached_tokens > p.cached_tokens) {
      m.prefix_routed_away_tokens.With({pool}).Inc(static_cast<double>(p.best_cached_tokens - p.cached_tokens));
    }
    if (!usage_cached_) return;
    m.prefix_cached_tokens.With({pool, replica_->name()}).Inc(static_cast<double>(*usage_cached_));
    // The replica caches whole blocks: a difference under one block is not a misprediction.
    const int64_t bs = std::max(replica_->prefix_index().block_size(), 1);
    if (*usage_cached_ + bs <= p.cached_tokens) m.prefix_mispredictions.With({pool, "stale_index"}).Inc();
    if (*usage_cached_ >= p.cached_tokens + bs) m.prefix_mispredictions.With({pool, "unpredicted"}).Inc();
  }

  // The first byte goes to the client: from now on failures are in-band.
  void Commit() {
    if (committed_) return;
    committed_ = true;
    ttft_ = Clock::now();
    ObserveFirstToken(std::chrono::duration<double>(*ttft_ - attempt_start_).count());
    ex_->SetDeadline(deadline_, [self = shared_from_this(), attempt = attempt_id_] { self->OnDeadline(attempt); });
    http::HttpResponse h;
    h.SetHeader("Content-Type", "text/event-stream");
    h.SetHeader("Cache-Control", "no-cache");
    h.SetHeader("X-Request-Id", id_);
    h.SetHeader("X-Accel-Buffering", "no");
    ex_->StartStream(std::move(h), kSsePing, http::SseComment("keep-alive"));
    for (std::string& d : held_) {
      if (!client_wants_usage_) StripNullUsage(&d);
      ex_->Write(http::SseData(d));
    }
    held_.clear();
  }

  void OnDone(uint64_t attempt, const http::ClientResult& r) {
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
    replica_->OnSuccess();
    if (s == 200) {
      json j = json::parse(upstream_body_in_, nullptr, false);
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
  // kUsageTailBytes are kept to read the usage from.
  void StartRelay() {
    relaying_ = true;
    committed_ = true;  // bytes reached the client: no retry
    http::HttpResponse h;
    h.status = upstream_status_;
    h.SetHeader("Content-Type", upstream_content_type_.empty() ? "application/json" : upstream_content_type_);
    h.SetHeader("X-Request-Id", id_);
    ex_->StartStream(std::move(h));
    std::string head = std::move(upstream_body_in_);
    upstream_body_in_.clear();
    RelayBody(head);
  }

  void RelayBody(std::string_view d) {
    ex_->Write(std::string(d));
    upstream_body_in_ += d;
    if (upstream_body_in_.size() > 2 * kUsageTailBytes) upstream_body_in_.erase(0, upstream_body_in_.size() - kUsageTailBytes);
  }

  // The "usage" object of a relayed answer, from the last one in its tail.
  void ReadUsageFromTail() {
    const size_t at = upstream_body_in_.rfind("\"usage\":");
    if (at == std::string::npos) return;
    const size_t open = upstream_body_in_.find('{', at);
    if (open == std::string::npos) return;
    int depth = 0;
    for (size_t i = open; i < upstream_body_in_.size(); ++i) {
      const char c = upstream_body_in_[i];
      if (c == '{') ++depth;
      if (c == '}' && --depth == 0) {
        json u = json::parse(std::string_view(upstream_body_in_).substr(open, i - open + 1), nullptr, false);
        if (u.is_object()) ReadUsage(u);
        return;
      }
    }
  }

  // Answers the client with the replica's body as it came (and its content type).
  void RespondWithUpstreamBody(int status) {
    http::HttpResponse res;
    res.status = status;
    res.SetHeader("Content-Type", upstream_content_type_.empty() ? "application/json" : upstream_content_type_);
    res.SetHeader("X-Request-Id", id_);
    res.body = std::move(upstream_body_in_);
    ex_->Respond(std::move(res));
  }

  // kind: a metric label. passive: counts toward ejecting the replica.
  void AttemptFailed(const std::string& kind, const std::string& message, bool passive) {
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
      ex_->Write(http::SseEvent("error", api::Dump(UpstreamFailedMidStream(message).ToJson())));
      ex_->Write(std::string(http::kSseDone));
      error_note_ = "stream failed: " + kind;
      return Finish(200);
    }
    const bool time_left = Clock::now() < deadline_;
    if (time_left && attempts_ <= pool_->config.max_retries && !ex_->client_closed()) return StartAttempt();
    GiveUp();
  }

  void GiveUp() {
    // The replica's own error answer, when there was one.
    if (upstream_status_ >= 400 && !upstream_body_in_.empty()) {
      RespondWithUpstreamBody(upstream_status_);
      error_note_ = last_error_kind_;
      return Finish(upstream_status_);
    }
    const bool timeout = last_error_kind_.find("timeout") != std::string::npos || Clock::now() >= deadline_;
    error_note_ = last_error_kind_;
    FinishWithError(UpstreamFailed(timeout, attempts_, last_error_));
  }

  void OnDeadline(uint64_t attempt) {
    if (attempt != attempt_id_ || finished_) return;
    const bool total = Clock::now() >= deadline_ - std::chrono::milliseconds(1);
    if (!replica_) return GiveUp();
    AttemptFailed(total ? "total_timeout" : "first_token_timeout",
                  fmt::format("no {} from {} within {} s", total ? "complete response" : "first token", replica_->name(),
                              total ? pools_.front()->config.total_timeout_seconds
                                    : pool_->config.first_token_timeout_seconds),
                  true);
  }

  void OnClientGone() {
    if (finished_) return;
    gw_->metrics().client_disconnects.Inc();
    call_.Cancel();
    ReleaseReplica();
    error_note_ = "client disconnected";
    Finish(499);
  }

  void ReleaseReplica() {
    if (!replica_ || replica_released_for_ == attempt_id_) return;
    replica_released_for_ = attempt_id_;
    replica_->AddOutstanding(-outstanding_, -1);
    pool_->queue->PopAndResume();  // the freed slot goes to the next in fair order
    gw_->metrics().replica_outstanding_tokens.With({pool_->name(), replica_->name()}).Set(
        static_cast<double>(replica_->outstanding_tokens()));
  }

  // --- the end ----------------------------------------------------------------

  void FinishWithError(const api::ApiError& e) {
    if (finished_) return;
    if (!ex_->ended() && !ex_->streaming()) {
      http::HttpResponse res;
      res.status = e.status;
      res.SetHeader("Content-Type", "application/json");
      res.SetHeader("X-Request-Id", id_);
      if (e.retry_after_seconds) res.SetHeader("Retry-After", std::to_string(*e.retry_after_seconds));
      res.body = api::Dump(e.ToJson());
      ex_->Respond(std::move(res));
    }
    if (error_note_.empty()) error_note_ = e.code;
    Finish(e.status);
  }

  void Finish(int status) {
    if (finished_) return;
    finished_ = true;
    if (queue_cancel_ && !dequeued_) {  // left while waiting (client gone)
      dequeued_ = true;
      queue_cancel_->store(true);
      gw_->metrics().queued_requests.With({queue_pool_->name()}).Dec();
    }
    if (!ex_->ended() && ex_->streaming()) ex_->EndStream();
    if (status != 499) RecordOutcome(status < 500);
    ReleaseReplica();
    // Real usage: the replica's report, else what was seen (a failed stream:
    // the prompt and one token per event), else nothing (never reached one).
    // A non-streaming answer whose client left (or whose relay failed) did
    // not report its usage: the replica generated until it saw the cancel,
    // so the reservation is charged (never less than what was generated).
    int64_t prompt = 0, completion = 0;
    if (usage_prompt_ >= 0) {
      prompt = usage_prompt_;
      completion = usage_completion_;
    } else if (!stream_ && attempts_ > 0 && (status == 499 || relaying_)) {
      prompt = counted_.total_prompt_tokens;
      completion = std::max<int64_t>(reserved_ - prompt, 0);
      error_note_ += error_note_.empty() ? "usage unknown: charged as reserved" : "; usage unknown: charged as reserved";
    } else if (committed_ || (attempts_ > 0 && status == 499)) {
      prompt = counted_.total_prompt_tokens;
      completion = delta_events_;
    }
    if (admitted_) {
      const int64_t actual = prompt + completion;
      gw_->metrics().tokens_used.With({principal_.tenant, "prompt"}).Inc(static_cast<double>(prompt));
      gw_->metrics().tokens_used.With({principal_.tenant, "completion"}).Inc(static_cast<double>(completion));
      if (replica_ && pool_) {
        gw_->metrics().version_completion_tokens.With({pool_->name(), replica_->version()}).Inc(static_cast<double>(completion));
      }
      gw_->metrics().tenant_in_flight.With({principal_.tenant}).Dec();
      Gateway* gw = gw_;
      Lease lease = lease_;
      gw_->prep().Post([gw, lease, actual] { gw->limiter().Release(lease, actual); });
    }
    const std::string pool = pool_ ? pool_->name() : "";
    const std::string replica = replica_ ? replica_->name() : "";
    gw_->metrics().requests.With({principal_.tenant, pool, replica, std::to_string(status)}).Inc();
    AuditRecord a;
    a.id = id_;
    a.key_id = principal_.key_id;
    a.tenant = principal_.tenant;
    a.method = ex_->request().method;
    a.path = ex_->request().path;
    a.pool = pool;
    a.replica = replica;
    a.version = replica_ ? replica_->version() : "";
    a.status = status;
    a.stream = stream_;
    a.prompt_tokens = prompt > 0 ? prompt : counted_.total_prompt_tokens;
    a.completion_tokens = completion;
    a.reserved_tokens = admitted_ ? reserved_ : 0;
    if (ttft_) a.ttft_ms = Ms(*ttft_ - ex_->received_at());
    a.duration_ms = Ms(Clock::now() - ex_->received_at());
    a.retries = retries_;
    CountPrefixHits(&a);
    a.error = error_note_;
    a.remote = gw_->ClientAddress(*ex_);
    if (a.remote != ex_->remote()) a.peer = ex_->remote();
    if (gw_->config().logging.audit_prompts && !counted_.prompt_text.empty()) a.prompt = counted_.prompt_text;
    gw_->audit().Write(a);
    gw_->metrics().in_flight.Dec();
    gw_->RequestEnded();
  }

  Gateway* gw_;
  std::shared_ptr<http::Exchange> ex_;
  const api::Endpoint endpoint_;
  const Principal principal_;
  const std::string id_;

  api::Json body_;  // the client's body (prep thread; edited into the upstream body)
  CountedRequest counted_;
  RouteInput route_;
  std::vector<Pool*> pools_;
  int64_t max_tokens_ = 0;
  bool inject_max_tokens_ = false;
  bool isolate_cache_ = false;  // the tenant is folded into cache_salt (gateway.prefix_cache_scope: tenant)
  int64_t reserved_ = 0;
  int64_t outstanding_ = 0;  // added to replica_'s outstanding tokens for the current attempt
  bool stream_ = false;
  bool client_wants_usage_ = false;
  bool admitted_ = false;
  Lease lease_;
  std::string upstream_body_;
  Clock::time_point deadline_;

  Pool* pool_ = nullptr;
  Replica* replica_ = nullptr;
  std::vector<const Replica*> tried_;
  int attempts_ = 0;
  int retries_ = 0;
  uint64_t attempt_id_ = 0;
  uint64_t replica_released_for_ = 0;
  uint64_t outcome_recorded_for_ = 0;
  Pool* queue_pool_ = nullptr;       // the pool whose fair queue it waited in
  FairQueue::Cancel queue_cancel_;
  bool dequeued_ = false;            // its turn came (or it timed out): never queued again
  http::ClientCall call_{nullptr};
  Clock::time_point attempt_start_;

  int upstream_status_ = 0;
  bool upstream_sse_ = false;
  std::string upstream_content_type_;
  std::string upstream_body_in_;
  http::SseParser sse_;
  std::vector<std::string> held_;
  int64_t delta_events_ = 0;
  int64_t usage_prompt_ = -1;
  int64_t usage_completion_ = -1;
  std::optional<int64_t> usage_cached_;

  bool committed_ = false;
  bool relaying_ = false;  // a non-streaming answer too large to hold, relayed as it comes
  bool finished_ = false;
  std::optional<Clock::time_point> ttft_;
  std::string last_error_kind_;
  std::string last_error_;
  std::string error_note_;
};

}  // namespace

void StartProxy(Gateway* gw, std::shared_ptr<http::Exchange> ex, api::Endpoint endpoint, Principal principal,
                std::string request_id) {
  gw->RequestStarted();
  gw->metrics().in_flight.Inc();
  auto p = std::make_shared<ProxyRequest>(gw, ex, endpoint, std::move(principal), request_id);
  if (!gw->prep().TryPost([p] { p->Prepare(); })) {
    gw->metrics().in_flight.Dec();
    gw->RequestEnded();
    ReplyGatewayError(gw, ex, GatewayOverloaded(), request_id, nullptr);
  }
}

void ReplyGatewayError(Gateway* gw, const std::shared_ptr<http::Exchange>& ex, const api::ApiError& e,
                       const std::string& request_id, const Principal* principal) {
  http::HttpResponse res;
  res.status = e.status;
  res.SetHeader("Content-Type", "application/json");
  res.SetHeader("X-Request-Id", request_id);
  if (e.retry_after_seconds) res.SetHeader("Retry-After", std::to_string(*e.retry_after_seconds));
  if (e.status == 401) res.SetHeader("WWW-Authenticate", "Bearer");
  res.body = api::Dump(e.ToJson());
  ex->Respond(std::move(res));
  const std::string tenant = principal ? principal->tenant : "";
  gw->metrics().requests.With({tenant, "", "", std::to_string(e.status)}).Inc();
  AuditRecord a;
  a.id = request_id;
  a.key_id = principal ? principal->key_id : "";
  a.tenant = tenant;
  a.method = ex->request().method;
  a.path = ex->request().path;
  a.status = e.status;
  a.duration_ms = Ms(Clock::now() - ex->received_at());
  a.error = e.code;
  a.remote = gw->ClientAddress(*ex);
  if (a.remote != ex->remote()) a.peer = ex->remote();
  gw->audit().Write(a);
}

}  // namespace kvs::gateway
