#include "gateway/gateway_metrics.h"

#include <chrono>
#include <ctime>

#include <fmt/format.h>

namespace kvs::gateway {

namespace {

const std::vector<double> kLatency = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                      1,      2.5,   5,      10,    20,   40,    80,   160, 320, 640};

std::string NowIso() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, ms);
}

}  // namespace

GatewayMetrics::GatewayMetrics()
    : requests(registry.AddCounter("kvserve_gateway:requests_total",
                                   "Responses by tenant, pool, replica, HTTP status and endpoint (the API route; "
                                   "pool/replica \"\" when the request never reached one).",
                                   {"tenant", "pool", "replica", "status", "endpoint"})),
      rate_limited(registry.AddCounter("kvserve_gateway:rate_limited_requests_total",
                                       "Requests refused with 429 by the gateway's limits, by tenant and reason "
                                       "(global_requests, requests, concurrency, tokens, too_large).",
                                       {"tenant", "reason"})),
      rate_limited_tokens(registry.AddCounter("kvserve_gateway:rate_limited_tokens_total",
                                              "Tokens (prompt + max_tokens) of requests refused by the limits.",
                                              {"tenant"})),
      tokens_reserved(registry.AddCounter("kvserve_gateway:tokens_reserved_total",
                                          "Tokens charged at admission (prompt + max_tokens, x n).", {"tenant"})),
      tokens_used(registry.AddCounter("kvserve_gateway:tokens_used_total",
                                      "Tokens really used by finished requests (the correction of the reservation), "
                                      "by kind: prompt, completion.",
                                      {"tenant", "kind"})),
      tenant_in_flight(registry.AddGauge("kvserve_gateway:tenant_requests_in_flight",
                                         "Admitted requests not finished, by tenant.", {"tenant"})),
      replica_healthy(registry.AddGauge("kvserve_gateway:replica_healthy",
                                        "1 when the replica gets traffic (healthy and not draining).",
                                        {"pool", "replica"})),
      replica_outstanding_tokens(registry.AddGauge("kvserve_gateway:replica_outstanding_tokens",
                                                   "Tokens reserved by requests in flight on the replica (the "
                                                   "gateway's own accounting).",
                                                   {"pool", "replica"})),
      replica_queue_length(registry.AddGauge("kvserve_gateway:replica_queue_length",
                                             "The replica's kvserve:num_requests_waiting, as last scraped.",
                                             {"pool", "replica"})),
      replica_kv_usage(registry.AddGauge("kvserve_gateway:replica_kv_usage_ratio",
                                         "The replica's kvserve:kv_cache_usage_ratio, as last scraped.",
                                         {"pool", "replica"})),
      upstream_first_byte(registry.AddHistogram("kvserve_gateway:upstream_time_to_first_token_seconds",
                                                "From sending a request to a replica to its first token (streams) "
                                                "or its response (non-streaming).",
                                                kLatency, {"pool"})),
      upstream_duration(registry.AddHistogram("kvserve_gateway:upstream_request_duration_seconds",
                                              "One attempt on a replica, from sending to the end of the response.",
                                              kLatency, {"pool"})),
      upstream_errors(registry.AddCounter("kvserve_gateway:upstream_errors_total",
                                          "Failed attempts on replicas by kind (connect, connect_timeout, "
                                          "first_token_timeout, total_timeout, disconnected, protocol, status_5xx, "
                                          "status_401, status_429).",
                                          {"pool", "replica", "kind"})),
      retries(registry.AddCounter("kvserve_gateway:retries_total",
                                  "Attempts repeated on another replica after a failure before any byte reached the "
                                  "client.",
                                  {"pool"})),
      prompts_truncated(registry.AddCounter("kvserve_gateway:prompts_truncated_total",
                                            "Prompts too long for every pool cut to fit the longest by its on_overflow "
                                            "policy.",
                                            {"pool", "policy"})),
      prompt_tokens_truncated(registry.AddCounter("kvserve_gateway:prompt_tokens_truncated_total",
                                                  "Prompt tokens removed by on_overflow truncation.", {"pool"})),
      content_cleaned(registry.AddCounter("kvserve_gateway:content_cleaned_characters_total",
                                          "Invisible and control characters removed from prompts (clean_content).",
                                          {"pool"})),
      ejections(registry.AddCounter("kvserve_gateway:replica_ejections_total",
                                    "Replicas taken out of rotation, by cause: probe (failed /ready), failures "
                                    "(consecutive failed requests).",
                                    {"pool", "replica", "cause"})),
      readmissions(registry.AddCounter("kvserve_gateway:replica_readmissions_total",
                                       "Ejected replicas brought back after consecutive good probes.",
                                       {"pool", "replica"})),
      warmups_started(registry.AddCounter("kvserve_gateway:replica_warmups_started_total",
                                          "Warm-ups of a replica that joined a pool with warm_prompts_file "
                                          "(start-up or re-admission).",
                                          {"pool", "replica"})),
      warmups_finished(registry.AddCounter("kvserve_gateway:replica_warmups_total",
                                           "Finished warm-ups by outcome: completed (every prompt replayed) or "
                                           "failed (a replay failed, or warm_timeout_seconds passed); either way "
                                           "the replica then takes traffic.",
                                           {"pool", "replica", "outcome"})),
      warm_prompts(registry.AddCounter("kvserve_gateway:warm_prompts_replayed_total",
                                       "Warm prompts replayed to joining replicas, by outcome (ok: HTTP 200; "
                                       "error: any other answer, no answer or a timeout).",
                                       {"pool", "replica", "outcome"})),
      replica_warming(registry.AddGauge("kvserve_gateway:replica_warming",
                                        "1 while the replica is held out of routing for its warm-up.",
                                        {"pool", "replica"})),
      prefix_index_blocks(registry.AddGauge("kvserve_gateway:prefix_index_blocks",
                                            "Block hashes in the gateway's copy of the replica's prefix-cache index "
                                            "(cache_aware pools).",
                                            {"pool", "replica"})),
      prefix_index_disk_blocks(registry.AddGauge("kvserve_gateway:prefix_index_disk_blocks",
                                                 "Block hashes the replica's prefix-cache index says its disk KV "
                                                 "tier holds (cache_aware pools; replicas with kv_cache.disk).",
                                                 {"pool", "replica"})),
      prefix_index_resyncs(registry.AddCounter("kvserve_gateway:prefix_index_resyncs_total",
                                               "Full reloads of a replica's prefix-cache index (first poll, replica "
                                               "restart, or the gateway fell behind its event log).",
                                               {"pool", "replica"})),
      prefix_prompt_tokens(registry.AddCounter("kvserve_gateway:prefix_prompt_tokens_total",
                                               "Prompt tokens of answered requests in cache_aware pools (the "
                                               "denominator of the hit rates below).",
                                               {"pool"})),
      prefix_predicted_tokens(registry.AddCounter("kvserve_gateway:prefix_predicted_cached_tokens_total",
                                                  "Prompt tokens routing predicted cached on the replica it picked, "
                                                  "by the source of the prediction: replica (its published index, RAM), "
                                                  "replica_disk (its published index, blocks on its disk tier), "
                                                  "routed (the gateway's record of what it sent there).",
                                                  {"pool", "source"})),
      prefix_cached_tokens(registry.AddCounter("kvserve_gateway:prefix_cached_tokens_total",
                                               "Prompt tokens the replicas reported served from their prefix cache "
                                               "(usage.prompt_tokens_details.cached_tokens), cache_aware pools.",
                                               {"pool", "replica"})),
      prefix_mispredictions(registry.AddCounter("kvserve_gateway:prefix_mispredictions_total",
                                                "Requests whose reported cached_tokens differed from the prediction: "
                                                "stale_index (fewer: the index held blocks the replica had evicted), "
                                                "unpredicted (more: the index missed blocks the replica held).",
                                                {"pool", "kind"})),
      prefix_routed_away_tokens(registry.AddCounter("kvserve_gateway:prefix_routed_away_tokens_total",
                                                    "Cached prompt tokens given up by routing to a less loaded "
                                                    "replica than the one holding the longest prefix (load won over "
                                                    "affinity; a routing miss by design).",
                                                    {"pool"})),
      version_attempts(registry.AddCounter("kvserve_gateway:version_attempts_total",
                                           "Attempts on replicas by release version and outcome (ok; error: 5xx, "
                                           "no answer, timeout, broken stream) -- the canary's error rate.",
                                           {"pool", "version", "outcome"})),
      version_first_token(registry.AddHistogram("kvserve_gateway:version_time_to_first_token_seconds",
                                                "Sending to a replica -> first token (streams) or response, by "
                                                "release version.",
                                                kLatency, {"pool", "version"})),
      version_completion_tokens(registry.AddCounter("kvserve_gateway:version_completion_tokens_total",
                                                    "Completion tokens of answered requests by release version.",
                                                    {"pool", "version"})),
      version_seconds(registry.AddCounter("kvserve_gateway:version_request_seconds_total",
                                          "Time of answered attempts by release version (tokens/s = "
                                          "version_completion_tokens_total / this).",
                                          {"pool", "version"})),
      canary_weight(registry.AddGauge("kvserve_gateway:canary_weight_percent",
                                      "Percent of sticky keys the pool sends to its canary version (0: none or "
                                      "rolled back).",
                                      {"pool"})),
      canary_version(registry.AddGauge("kvserve_gateway:canary_version_info",
                                       "1 for the pool's canary_version now, 0 for one it had before (a reload "
                                       "moves it).",
                                       {"pool", "version"})),
      canary_rollbacks(registry.AddCounter("kvserve_gateway:canary_rollbacks_total",
                                           "Automatic rollbacks: the canary's error rate exceeded the stable "
                                           "version's by more than canary_max_error_rate_margin.",
                                           {"pool"})),
      canary_rolled_back(registry.AddGauge("kvserve_gateway:canary_rolled_back",
                                           "1 while the pool's canary_version is rolled back (weight held at 0 across "
                                           "reloads, and restarts with gateway.state_file); 0 otherwise.",
                                           {"pool"})),
      dns_lookups(registry.AddCounter("kvserve_gateway:dns_lookups_total",
                                      "Lookups of the pools' replicas_dns names, by outcome: ok, empty (the name has "
                                      "no addresses: its replicas leave), error (the lookup failed: the replicas "
                                      "stay).",
                                      {"pool", "name", "outcome"})),
      pool_replicas(registry.AddGauge("kvserve_gateway:pool_replicas",
                                      "Replicas in the pool now: those of the configuration plus the addresses its "
                                      "replicas_dns names resolve to.",
                                      {"pool"})),
      queued_requests(registry.AddGauge("kvserve_gateway:queued_requests",
                                        "Requests waiting in the pool's weighted fair queue (every replica at "
                                        "max_requests_per_replica).",
                                        {"pool"})),
      queue_timeouts(registry.AddCounter("kvserve_gateway:queue_timeouts_total",
                                         "Requests that waited queue_timeout_seconds and got 503.", {"pool"})),
      stream_errors(registry.Counter0("kvserve_gateway:stream_errors_total",
                                      "Streams that failed after their first byte: ended with an in-band error event.")),
      client_disconnects(registry.Counter0("kvserve_gateway:client_disconnects_total",
                                           "Clients that went away before their response ended (the upstream "
                                           "request is cancelled).")),
      key_reloads(registry.Counter0("kvserve_gateway:key_file_reloads_total", "Successful reloads of the key file.")),
      key_reload_failures(registry.Counter0("kvserve_gateway:key_file_reload_failures_total",
                                            "Reloads of the key file that failed (it could not be read or parsed): "
                                            "the keys loaded before, revoked ones included, stay in force.")),
      shared_state_errors(registry.Counter0("kvserve_gateway:shared_state_errors_total",
                                            "Rate-limit calls to Redis that failed (then shared_state_failure "
                                            "decides).")),
      tls_cert_reloads(registry.AddCounter("kvserve_gateway:tls_cert_reloads_total",
                                           "Reloads of the public listener's TLS certificate and key (SIGHUP or a "
                                           "changed file): ok, or failed (the previous pair stays in force).",
                                           {"outcome"})),
      in_flight(registry.Gauge0("kvserve_gateway:requests_in_flight", "Requests being handled by the gateway.")),
      ready(registry.Gauge0("kvserve_gateway:ready",
                            "1 while the gateway accepts requests and every pool has an available replica (its "
                            "/ready answers 200); 0 otherwise and while draining.")),
      process(registry, "kvserve_gateway:") {}

nlohmann::json AuditRecord::ToJson() const {
  nlohmann::json j = {{"ts", NowIso()},
                      {"id", id},
                      {"key_id", key_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(key_id)},
                      {"tenant", tenant.empty() ? nlohmann::json(nullptr) : nlohmann::json(tenant)},
                      {"method", method},
                      {"path", path},
                      {"pool", pool.empty() ? nlohmann::json(nullptr) : nlohmann::json(pool)},
                      {"replica", replica.empty() ? nlohmann::json(nullptr) : nlohmann::json(replica)},
                      {"version", version.empty() ? nlohmann::json(nullptr) : nlohmann::json(version)},
                      {"status", status},
                      {"stream", stream},
                      {"prompt_tokens", prompt_tokens},
                      {"completion_tokens", completion_tokens},
                      {"reserved_tokens", reserved_tokens},
                      {"ttft_ms", ttft_ms ? nlohmann::json(*ttft_ms) : nlohmann::json(nullptr)},
                      {"duration_ms", duration_ms},
                      {"retries", retries},
                      {"remote", remote}};
  if (!peer.empty()) j["peer"] = peer;
  if (!truncated.empty()) {
    j["truncated"] = truncated;
    j["truncated_prompt_tokens"] = truncated_prompt_tokens;
  }
  if (cached_tokens) j["cached_tokens"] = *cached_tokens;
  if (predicted_cached_tokens) j["predicted_cached_tokens"] = *predicted_cached_tokens;
  if (!error.empty()) j["error"] = error;
  if (prompt) j["prompt"] = *prompt;
  return j;
}

StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& where) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<LogFile> f, LogFile::Open(where, "logging.audit_log"));
  return std::unique_ptr<AuditLog>(new AuditLog(std::move(f)));
}

void AuditLog::Write(const AuditRecord& r) {
  if (!file_->enabled()) return;
  file_->WriteLine(r.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace kvs::gateway
