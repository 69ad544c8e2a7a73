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
                                   "Responses by tenant, pool, replica and HTTP status (pool/replica \"\" when the "
                                   "request never reached one).",
                                   {"tenant", "pool", "replica", "status"})),
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
                                          "status_429).",
                                          {"pool", "replica", "kind"})),
      retries(registry.AddCounter("kvserve_gateway:retries_total",
                                  "Attempts repeated on another replica after a failure before any byte reached the "
                                  "client.",
                                  {"pool"})),
      ejections(registry.AddCounter("kvserve_gateway:replica_ejections_total",
                                    "Replicas taken out of rotation, by cause: probe (failed /ready), failures "
                                    "(consecutive failed requests).",
                                    {"pool", "replica", "cause"})),
      readmissions(registry.AddCounter("kvserve_gateway:replica_readmissions_total",
                                       "Ejected replicas brought back after consecutive good probes.",
                                       {"pool", "replica"})),
      stream_errors(registry.Counter0("kvserve_gateway:stream_errors_total",
                                      "Streams that failed after their first byte: ended with an in-band error event.")),
      client_disconnects(registry.Counter0("kvserve_gateway:client_disconnects_total",
                                           "Clients that went away before their response ended (the upstream "
                                           "request is cancelled).")),
      key_reloads(registry.Counter0("kvserve_gateway:key_file_reloads_total", "Successful reloads of the key file.")),
      shared_state_errors(registry.Counter0("kvserve_gateway:shared_state_errors_total",
                                            "Rate-limit calls to Redis that failed (then shared_state_failure "
                                            "decides).")),
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
                      {"status", status},
                      {"stream", stream},
                      {"prompt_tokens", prompt_tokens},
                      {"completion_tokens", completion_tokens},
                      {"reserved_tokens", reserved_tokens},
                      {"ttft_ms", ttft_ms ? nlohmann::json(*ttft_ms) : nlohmann::json(nullptr)},
                      {"duration_ms", duration_ms},
                      {"retries", retries},
                      {"remote", remote}};
  if (!error.empty()) j["error"] = error;
  if (prompt) j["prompt"] = *prompt;
  return j;
}

StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& where) {
  if (where == "off") return std::unique_ptr<AuditLog>(new AuditLog(nullptr, false));
  if (where == "stdout") return std::unique_ptr<AuditLog>(new AuditLog(stdout, false));
  if (where == "stderr") return std::unique_ptr<AuditLog>(new AuditLog(stderr, false));
  FILE* f = std::fopen(where.c_str(), "a");
  if (!f) return IoError("logging.audit_log: cannot open \"{}\" for appending", where);
  return std::unique_ptr<AuditLog>(new AuditLog(f, true));
}

AuditLog::~AuditLog() {
  if (owned_ && file_) std::fclose(file_);
}

void AuditLog::Write(const AuditRecord& r) {
  if (!file_) return;
  const std::string line = r.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fflush(file_);
}

}  // namespace kvs::gateway
