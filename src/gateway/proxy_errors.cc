#include "gateway/proxy_errors.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kvs::gateway {

namespace {
api::ApiError Unavailable(std::string message, std::string code) {
  api::ApiError e = api::MakeError(503, std::move(message), "service_unavailable", std::move(code));
  e.retry_after_seconds = 1;
  return e;
}
}  // namespace

api::ApiError ContextTooLong(const std::string& prompt_param, const std::string& max_tokens_param, int64_t prompt,
                             int64_t wanted, int64_t largest_context) {
  const bool has_max = !max_tokens_param.empty();
  api::ApiError e = api::BadRequest(
      has_max ? fmt::format("this request needs {} tokens ({} in the prompt + {} max_tokens) but the longest context "
                            "served here is {} tokens; shorten the prompt or lower {}",
                            prompt + wanted, prompt, wanted, largest_context, max_tokens_param)
              : fmt::format("the prompt is {} tokens but the longest context served here is {} tokens, which must "
                            "also hold at least one generated token; shorten the prompt",
                            prompt, largest_context),
      // The prompt alone fits: the generation budget is what to lower.
      prompt < largest_context && has_max ? max_tokens_param : prompt_param, "context_length_exceeded");
  e.extra["prompt_tokens"] = prompt;
  e.extra["max_tokens"] = wanted;
  e.extra["max_context_length"] = largest_context;
  return e;
}

api::ApiError ModelNotFound(const std::string& model, const std::vector<std::string>& served) {
  std::string list;
  for (const auto& m : served) list += (list.empty() ? "'" : ", '") + m + "'";
  api::ApiError e = api::MakeError(404, fmt::format("the model '{}' does not exist; this gateway serves {}", model, list),
                                   "invalid_request_error", "model_not_found");
  e.param = "model";
  return e;
}

api::ApiError RateLimited(const AdmitResult& r, const TenantLimits& l, const std::string& tenant,
                          double global_requests_per_second, int64_t reserved_tokens) {
  const std::string who = fmt::format("tenant '{}'", tenant);
  std::string msg;
  switch (r.reason) {
    case LimitReason::kGlobalRequests:
      msg = fmt::format("the gateway is at its request rate limit ({} requests/s for all tenants)",
                        global_requests_per_second);
      break;
    case LimitReason::kRequests:
      msg = fmt::format("rate limit reached for {} on requests per second: limit {}", who, l.requests_per_second);
      break;
    case LimitReason::kConcurrency:
      msg = fmt::format("rate limit reached for {} on concurrent requests: limit {}", who, l.max_concurrent);
      break;
    case LimitReason::kTokens:
      msg = fmt::format("rate limit reached for {} on tokens per minute: limit {}, used {}, requested {}", who,
                        l.tokens_per_minute, r.tokens_used, reserved_tokens);
      break;
    case LimitReason::kTooLarge:
      msg = fmt::format("request too large for {} on tokens per minute: limit {}, requested {} (prompt + "
                        "max_tokens); reduce the prompt or max_tokens",
                        who, l.tokens_per_minute, reserved_tokens);
      break;
    case LimitReason::kUnavailable:
      return api::MakeError(503, "the rate-limit store is unavailable; retry shortly", "service_unavailable",
                            "rate_limit_store_unavailable");
    case LimitReason::kNone: break;
  }
  const bool too_large = r.reason == LimitReason::kTooLarge;
  api::ApiError e =
      api::MakeError(429, msg, "rate_limit_error", too_large ? "request_too_large" : "rate_limit_exceeded");
  e.extra["limit"] = LimitReasonName(r.reason);
  if (!too_large) {  // a request over the whole per-minute budget never fits: no retry hint
    e.retry_after_seconds = std::max(1, static_cast<int>(std::ceil(r.retry_after_seconds)));
    e.message += fmt::format(". Please try again in {:.1f}s.", std::max(r.retry_after_seconds, 0.1));
  }
  return e;
}

api::ApiError QueueFull(const std::string& pool, int64_t max_queued) {
  return Unavailable(fmt::format("every replica of pool {} is busy and {} requests wait already "
                                 "(max_queued_requests); retry shortly",
                                 pool, max_queued),
                     "no_replica_available");
}

api::ApiError QueueTimeout(const std::string& pool, double seconds) {
  return Unavailable(fmt::format("every replica of pool {} stayed busy for {} s (queue_timeout_seconds); retry shortly",
                                 pool, seconds),
                     "queue_timeout");
}

api::ApiError NoReplica() {
  return Unavailable("no replica is available for this request; retry shortly", "no_replica_available");
}

api::ApiError UpstreamFailed(bool timeout, int attempts, const std::string& last_error) {
  if (timeout) {
    return api::MakeError(504,
                          fmt::format("the upstream replicas did not answer in time ({} attempts; last: {})", attempts,
                                      last_error),
                          "timeout_error", "upstream_timeout");
  }
  return api::MakeError(502, fmt::format("the upstream replicas failed ({} attempts; last: {})", attempts, last_error),
                        "upstream_error", "upstream_failed");
}

api::ApiError UpstreamFailedMidStream(const std::string& message) {
  return api::MakeError(502, "the upstream replica failed mid-stream: " + message, "upstream_error", "upstream_failed");
}

api::ApiError GatewayOverloaded() {
  return Unavailable("the gateway is overloaded (its request-preparation queue is full); retry shortly",
                     "gateway_overloaded");
}

}  // namespace kvs::gateway
