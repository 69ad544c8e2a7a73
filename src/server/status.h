// StatusBoard: what the status page (GET /, metrics/status_page.h) shows
// about `kvserve serve`, as the JSON document of GET /status: the model and
// its hash, version and uptime, the memory plan's accounts, live KV
// watermark, queue and running sequences, a history of the last 10 minutes
// (TTFT p50/p95, generated tokens/s, KV watermark, queue, compute
// utilisation; one sample every 2 s) and the last 20 requests.
//
// Every live figure is read from ServerMetrics after the same Refresh that
// /metrics renders, so the page and /metrics agree (each stat names its
// series). The header, history and schema are metrics::StatusFrame's.
// Thread-safety: thread-safe (one mutex); Sample is called by a sampler
// thread (RunServe), Record by request completions, ToJson by handlers.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "metrics/status_frame.h"
#include "server/server_metrics.h"

namespace kvs::server {

struct RecentRequest {
  double time = 0;  // unix seconds, when it ended
  std::string id;
  std::string path;
  int status = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  std::optional<double> ttft_ms;
  double duration_ms = 0;
  std::string finish_reason;
};

struct StatusIdentity {
  std::string state;  // loading, ready, draining
  std::string model_id, model_path, sha256;
  int64_t max_context_length = 0;
};

class StatusBoard {
 public:
  static constexpr size_t kRecent = 20;
  static constexpr double kSampleSeconds = metrics::StatusFrame::kSampleSeconds;

  explicit StatusBoard(ServerMetrics* metrics);

  void Record(RecentRequest r);
  // One history sample from the metrics (call after ServerMetrics::Refresh).
  void Sample();
  nlohmann::json ToJson(const StatusIdentity& id);

 private:
  ServerMetrics* metrics_;
  metrics::StatusFrame frame_;
  std::mutex mu_;
  std::deque<RecentRequest> recent_;  // guarded by mu_; newest first
};

}  // namespace kvs::server
