// ProxyRequest's end (proxy_request.h): the client's answer when the
// gateway refuses or gives up, the token charge corrected to the real usage,
// metrics and the audit line; and ReplyGatewayError (proxy.h).
#include <algorithm>

#include "gateway/proxy.h"
#include "gateway/proxy_request.h"

namespace kvs::gateway {

void ProxyRequest::FinishWithError(const api::ApiError& e) {
  if (finished_) return;
  if (!ex_->ended() && !ex_->streaming()) {
    http::HttpResponse res;
    res.status = e.status;
    res.SetHeader("Content-Type", "application/json");
    res.SetHeader("X-Request-Id", id_);
    if (e.retry_after_seconds) res.SetHeader("Retry-After", std::to_string(*e.retry_after_seconds));
    res.body = api::Dump(api::ErrorJson(dialect_, e));
    ex_->Respond(std::move(res));
  }
  if (error_note_.empty()) error_note_ = e.code;
  Finish(e.status);
}

void ProxyRequest::Finish(int status) {
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
  if (usage_.prompt >= 0) {
    prompt = usage_.prompt;
    completion = usage_.completion;
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
    ProxyHost* gw = gw_;
    Lease lease = lease_;
    gw_->prep().Submit([gw, lease, actual] { gw->limiter().Release(lease, actual); });
  }
  const std::string pool = pool_ ? pool_->name() : "";
  const std::string replica = replica_ ? replica_->name() : "";
  gw_->metrics()
      .requests.With({principal_.tenant, pool, replica, std::to_string(status), api::RouteLabel(&route_entry_.route)})
      .Inc();
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
  if (ttft_) a.ttft_ms = proxy_detail::Ms(*ttft_ - ex_->received_at());
  a.duration_ms = proxy_detail::Ms(Clock::now() - ex_->received_at());
  a.retries = retries_;
  CountPrefixHits(&a);
  a.error = error_note_;
  a.truncated = truncation_note_;
  a.truncated_prompt_tokens = truncated_tokens_;
  a.remote = gw_->ClientAddress(*ex_);
  if (a.remote != ex_->remote()) a.peer = ex_->remote();
  if (gw_->config().logging.audit_prompts && !counted_.prompt_text.empty()) a.prompt = counted_.prompt_text;
  gw_->audit().Write(a);
  gw_->metrics().in_flight.Dec();
  gw_->RequestEnded();
}
void ReplyGatewayError(ProxyHost* gw, const std::shared_ptr<http::Exchange>& ex, const api::ApiError& e,
                       const std::string& request_id, const Principal* principal, const api::Route* route) {
  http::HttpResponse res;
  res.status = e.status;
  res.SetHeader("Content-Type", "application/json");
  res.SetHeader("X-Request-Id", request_id);
  for (auto& [name, value] : api::ErrorHeaders(e)) res.SetHeader(std::move(name), std::move(value));
  res.body = api::Dump(api::ErrorJson(api::ErrorDialect(ex->request().path), e));
  ex->Respond(std::move(res));
  const std::string tenant = principal ? principal->tenant : "";
  gw->metrics().requests.With({tenant, "", "", std::to_string(e.status), api::RouteLabel(route)}).Inc();
  AuditRecord a;
  a.id = request_id;
  a.key_id = principal ? principal->key_id : "";
  a.tenant = tenant;
  a.method = ex->request().method;
  a.path = ex->request().path;
  a.status = e.status;
  a.duration_ms = proxy_detail::Ms(proxy_detail::Clock::now() - ex->received_at());
  a.error = e.code;
  a.remote = gw->ClientAddress(*ex);
  if (a.remote != ex->remote()) a.peer = ex->remote();
  gw->audit().Write(a);
}

}  // namespace kvs::gateway
