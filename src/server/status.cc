#include "server/status.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kvs::server {

using nlohmann::json;

StatusBoard::StatusBoard(ServerMetrics* metrics)
    : metrics_(metrics),
      frame_("kvserve serve", &metrics->process,
             {{"API requests/s", "rate"},
              {"API failed (5xx)/s", "rate"},
              {"API refused (4xx)/s", "rate"},
              {"TTFT p50", "seconds"},
              {"TTFT p95", "seconds"},
              {"Generated tokens/s", "rate"},
              {"KV watermark", "percent"},
              {"Queue (waiting)", "int"},
              {"Compute utilisation", "percent"}}) {}

void StatusBoard::Record(RecentRequest r) {
  std::lock_guard<std::mutex> lock(mu_);
  recent_.push_front(std::move(r));
  while (recent_.size() > kRecent) recent_.pop_back();
}

void StatusBoard::Sample() {
  const metrics::Histogram::Snapshot ttft = metrics_->ttft.Read();
  const double tokens = metrics_->generation_tokens.Value();
  const double forward = metrics_->forward_seconds.Value();
  const double kv = metrics_->kv_usage_ratio.Value();
  const double waiting = metrics_->requests_waiting.Value();
  // The API's requests by status class (/v1/ paths: not the probes).
  const double api = metrics::StatusFrame::StatusClassSum(metrics_->http_requests, '0', "/v1/");
  const double failed = metrics::StatusFrame::StatusClassSum(metrics_->http_requests, '5', "/v1/");
  const double refused = metrics::StatusFrame::StatusClassSum(metrics_->http_requests, '4', "/v1/");
  frame_.Sample([&](metrics::StatusFrame::Interval& in) {
    return std::vector<double>{in.Rate("api", api), in.Rate("failed", failed), in.Rate("refused", refused),
                               in.Quantile("ttft", 0.5, ttft), in.Quantile("ttft", 0.95, ttft),
                               in.Rate("tokens", tokens), kv, waiting, std::min(1.0, in.Rate("forward", forward))};
  });
}

json StatusBoard::ToJson(const StatusIdentity& id) {
  ServerMetrics& m = *metrics_;
  json j = frame_.Document(id.state, {
                                          {"Model", id.model_id.empty() ? "(loading)" : id.model_id},
                                          {"SHA-256", id.sha256.empty() ? "-" : id.sha256},
                                          {"File", id.model_path},
                                          {"Context", fmt::format("{} tokens", id.max_context_length)},
                                          {"KV block", fmt::format("{} tokens", m.kv_block_size.Value())},
                                      });
  const auto stat = &metrics::StatusFrame::Stat;
  json kv = stat("KV watermark", m.kv_usage_ratio.Value(), "percent", "kvserve:kv_cache_usage_ratio");
  kv["warn"] = 0.85;
  kv["crit"] = 0.90;
  json peak = stat("KV peak since start", m.kv_usage_peak_ratio.Value(), "percent", "kvserve:kv_cache_usage_peak_ratio");
  peak["warn"] = 0.85;
  peak["crit"] = 0.90;
  j["stats"] = json::array({
      kv,
      peak,
      stat("Queue (waiting)", m.requests_waiting.Value(), "int", "kvserve:num_requests_waiting"),
      stat("Running", m.requests_running.Value(), "int", "kvserve:num_requests_running"),
      stat("KV blocks used", m.kv_blocks_used.Value(), "int", "kvserve:kv_cache_blocks_used"),
      stat("KV blocks total", m.kv_blocks_total.Value(), "int", "kvserve:kv_cache_blocks"),
      stat("Prefix-cache hit ratio", m.prefix_hit_ratio.Value(), "percent", "kvserve:prefix_cache_hit_ratio"),
      stat("Generated tokens", m.generation_tokens.Value(), "int", "kvserve:generation_tokens_total"),
      stat("Preemptions", m.preemptions.Value(), "int", "kvserve:num_preemptions_total"),
      metrics::StatusFrame::StatusClassStat("API failed (5xx)", m.http_requests, "kvserve:http_requests_total", '5', "/v1/"),
      metrics::StatusFrame::StatusClassStat("API refused (4xx)", m.http_requests, "kvserve:http_requests_total", '4', "/v1/"),
      stat("Engine busy", m.forward_seconds.Value(), "seconds", "kvserve:engine_forward_seconds_total"),
  });
  json parts = json::array();
  for (const char* account : {"weights", "kv_pool", "activations", "overhead"}) {
    parts.push_back({{"label", account},
                     {"value", m.memory_bytes.With({account}).Value()},
                     {"metric", fmt::format("kvserve:memory_bytes{{account=\"{}\"}}", account)}});
  }
  j["breakdown"] = metrics::StatusFrame::Breakdown("Memory plan", "bytes", std::move(parts));
  std::lock_guard<std::mutex> lock(mu_);
  json rows = json::array();
  for (const RecentRequest& r : recent_) {
    rows.push_back(json::array({fmt::format("{:.3f}", r.time), r.id, r.path, r.status, r.prompt_tokens, r.cached_tokens,
                                r.completion_tokens, r.ttft_ms ? json(std::round(*r.ttft_ms * 10) / 10) : json(nullptr),
                                std::round(r.duration_ms * 10) / 10, r.finish_reason}));
  }
  j["table"] = metrics::StatusFrame::Table("Recent requests",
                                           {"ended (unix s)", "id", "path", "status", "prompt", "cached",
                                            "completion", "TTFT ms", "duration ms", "finish"},
                                           std::move(rows));
  return j;
}

}  // namespace kvs::server
