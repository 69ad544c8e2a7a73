// ProxyRequest: one request of the public API through the gateway, from its
// preparation to its audit line (proxy.h starts it). Internal to the
// gateway; its methods are defined in proxy_prepare.cc (preparation),
// proxy.cc (attempts), proxy_stream.cc (relaying streams and usage) and
// proxy_finish.cc (the end).
//
//   Prepare (prep thread): parse + validate in the route's dialect, count
//     prompt tokens, choose the candidate pools by length, check the model,
//     admit against the limits, build the upstream body (the generation
//     budget -- max_tokens, or max_output_tokens on /v1/responses -- set to
//     the pool's default when the request has none, so the reservation
//     bounds what it can use; chat and completions streams get
//     stream_options.include_usage, so the real usage comes back, and the
//     usage is not passed on to a client that did not ask for it).
//     /tokenize and /detokenize are validated and admitted against the
//     request limits only (no tokens reserved), then forwarded as they are.
//   Attempts (exchange strand): the routing policy picks a replica among the
//     candidate pools' available ones not yet tried; the request goes out on
//     the pooled HTTP client. An attempt that fails before any byte reached
//     the client (connect error or timeout, no first token in time, 5xx or
//     429, the replica died) is retried on another replica, up to the pool's
//     max_retries. A stream's leading events that carry no token (sse_relay.h,
//     per dialect) are held back until its first token, so a replica dying
//     in prefill is still retried; once the client has bytes, a failure
//     becomes an in-band error event in the dialect's shape.
//   The client going away cancels the upstream call (the replica sees its
//     connection close, cancels the generation and frees its KV).
//   Finish (once): corrects the tenant's token charge with the real usage
//     (read in the dialect's shape), frees the concurrency slot and the
//     replica's outstanding tokens, counts metrics, writes the audit line.
// Errors the gateway answers itself take the route's dialect's shape
// (Anthropic's on /v1/messages).
// Thread-safety: after Prepare, everything runs on the exchange's strand;
// upstream callbacks are posted there.
#pragma once

#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/openai_request.h"
#include "api/routes.h"
#include "gateway/fair_queue.h"
#include "gateway/keys.h"
#include "gateway/proxy_host.h"
#include "gateway/sse_relay.h"
#include "http/http_client.h"
#include "http/http_server.h"
#include "http/sse_parser.h"

namespace kvs::gateway {

namespace proxy_detail {
using Clock = std::chrono::steady_clock;
inline constexpr size_t kMaxHeldEvents = 64;                 // token-less events held before the first token
inline constexpr size_t kUsageTailBytes = size_t{64} << 10;  // of a relayed body: where its "usage" is
inline double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
inline std::chrono::milliseconds ToMs(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000)));
}
}  // namespace proxy_detail

class ProxyRequest : public std::enable_shared_from_this<ProxyRequest> {
 public:
  using Clock = proxy_detail::Clock;

  ProxyRequest(ProxyHost* gw, std::shared_ptr<http::Exchange> ex, const api::ApiRoute& route, Principal principal,
               std::string id);

  // Prep thread.
  void Prepare();

 private:
  // --- preparation (proxy_prepare.cc) ----------------------------------------
  void PrepareGenerate();
  void PrepareTokenizer();
  // Admission against the tenant's limits (reserved_ tokens); false when refused (answered).
  bool Admit();
  void PostError(const api::ApiError& e);
  std::optional<api::ApiError> ChoosePools();
  std::optional<api::ApiError> ChoosePoolsFitting();
  std::optional<api::ApiError> CheckModel(const std::string& model);
  api::ApiError LimitError(const AdmitResult& r);
  void BuildUpstreamBody();
  bool openai() const { return dialect_ == api::Dialect::kOpenAI; }

  // --- attempts (proxy.cc) ------------------------------------------------------
  void Begin();
  bool Enqueue();
  void OnTurn();
  void OnQueueTimeout();
  void StartAttempt();
  void ResetAttemptState();
  void OnHead(uint64_t attempt, const http::ClientResponseHead& h);
  void OnData(uint64_t attempt, const std::string& d);
  void OnDone(uint64_t attempt, const http::ClientResult& r);
  void StartRelay();
  void RelayBody(std::string_view d);
  void RespondWithUpstreamBody(int status);
  void AttemptFailed(const std::string& kind, const std::string& message, bool passive);
  void GiveUp();
  void OnDeadline(uint64_t attempt);
  void OnClientGone();
  void ReleaseReplica();
  std::string StickyKey(const Pool& p) const;
  void RecordOutcome(bool ok);
  void ObserveFirstToken(double seconds);

  // --- streams and usage (proxy_stream.cc) --------------------------------------
  void OnEvent(http::SseMessage m);
  void OnDialectEvent(http::SseMessage m);
  void Commit();
  void MarkTruncation(http::HttpResponse* res) const;
  void ReadUsage(const nlohmann::json& u);
  void ReadUsageFromTail();
  void CountPrefixHits(AuditRecord* a);

  // --- the end (proxy_finish.cc) --------------------------------------------------
  void FinishWithError(const api::ApiError& e);
  void Finish(int status);

  ProxyHost* gw_;
  std::shared_ptr<http::Exchange> ex_;
  const api::ApiRoute& route_entry_;
  const api::Endpoint endpoint_;
  const api::Dialect dialect_;
  const Principal principal_;
  const std::string id_;

  api::Json body_;  // the client's body (prep thread; edited into the upstream body)
  CountedRequest counted_;
  RouteInput route_;
  std::vector<Pool*> pools_;
  int64_t max_tokens_ = 0;
  bool inject_max_tokens_ = false;
  bool isolate_cache_ = false;  // the tenant is folded into cache_salt (gateway.prefix_cache_scope: tenant)
  int64_t cleaned_chars_ = 0;     // removed by the pool's clean_content
  int64_t truncated_tokens_ = 0;  // prompt tokens cut by the longest pool's on_overflow
  std::string truncation_note_;   // for the audit log
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
  Pool* queue_pool_ = nullptr;  // the pool whose fair queue it waited in
  FairQueue::Cancel queue_cancel_;
  bool dequeued_ = false;  // its turn came (or it timed out): never queued again
  http::ClientCall call_{nullptr};
  Clock::time_point attempt_start_;

  int upstream_status_ = 0;
  bool upstream_sse_ = false;
  std::string upstream_content_type_;
  std::string upstream_body_in_;
  http::SseParser sse_;
  std::vector<http::SseMessage> held_;  // token-less leading events, until the first token
  int64_t delta_events_ = 0;
  int64_t stream_events_ = 0;  // dialect events of this attempt (Responses: the next sequence_number)
  int64_t start_prompt_ = -1;  // Anthropic: message_start's input_tokens
  UsageReport usage_;          // the replica's report (prompt -1: none yet)

  bool committed_ = false;
  bool relaying_ = false;  // a non-streaming answer too large to hold, relayed as it comes
  bool finished_ = false;
  std::optional<Clock::time_point> ttft_;
  std::string last_error_kind_;
  std::string last_error_;
  std::string error_note_;
};

}  // namespace kvs::gateway
