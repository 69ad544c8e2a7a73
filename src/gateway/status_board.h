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
// other. The header, history and schema are metrics::StatusFrame's.
// Thread-safety: thread-safe (the frame's mutex); Sample is called from a timer on
// an I/O thread, ToJson from handlers.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/gateway_metrics.h"
#include "gateway/pool.h"
#include "metrics/status_frame.h"

namespace kvs::gateway {

// Sums over every child of a family (the PromQL `sum(name)`).
double SumCounter(const metrics::Family<metrics::Counter>& f);
double SumGauge(const metrics::Family<metrics::Gauge>& f);
// One snapshot of all children of a histogram family added up (their
// buckets are the same); empty when the family has no child yet.
metrics::Histogram::Snapshot MergedSnapshot(const metrics::Family<metrics::Histogram>& f);

class StatusBoard {
 public:
  static constexpr double kSampleSeconds = metrics::StatusFrame::kSampleSeconds;

  explicit StatusBoard(GatewayMetrics* metrics);

  // One history sample from the metrics (call after the refresh).
  void Sample();
  // state: ready, not_ready or draining; facts: [label, text] rows.
  nlohmann::json ToJson(const std::string& state, const std::vector<std::pair<std::string, std::string>>& facts,
                        const std::vector<Replica*>& replicas);

 private:
  GatewayMetrics* metrics_;
  metrics::StatusFrame frame_;
};

}  // namespace kvs::gateway
