#include "gateway/proxy.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "http/sse.h"
#include "http/sse_parser.h"
#include "api/error.h"

namespace kvs::gateway {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr auto kSsePing = std::chrono::seconds(15);
constexpr size_t kMaxHeldEvents = 64;              // token-less events held before the first token
constexpr size_t kMaxUpstreamBody = size_t{64} << 20;  // non-streaming response bodies

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
std::chrono::milliseconds ToMs(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}

// Does a stream event carry a token (or the end)? The chat role delta and
// empty deltas do not.
bool CarriesToken(const json& j) {
  if (!j.is_object()) return true;
  if (j.contains("usage") && j["usage"].is_object()) return true;
  auto it = j.find("choices");
  if (it == j.end() || !it->is_array()) return true;
  for (const auto& c : *it) {
    if (!c.is_object()) return true;
    if (c.contains("finish_reason") && !c["finish_reason"].is_null()) return true;
    if (c.contains("text") && c["text"].is_string() && !c["text"].get<std::string>().empty()) return true;
    if (c.contains("delta") && c["delta"].is_object()) {
      const json& d = c["delta"];
      if (d.contains("content") && d["content"].is_string() && !d["content"].get<std::string>().empty()) return true;
      if (d.contains("tool_calls") || d.contains("reasoning_content")) return true;
    }
  }
  return false;
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
      const std::string param = req.max_tokens ? req.max_tokens_param : (chat ? "messages" : "prompt");
      api::ApiError e = api::BadRequest(
          req.max_tokens ? fmt::format("this request needs {} tokens ({} in the prompt + {} max_tokens) but the longest "
                                       "context served here is {} tokens; shorten the prompt or lower {}",
                                       prompt + wanted, prompt, wanted, largest, req.max_tokens_param)
                         : fmt::format("the prompt is {} tokens but the longest context served here is {} tokens, "
                                       "which must also hold at least one generated token; shorten the prompt",
                                       prompt, largest),
          prompt < largest && req.max_tokens ? param : (chat ? "messages" : "prompt"), "context_length_exceeded");
      e.extra["prompt_tokens"] = prompt;
      e.extra["max_tokens"] = wanted;
      e.extra["max_context_length"] = largest;
      return e;
    }
    const int64_t sequences = static_cast<int64_t>(counted_.prompts.size()) * req.n;
    reserved_ = counted_.total_prompt_tokens + sequences * max_tokens_;
    route_.prompt_tokens = prompt;
    route_.cost = reserved_;
    route_.tenant = principal_.tenant;
    route_.prompt_ids = &counted_.prompts;
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
    std::string list;
    for (const auto& m : served) list += (list.empty() ? "'" : ", '") + m + "'";
    api::ApiError e = api::MakeError(404, fmt::format("the model '{}' does not exist; this gateway serves {}",
                                                    counted_.req.model, list),
                                   "invalid_request_error", "model_not_found");
    e.param = "model";
    return e;
  }

  api::ApiError LimitError(const AdmitResult& r) {
    gw_->metrics().rate_limited.With({principal_.tenant, LimitReasonName(r.reason)}).Inc();
    gw_->metrics().rate_limited_tokens.With({principal_.tenant}).Inc(static_cast<double>(reserved_));
    const TenantLimits& l = principal_.limits;
    const std::string who = fmt::format("tenant '{}'", principal_.tenant);
    std::string msg;
    switch (r.reason) {
      case LimitReason::kGlobalRequests:
        msg = fmt::format("the gateway is at its request rate limit ({} requests/s for all tenants)",
                          gw_->config().gateway.rate_limit_per_second);
        break;
      case LimitReason::kRequests:
        msg = fmt::format("rate limit reached for {} on requests per second: limit {}", who, l.requests_per_second);
        break;
      case LimitReason::kConcurrency:
        msg = fmt::format("rate limit reached for {} on concurrent requests: limit {}", who, l.max_concurrent);
        break;
      case LimitReason::kTokens:
        msg = fmt::format("rate limit reached for {} on tokens per minute: limit {}, used {}, requested {}", who,
                          l.tokens_per_minute, r.tokens_used, reserved_);
        break;
      case LimitReason::kTooLarge:
        msg = fmt::format("request too large for {} on tokens per minute: limit {}, requested {} (prompt + "
                          "max_tokens); reduce the prompt or max_tokens",
                          who, l.tokens_per_minute, reserved_);
        break;
      case LimitReason::kUnavailable:
        return api::MakeError(503, "the rate-limit store is unavailable; retry shortly", "service_unavailable",
                         "rate_limit_store_unavailable");
      case LimitReason::kNone: break;
    }
    api::ApiError e = api::MakeError(429, msg, "rate_limit_error",
                                   r.reason == LimitReason::kTooLarge ? "request_too_large" : "rate_limit_exceeded");
    e.extra["limit"] = LimitReasonName(r.reason);
    if (r.reason != LimitReason::kTooLarge) {
      e.retry_after_seconds = std::max(1, static_cast<int>(std::ceil(r.retry_after_seconds)));
      e.message += fmt::format(". Please try again in {:.1f}s.", std::max(r.retry_after_seconds, 0.1));
    }
    error_note_ = fmt::format("rate_limited:{}", LimitReasonName(r.reason));
    return e;
  }

  std::optional<api::ApiError> BuildUpstreamBody() {
    const bool rewrite = stream_ || inject_max_tokens_;
    if (!rewrite) {
      upstream_body_ = ex_->request().body;
      return std::nullopt;
    }
    // The client's body, parsed once (in its key order), is edited in place.
    api::Json& j = body_;
    if (inject_max_tokens_) j["max_tokens"] = max_tokens_;
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

  void StartAttempt() {
    if (finished_) return;
    Replica* pick = nullptr;
    for (Pool* p : pools_) {
      pick = gw_->router().policy().Pick(*p, route_, tried_);
      if (pick) {
        pool_ = p;
        break;
      }
    }
    if (!pick) {
      if (attempts_ == 0) {
        api::ApiError e = api::MakeError(503, "no replica is available for this request; retry shortly",
                                       "service_unavailable", "no_replica_available");
        e.retry_after_seconds = 1;
        return FinishWithError(e);
      }
      return GiveUp();
    }
    if (attempts_ > 0) {
      ++retries_;
      gw_->metrics().retries.With({pool_->name()}).Inc();
    }
    ++attempts_;
    replica_ = pick;
    tried_.push_back(pick);
    replica_->AddOutstanding(reserved_, 1);
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
    req.headers = {{"Content-Type", "application/json"}, {"X-Request-Id", id_}};
    if (!pc.api_key.empty()) req.headers.emplace_back("Authorization", "Bearer " + pc.api_key);
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
      if (upstream_body_in_.size() + d.size() <= kMaxUpstreamBody) upstream_body_in_ += d;
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
        usage_prompt_ = j["usage"].value("prompt_tokens", int64_t{0});
        usage_completion_ = j["usage"].value("completion_tokens", int64_t{0});
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

  // With include_usage forced on, every chunk carries "usage":null; a client
  // that did not ask gets the chunks without it. Inside JSON strings quotes
  // are escaped, so this exact text only appears as the member itself.
  static void StripNullUsage(std::string* data) {
    static constexpr std::string_view kMember = ",\"usage\":null";
    if (size_t p = data->find(kMember); p != std::string::npos) data->erase(p, kMember.size());
  }

  // The first byte goes to the client: from now on failures are in-band.
  void Commit() {
    if (committed_) return;
    committed_ = true;
    ttft_ = Clock::now();
    gw_->metrics().upstream_first_byte.With({pool_->name()}).Observe(
        std::chrono::duration<double>(*ttft_ - attempt_start_).count());
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
      if (j.is_object() && j.contains("usage") && j["usage"].is_object()) {
        usage_prompt_ = j["usage"].value("prompt_tokens", int64_t{0});
        usage_completion_ = j["usage"].value("completion_tokens", int64_t{0});
      }
      ttft_ = Clock::now();
      gw_->metrics().upstream_first_byte.With({pool_->name()}).Observe(
          std::chrono::duration<double>(*ttft_ - attempt_start_).count());
    }
    // Passed through as the replica answered (4xx errors are the same on
    // every replica: no retry).
    http::HttpResponse res;
    res.status = s;
    res.SetHeader("Content-Type", upstream_content_type_.empty() ? "application/json" : upstream_content_type_);
    res.SetHeader("X-Request-Id", id_);
    res.body = std::move(upstream_body_in_);
    ex_->Respond(std::move(res));
    Finish(s);
  }

  // kind: a metric label. passive: counts toward ejecting the replica.
  void AttemptFailed(const std::string& kind, const std::string& message, bool passive) {
    call_.Cancel();
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
    if (committed_) {
      gw_->metrics().stream_errors.Inc();
      api::ApiError e = api::MakeError(502, "the upstream replica failed mid-stream: " + message, "upstream_error",
                                     "upstream_failed");
      ex_->Write(http::SseEvent("error", api::Dump(e.ToJson())));
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
      http::HttpResponse res;
      res.status = upstream_status_;
      res.SetHeader("Content-Type", upstream_content_type_.empty() ? "application/json" : upstream_content_type_);
      res.SetHeader("X-Request-Id", id_);
      res.body = std::move(upstream_body_in_);
      ex_->Respond(std::move(res));
      error_note_ = last_error_kind_;
      return Finish(upstream_status_);
    }
    const bool timeout = last_error_kind_.find("timeout") != std::string::npos || Clock::now() >= deadline_;
    api::ApiError e =
        timeout ? api::MakeError(504, fmt::format("the upstream replicas did not answer in time ({} attempts; last: {})",
                                             attempts_, last_error_),
                            "timeout_error", "upstream_timeout")
                : api::MakeError(502, fmt::format("the upstream replicas failed ({} attempts; last: {})", attempts_,
                                             last_error_),
                            "upstream_error", "upstream_failed");
    error_note_ = last_error_kind_;
    FinishWithError(e);
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
    replica_->AddOutstanding(-reserved_, -1);
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
    if (!ex_->ended() && ex_->streaming()) ex_->EndStream();
    ReleaseReplica();
    // Real usage: the replica's report, else what was seen (a failed stream:
    // the prompt and one token per event), else nothing (never reached one).
    int64_t prompt = 0, completion = 0;
    if (usage_prompt_ >= 0) {
      prompt = usage_prompt_;
      completion = usage_completion_;
    } else if (committed_ || (attempts_ > 0 && status == 499)) {
      prompt = counted_.total_prompt_tokens;
      completion = delta_events_;
    }
    if (admitted_) {
      const int64_t actual = prompt + completion;
      gw_->metrics().tokens_used.With({principal_.tenant, "prompt"}).Inc(static_cast<double>(prompt));
      gw_->metrics().tokens_used.With({principal_.tenant, "completion"}).Inc(static_cast<double>(completion));
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
    a.status = status;
    a.stream = stream_;
    a.prompt_tokens = prompt > 0 ? prompt : counted_.total_prompt_tokens;
    a.completion_tokens = completion;
    a.reserved_tokens = admitted_ ? reserved_ : 0;
    if (ttft_) a.ttft_ms = Ms(*ttft_ - ex_->received_at());
    a.duration_ms = Ms(Clock::now() - ex_->received_at());
    a.retries = retries_;
    a.error = error_note_;
    a.remote = ex_->remote();
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
  int64_t reserved_ = 0;
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

  bool committed_ = false;
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
    api::ApiError e = api::MakeError(503, "the gateway is overloaded (its request-preparation queue is full); retry shortly",
                                   "service_unavailable", "gateway_overloaded");
    e.retry_after_seconds = 1;
    ReplyGatewayError(gw, ex, e, request_id, nullptr);
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
  a.remote = ex->remote();
  gw->audit().Write(a);
}

}  // namespace kvs::gateway
