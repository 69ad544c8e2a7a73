// ProxyRequest: relaying a replica's stream to the client, and the usage
// the replica reports (proxy_request.h; the dialects' events: sse_relay.h).
#include <algorithm>

#include "gateway/proxy_request.h"
#include "http/sse.h"
#include "http/sse_stream.h"

namespace kvs::gateway {

void ProxyRequest::OnEvent(http::SseMessage m) {
  if (finished_) return;
  if (!openai()) return OnDialectEvent(std::move(m));
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
    nlohmann::json j = nlohmann::json::parse(m.data, nullptr, false);
    if (has_usage && j.is_object() && j["usage"].is_object()) {
      ReadUsage(j["usage"]);
      if (truncated_tokens_ > 0) {
        j["usage"]["truncated_prompt_tokens"] = truncated_tokens_;
        m.data = api::Dump(j);
      }
      const bool usage_only = j.contains("choices") && j["choices"].is_array() && j["choices"].empty();
      if (!client_wants_usage_) {
        if (usage_only) return;  // the client did not ask for it
        j.erase("usage");
        m.data = api::Dump(j);
      }
    }
    if (!committed_) {
      if (!CarriesToken(j)) {
        held_.push_back(std::move(m));
        if (held_.size() > proxy_detail::kMaxHeldEvents) Commit();
        return;
      }
      Commit();
    }
  }
  ++delta_events_;
  if (!client_wants_usage_) StripNullUsage(&m.data);
  ex_->Write(http::SseData(m.data));
}

// A Responses or Anthropic stream: named events, passed on as they came;
// the opening ones are held until the first that carries a token, and the
// usage is read from the events that report it.
void ProxyRequest::OnDialectEvent(http::SseMessage m) {
  ++stream_events_;
  if (EventMayReportUsage(dialect_, m.event)) {
    nlohmann::json j = nlohmann::json::parse(m.data, nullptr, false);
    if (nlohmann::json* u = EventUsage(dialect_, m.event, j)) {
      if (truncated_tokens_ > 0 && u->is_object()) {
        (*u)["truncated_prompt_tokens"] = truncated_tokens_;
        m.data = api::Dump(j);
      }
      UsageReport r = gateway::ReadUsage(dialect_, *u);
      if (m.event == "message_start") {
        start_prompt_ = r.prompt;  // the prompt; what was generated comes with message_delta
      } else {
        if (r.prompt < 0) r.prompt = start_prompt_;  // a message_delta without input_tokens
        if (r.prompt >= 0) usage_ = r;
      }
    }
  }
  if (DialectEventIsDelta(dialect_, m.event)) ++delta_events_;
  if (!committed_ && !m.event.empty() && !DialectEventCarriesToken(dialect_, m.event)) {
    held_.push_back(std::move(m));
    if (held_.size() > proxy_detail::kMaxHeldEvents) Commit();
    return;
  }
  if (!committed_) Commit();
  ex_->Write(m.event.empty() ? http::SseData(m.data) : http::SseEvent(m.event, m.data));
}

// The first byte goes to the client: from now on failures are in-band.
void ProxyRequest::Commit() {
  if (committed_) return;
  committed_ = true;
  ttft_ = Clock::now();
  ObserveFirstToken(std::chrono::duration<double>(*ttft_ - attempt_start_).count());
  ex_->SetDeadline(deadline_, [self = shared_from_this(), attempt = attempt_id_] { self->OnDeadline(attempt); });
  http::HttpResponse head = http::SseResponseHead(id_);
  MarkTruncation(&head);
  ex_->StartStream(std::move(head), http::kSseKeepAlive, http::SseComment("keep-alive"));
  for (http::SseMessage& m : held_) {
    if (!m.event.empty()) {
      ex_->Write(http::SseEvent(m.event, m.data));
      continue;
    }
    if (!client_wants_usage_) StripNullUsage(&m.data);
    ex_->Write(http::SseData(m.data));
  }
  held_.clear();
}

// A prompt cut by the pool's on_overflow: the answer says so, and by how
// many tokens (also in usage.truncated_prompt_tokens).
void ProxyRequest::MarkTruncation(http::HttpResponse* res) const {
  if (truncated_tokens_ > 0) res->SetHeader("X-Kvserve-Truncated-Prompt-Tokens", std::to_string(truncated_tokens_));
}

void ProxyRequest::ReadUsage(const nlohmann::json& u) {
  const UsageReport r = gateway::ReadUsage(dialect_, u);
  if (r.prompt >= 0) usage_ = r;
}

// The "usage" object of a relayed answer, from the last one in its tail
// (every dialect's body ends with it).
void ProxyRequest::ReadUsageFromTail() {
  const size_t at = upstream_body_in_.rfind("\"usage\":");
  if (at == std::string::npos) return;
  const size_t open = upstream_body_in_.find('{', at);
  if (open == std::string::npos) return;
  int depth = 0;
  for (size_t i = open; i < upstream_body_in_.size(); ++i) {
    const char c = upstream_body_in_[i];
    if (c == '{') ++depth;
    if (c == '}' && --depth == 0) {
      nlohmann::json u =
          nlohmann::json::parse(std::string_view(upstream_body_in_).substr(open, i - open + 1), nullptr, false);
      if (u.is_object()) ReadUsage(u);
      return;
    }
  }
}

// Predicted vs reported prefix-cache hits (cache_aware pools).
void ProxyRequest::CountPrefixHits(AuditRecord* a) {
  a->cached_tokens = usage_.cached;
  if (!route_.prediction.made || !pool_ || usage_.prompt < 0) return;
  const RoutePrediction& p = route_.prediction;
  a->predicted_cached_tokens = p.cached_tokens;
  GatewayMetrics& m = gw_->metrics();
  const std::string& pool = pool_->name();
  m.prefix_prompt_tokens.With({pool}).Inc(static_cast<double>(usage_.prompt));
  if (p.source == PrefixIndex::Source::kRouted && p.cached_tokens > 0) {
    m.prefix_predicted_tokens.With({pool, "routed"}).Inc(static_cast<double>(p.cached_tokens));
  } else if (p.cached_tokens > 0) {
    if (p.cached_tokens > p.disk_tokens) {
      m.prefix_predicted_tokens.With({pool, "replica"}).Inc(static_cast<double>(p.cached_tokens - p.disk_tokens));
    }
    if (p.disk_tokens > 0) m.prefix_predicted_tokens.With({pool, "replica_disk"}).Inc(static_cast<double>(p.disk_tokens));
  }
  if (p.best_cached_tokens > p.cached_tokens) {
    m.prefix_routed_away_tokens.With({pool}).Inc(static_cast<double>(p.best_cached_tokens - p.cached_tokens));
  }
  if (!usage_.cached) return;
  m.prefix_cached_tokens.With({pool, replica_->name()}).Inc(static_cast<double>(*usage_.cached));
  // The replica caches whole blocks: a difference under one block is not a misprediction.
  const int64_t bs = std::max(replica_->prefix_index().block_size(), 1);
  if (*usage_.cached + bs <= p.cached_tokens) m.prefix_mispredictions.With({pool, "stale_index"}).Inc();
  if (*usage_.cached >= p.cached_tokens + bs) m.prefix_mispredictions.With({pool, "unpredicted"}).Inc();
}

}  // namespace kvs::gateway
