#include "server/status.h"

#include <fmt/format.h>

#include "metrics/process_metrics.h"
#include "metrics/status_page.h"

namespace kvs::server {

using nlohmann::json;

using kvs::metrics::NumberOrNull;

StatusBoard::StatusBoard(ServerMetrics* metrics) : metrics_(metrics), last_t_(kvs::metrics::UnixNowSeconds()) {}

void StatusBoard::Record(RecentRequest r) {
  std::lock_guard<std::mutex> lock(mu_);
  recent_.push_front(std::move(r));
  while (recent_.size() > kRecent) recent_.pop_back();
}

void StatusBoard::Sample() {
  const double now = kvs::metrics::UnixNowSeconds();
  const metrics::Histogram::Snapshot ttft = metrics_->ttft.Read();
  const double tokens = metrics_->generation_tokens.Value();
  const double forward = metrics_->forward_seconds.Value();
  std::lock_guard<std::mutex> lock(mu_);
  Point p;
  p.t = now;
  const double dt = last_t_ > 0 ? now - last_t_ : 0;
  p.ttft_p50 = metrics::HistogramQuantile(0.5, ttft, last_ttft_ ? &*last_ttft_ : nullptr);
  p.ttft_p95 = metrics::HistogramQuantile(0.95, ttft, last_ttft_ ? &*last_ttft_ : nullptr);
  p.tokens_per_second = dt > 0 ? (tokens - last_tokens_) / dt : 0;
  p.utilization = dt > 0 ? std::min(1.0, (forward - last_forward_) / dt) : 0;
  p.kv_usage = metrics_->kv_usage_ratio.Value();
  p.waiting = metrics_->requests_waiting.Value();
  p.running = metrics_->requests_running.Value();
  last_ttft_ = ttft;
  last_tokens_ = tokens;
  last_forward_ = forward;
  last_t_ = now;
  points_.push_back(p);
  while (points_.size() > kSamples) points_.pop_front();
}

json StatusBoard::ToJson(const StatusIdentity& id) {
  ServerMetrics& m = *metrics_;
  json j;
  j["title"] = "kvserve serve";
  j["state"] = id.state;
  j["uptime_seconds"] = m.process.uptime_seconds();
  j["version"] = metrics::BuildVersion();
  j["revision"] = metrics::BuildRevision();
  j["facts"] = json::array({
      json::array({"Model", id.model_id.empty() ? "(loading)" : id.model_id}),
      json::array({"SHA-256", id.sha256.empty() ? "-" : id.sha256}),
      json::array({"File", id.model_path}),
      json::array({"Context", fmt::format("{} tokens", id.max_context_length)}),
      json::array({"KV block", fmt::format("{} tokens", m.kv_block_size.Value())}),
      json::array({"Version", fmt::format("{} ({})", metrics::BuildVersion(), metrics::BuildRevision())}),
  });
  const auto stat = [](const char* label, double value, const char* format, const std::string& metric) {
    return json{{"label", label}, {"value", value}, {"format", format}, {"metric", metric}};
  };
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
      stat("KV blocks total", m.kv_blocks_total.Value(), "int", "kvserve:kv_cache_blocks_total"),
      stat("Prefix-cache hit ratio", m.prefix_hit_ratio.Value(), "percent", "kvserve:prefix_cache_hit_ratio"),
      stat("Generated tokens", m.generation_tokens.Value(), "int", "kvserve:generation_tokens_total"),
      stat("Preemptions", m.preemptions.Value(), "int", "kvserve:num_preemptions_total"),
      stat("Engine busy", m.forward_seconds.Value(), "seconds", "kvserve:engine_forward_seconds_total"),
  });
  json parts = json::array();
  for (const char* account : {"weights", "kv_pool", "activations", "overhead"}) {
    parts.push_back({{"label", account},
                     {"value", m.memory_bytes.With({account}).Value()},
                     {"metric", fmt::format("kvserve:memory_bytes{{account=\"{}\"}}", account)}});
  }
  j["breakdown"] = {{"title", "Memory plan"}, {"format", "bytes"}, {"parts", parts}};
  std::lock_guard<std::mutex> lock(mu_);
  const auto series = [&](const char* label, const char* format, double Point::*field) {
    return kvs::metrics::StatusSeries(label, format, points_, field);
  };
  j["series"] = json::array({
      series("TTFT p50", "seconds", &Point::ttft_p50),
      series("TTFT p95", "seconds", &Point::ttft_p95),
      series("Generated tokens/s", "rate", &Point::tokens_per_second),
      series("KV watermark", "percent", &Point::kv_usage),
      series("Queue (waiting)", "int", &Point::waiting),
      series("Compute utilisation", "percent", &Point::utilization),
  });
  json rows = json::array();
  for (const RecentRequest& r : recent_) {
    rows.push_back(json::array({fmt::format("{:.3f}", r.time), r.id, r.path, r.status, r.prompt_tokens, r.cached_tokens,
                                r.completion_tokens, r.ttft_ms ? json(std::round(*r.ttft_ms * 10) / 10) : json(nullptr),
                                std::round(r.duration_ms * 10) / 10, r.finish_reason}));
  }
  j["table"] = {{"title", "Recent requests"},
                {"columns", json::array({"ended (unix s)", "id", "path", "status", "prompt", "cached", "completion",
                                         "TTFT ms", "duration ms", "finish"})},
                {"rows", rows}};
  return j;
}

}  // namespace kvs::server
