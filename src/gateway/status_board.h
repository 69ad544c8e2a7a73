// StatusBoard: what the status page (GET /, metrics/status_page.h) shows
// about `kvserve gateway`, as the JSON document of GET /status in the page's
// schema (title, state, facts, stats, breakdown, series, table): the pools
// and their replicas (state, weight, the gateway's outstanding tokens, the
// replicas' scraped queue and KV watermark), live counters, and a history
// of the last 10 minutes (requests/s, rate-limited/s, upstream TTFT p50/p95,
// requests in flight, healthy replicas; one sample every 2 s).
//
// Every number is read from GatewayMetrics after the same refresh that
// /metrics renders (Gateway::RefreshMetrics), and each stat names the series
// it mirrors: one series (`kvserve_gateway:requests_in_flight`), or a sum
// over a family's children written as PromQL (`sum(kvserve_gateway:
// requests_total)`), so the page and /metrics can be checked against each
// other.
// Thread-safety: thread-safe (one mutex); Sample is called from a timer on
// an I/O thread, ToJson from handlers.
#pragma once

#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/gateway_metrics.h"
#include "gateway/pool.h"

namespace kvs::gateway {

// Sums over every child of a family (the PromQL `sum(name)`).
double SumCounter(const metrics::Family<metrics::Counter>& f);
double SumGauge(const metrics::Family<metrics::Gauge>& f);
// One snapshot of all children of a histogram family added up (their
// buckets are the same); empty when the family has no child yet.
metrics::Histogram::Snapshot MergedSnapshot(const metrics::Family<metrics::Histogram>& f);

class StatusBoard {
 public:
  static constexpr size_t kSamples = 300;  // 10 minutes at one per 2 s
  static constexpr double kSampleSeconds = 2.0;

  explicit StatusBoard(GatewayMetrics* metrics);

  // One history sample from the metrics (call after the refresh).
  void Sample();
  // state: ready, not_ready or draining; facts: [label, text] rows.
  nlohmann::json ToJson(const std::string& state, const std::vector<std::pair<std::string, std::string>>& facts,
                        const std::vector<Replica*>& replicas);

 private:
  struct Point {
    double t = 0;
    double requests_per_second = 0, rate_limited_per_second = 0;
    double ttft_p50 = 0, ttft_p95 = 0;  // NaN: no upstream answer in the interval
    double in_flight = 0, healthy = 0;
  };
  GatewayMetrics* metrics_;
  std::mutex mu_;
  std::deque<Point> points_;  // guarded by mu_; oldest first
  std::optional<metrics::Histogram::Snapshot> last_ttft_;  // guarded by mu_
  double last_requests_ = 0, last_limited_ = 0, last_t_ = 0;  // guarded by mu_
};

}  // namespace kvs::gateway
