// ServerMetrics: the "kvserve:" metric set of the HTTP service (names, help
// and buckets in one place; docs/metrics.md describes each). Request-level
// metrics are updated by the service as requests progress; engine-level
// gauges and totals (KV blocks, memory accounts, prefix cache, preemptions)
// are copied from InferenceBackend::Stats() at each scrape (Refresh).
// Thread-safety: thread-safe (see metrics.h).
#pragma once

#include <string>

#include "server/backend.h"
#include "metrics/metrics.h"

namespace kvs::server {

using metrics::Counter;
using metrics::Family;
using metrics::Gauge;
using metrics::Histogram;

struct ServerMetrics {
  ServerMetrics();
  ServerMetrics(const ServerMetrics&) = delete;
  ServerMetrics& operator=(const ServerMetrics&) = delete;

  // Copies engine statistics (nullptr while loading) and process memory.
  void Refresh(const BackendStats* stats);
  std::string Render() const { return registry.Render(); }

  metrics::Registry registry;
  // Engine state (from Stats()).
  Gauge& requests_running;
  Gauge& requests_waiting;
  Gauge& kv_blocks_total;
  Gauge& kv_blocks_used;
  Gauge& kv_blocks_cached;
  Gauge& kv_blocks_free;
  Gauge& kv_usage_ratio;
  Gauge& kv_block_size;
  Family<Gauge>& memory_bytes;  // {account="weights"|"kv_pool"|"activations"}
  Gauge& max_admissible_context;
  Counter& prefix_queried_tokens;
  Counter& prefix_hit_tokens;
  Counter& preemptions;
  // Requests (updated by the service).
  Histogram& ttft;
  Histogram& inter_token_latency;
  Histogram& e2e_latency;
  Histogram& queue_time;
  Counter& prompt_tokens;
  Counter& generation_tokens;
  Family<Counter>& finished;       // {finish_reason}, one per choice
  Family<Counter>& http_requests;  // {path, status}
  Gauge& http_in_flight;
  Gauge& sequences_in_flight;      // admitted by the service, counted against max_concurrent_requests
  // Process.
  Gauge& resident_memory;
  Gauge& ready;                    // 1 when serving, 0 while loading or draining
};

}  // namespace kvs::server
