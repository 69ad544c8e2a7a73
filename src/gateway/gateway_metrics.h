// GatewayMetrics: the gateway's Prometheus metrics (prefix kvserve_gateway:,
// plus the standard process collector), on the registry of metrics/metrics.h,
// following docs/metrics.md's conventions. docs/gateway.md lists them.
//
// AuditLog: one JSON line per request (time, request id, key id, tenant,
// pool, replica, status, prompt/completion tokens, TTFT, duration, retries,
// and the prompt text only when logging.audit_prompts is on). Never the key.
// Thread-safety: both are thread-safe.
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/log_file.h"
#include "base/status.h"
#include "metrics/metrics.h"
#include "metrics/process_metrics.h"

namespace kvs::gateway {

struct GatewayMetrics {
  GatewayMetrics();

  metrics::Registry registry;
  metrics::Family<metrics::Counter>& requests;          // tenant, pool, replica, status, endpoint
  metrics::Family<metrics::Counter>& rate_limited;      // tenant, reason
  metrics::Family<metrics::Counter>& rate_limited_tokens;  // tenant
  metrics::Family<metrics::Counter>& tokens_reserved;   // tenant
  metrics::Family<metrics::Counter>& tokens_used;       // tenant, kind (prompt, completion)
  metrics::Family<metrics::Gauge>& tenant_in_flight;    // tenant
  metrics::Family<metrics::Gauge>& replica_healthy;     // pool, replica
  metrics::Family<metrics::Gauge>& replica_outstanding_tokens;  // pool, replica
  metrics::Family<metrics::Gauge>& replica_queue_length;        // pool, replica (scraped)
  metrics::Family<metrics::Gauge>& replica_kv_usage;            // pool, replica (scraped)
  metrics::Family<metrics::Histogram>& upstream_first_byte;     // pool: request sent -> head / first token
  metrics::Family<metrics::Histogram>& upstream_duration;       // pool
  metrics::Family<metrics::Counter>& upstream_errors;   // pool, replica, kind
  metrics::Family<metrics::Counter>& retries;           // pool
  metrics::Family<metrics::Counter>& prompts_truncated;        // pool, policy (context_policy.h)
  metrics::Family<metrics::Counter>& prompt_tokens_truncated;  // pool
  metrics::Family<metrics::Counter>& content_cleaned;          // pool: characters removed
  metrics::Family<metrics::Counter>& ejections;         // pool, replica, cause (probe, failures)
  metrics::Family<metrics::Counter>& readmissions;      // pool, replica
  // Warm-up of joining replicas (warmup.h).
  metrics::Family<metrics::Counter>& warmups_started;   // pool, replica
  metrics::Family<metrics::Counter>& warmups_finished;  // pool, replica, outcome (completed, failed)
  metrics::Family<metrics::Counter>& warm_prompts;      // pool, replica, outcome (ok, error): replays answered
  metrics::Family<metrics::Gauge>& replica_warming;     // pool, replica: 1 while held out for its warm-up
  // Cache-aware routing (routing.h).
  metrics::Family<metrics::Gauge>& prefix_index_blocks;      // pool, replica: hashes in the replica's index
  metrics::Family<metrics::Gauge>& prefix_index_disk_blocks; // pool, replica: hashes on the replica's disk tier
  metrics::Family<metrics::Counter>& prefix_index_resyncs;   // pool, replica: full resyncs of that index
  metrics::Family<metrics::Counter>& prefix_prompt_tokens;   // pool: prompt tokens of answered requests
  metrics::Family<metrics::Counter>& prefix_predicted_tokens;  // pool, source (replica, routed): predicted cached
  metrics::Family<metrics::Counter>& prefix_cached_tokens;   // pool, replica: cached_tokens the replicas reported
  metrics::Family<metrics::Counter>& prefix_mispredictions;  // pool, kind (stale_index, unpredicted)
  metrics::Family<metrics::Counter>& prefix_routed_away_tokens;  // pool: cached elsewhere, sent here for load
  // Versions and canary (canary.h).
  metrics::Family<metrics::Counter>& version_attempts;           // pool, version, outcome (ok, error)
  metrics::Family<metrics::Histogram>& version_first_token;      // pool, version
  metrics::Family<metrics::Counter>& version_completion_tokens;  // pool, version
  metrics::Family<metrics::Counter>& version_seconds;            // pool, version: time of answered attempts
  metrics::Family<metrics::Gauge>& canary_weight;                // pool
  metrics::Family<metrics::Gauge>& canary_version;               // pool, version
  metrics::Family<metrics::Counter>& canary_rollbacks;           // pool
  metrics::Family<metrics::Gauge>& canary_rolled_back;           // pool: 1 while its canary version is rolled back
  // Replicas from DNS (discovery.h).
  metrics::Family<metrics::Counter>& dns_lookups;     // pool, name, outcome (ok, empty, error)
  metrics::Family<metrics::Gauge>& pool_replicas;     // pool: replicas in the pool now (listed)
  metrics::Family<metrics::Gauge>& queued_requests;   // pool: waiting in the fair queue
  metrics::Family<metrics::Counter>& queue_timeouts;  // pool
  metrics::Counter& stream_errors;                     // in-band error events sent
  metrics::Counter& client_disconnects;                // clients that left mid-request
  metrics::Counter& key_reloads;
  metrics::Counter& key_reload_failures;
  metrics::Counter& shared_state_errors;               // Redis calls that failed
  metrics::Family<metrics::Counter>& tls_cert_reloads;  // outcome (ok, failed): the public listener's certificate
  metrics::Gauge& in_flight;
  metrics::Gauge& ready;                               // 1 while /ready answers 200
  metrics::ProcessMetrics process;  // process_* (standard names) and kvserve_gateway:build_info
};

struct AuditRecord {
  std::string id;
  std::string key_id;
  std::string tenant;
  std::string method;
  std::string path;
  std::string pool;
  std::string replica;
  std::string version;  // the replica's release label
  int status = 0;
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t reserved_tokens = 0;
  std::optional<double> ttft_ms;
  double duration_ms = 0;
  int retries = 0;
  std::optional<int64_t> cached_tokens;            // the replica's usage.prompt_tokens_details.cached_tokens
  std::optional<int64_t> predicted_cached_tokens;  // cache_aware: what routing expected
  bool stream = false;
  std::string error;   // "" or what went wrong (rate_limited:tokens, upstream timeout, ...)
  std::string remote;   // the client: the TCP peer, or as a trusted proxy named it
  std::string peer;     // the TCP peer (a trusted proxy), when it is not the client
  std::optional<std::string> prompt;  // only with logging.audit_prompts
  std::string truncated;  // "" or how the prompt was cut to fit (the pool's on_overflow)
  int64_t truncated_prompt_tokens = 0;

  nlohmann::json ToJson() const;
};

class AuditLog {
 public:
  // "stdout", "stderr", "off" or a file path (created 0600 or appended:
  // base/log_file.h).
  static StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& where);
  void Write(const AuditRecord& r);
  bool enabled() const { return file_->enabled(); }
  // SIGHUP: a file is opened again at its path (log rotation).
  Status Reopen() { return file_->Reopen(); }

 private:
  explicit AuditLog(std::unique_ptr<LogFile> f) : file_(std::move(f)) {}
  std::unique_ptr<LogFile> file_;
};

}  // namespace kvs::gateway
