#include "gateway/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "base/line_file.h"
#include "frontend/config_keys.h"
#include "gateway/client_address.h"
#include "gateway/context_policy.h"
#include "gateway/redis_limiter.h"
#include "gateway/warm_prompts.h"
#include "http/http_client.h"

namespace kvs::gateway {

namespace {

using frontend::RawValue;
using GatewayKeys = frontend::KeyTable<GatewayConfig>;
using PoolKeyTable = frontend::KeyTable<PoolConfig>;

std::string TrustedProxiesCheck(const std::string& s) {
  auto t = TrustedProxies::Parse(s);
  return t.ok() ? "" : "addresses and CIDR ranges, comma-separated (" + t.status().message() + ")";
}

std::string NonEmpty(const std::string& s) { return s.empty() ? "a non-empty string" : ""; }

std::string SharedStateCheck(const std::string& s) {
  if (s.empty()) return "";
  return RedisAddress::Parse(s).ok() ? "" : "\"\", redis://[USER:PASSWORD@]HOST:PORT or rediss://...";
}

using G = GatewayConfig;
using P = PoolConfig;

const GatewayKeys& Scalars() {
  static const GatewayKeys table = [] {
    std::vector<GatewayKeys::Key> t;
    t.push_back(GatewayKeys::String("gateway.host", "host", [](G& c) -> std::string& { return c.gateway.host; },
                                    "an address or host name", "Address to listen on (0.0.0.0 for all interfaces)", NonEmpty));
    t.push_back(GatewayKeys::Int("gateway.port", "port", [](G& c) -> int64_t& { return c.gateway.port; }, 0, 65535,
                                 "TCP port; 0 picks a free one (the log line \"listening on\" says which)"));
    t.push_back(GatewayKeys::Int("gateway.io_threads", "io-threads", [](G& c) -> int64_t& { return c.gateway.io_threads; }, 1, 64,
                                 "HTTP threads for client connections"));
    t.push_back(GatewayKeys::Int("gateway.upstream_threads", "upstream-threads",
                                 [](G& c) -> int64_t& { return c.gateway.upstream_threads; }, 1, 64,
                                 "HTTP client threads for replica connections"));
    t.push_back(GatewayKeys::Int("gateway.prep_threads", "prep-threads", [](G& c) -> int64_t& { return c.gateway.prep_threads; },
                                 1, 64, "Threads that parse, count tokens and admit requests"));
    t.push_back(GatewayKeys::Int("gateway.prep_queue", "prep-queue", [](G& c) -> int64_t& { return c.gateway.prep_queue; }, 1,
                                 1 << 20, "Requests waiting for a prep thread; beyond it requests get 503"));
    t.push_back(GatewayKeys::Int("gateway.max_body_bytes", "max-body-bytes",
                                 [](G& c) -> int64_t& { return c.gateway.max_body_bytes; }, 1024, int64_t{1} << 30,
                                 "Largest request body; larger ones get 413"));
    t.push_back(GatewayKeys::Int("gateway.max_response_buffer_bytes", "max-response-buffer-bytes",
                                 [](G& c) -> int64_t& { return c.gateway.max_response_buffer_bytes; }, 1024, int64_t{1} << 32,
                                 "A non-streaming answer is held whole up to this many bytes; a larger one is relayed as it "
                                 "arrives (never cut), its usage read from its end"));
    t.push_back(GatewayKeys::Int("gateway.max_connections", "max-connections",
                                 [](G& c) -> int64_t& { return c.gateway.max_connections; }, 0, 1 << 20,
                                 "Open client connections; a new one beyond gets 503 and is closed (0: no limit)"));
    t.push_back(GatewayKeys::Int("gateway.max_connections_per_client", "max-connections-per-client",
                                 [](G& c) -> int64_t& { return c.gateway.max_connections_per_client; }, 0, 1 << 20,
                                 "Open connections from one client address; beyond: 429 and closed (0: no limit)"));
    t.push_back(GatewayKeys::String("gateway.trusted_proxies", "trusted-proxies",
                                    [](G& c) -> std::string& { return c.gateway.trusted_proxies; },
                                    "addresses and CIDR ranges, comma-separated, or \"\"",
                                    "Load balancers whose X-Forwarded-For names the client (audit log, X-Forwarded-For to the "
                                    "replicas); any other peer is the client itself",
                                    TrustedProxiesCheck));
    t.push_back(GatewayKeys::String("gateway.admin_host", "admin-host", [](G& c) -> std::string& { return c.gateway.admin_host; },
                                    "an address or host name",
                                    "Address of the admin listener (/metrics, /status, the status page); keep it off the public "
                                    "network",
                                    NonEmpty));
    t.push_back(GatewayKeys::Int("gateway.admin_port", "admin-port", [](G& c) -> int64_t& { return c.gateway.admin_port; }, 0,
                                 65535, "Port of the admin listener; 0 picks a free one (the log line \"admin listening on\" "
                                 "says which)"));
    t.push_back(GatewayKeys::Number("gateway.keep_alive_timeout_seconds", "keep-alive-timeout",
                                    [](G& c) -> double& { return c.gateway.keep_alive_timeout_seconds; }, 0, true, 3600,
                                    "How long an idle client connection stays open"));
    t.push_back(GatewayKeys::Enum("gateway.prefix_cache_scope", "prefix-cache-scope", [](G& c) -> std::string& { return c.gateway.prefix_cache_scope; },
                                  {"tenant", "shared"},
                                  "Who shares prefix-cache blocks on the replicas: tenant (each tenant its own namespace, "
                                  "which clients cannot override) or shared (all tenants: a common system prompt is cached "
                                  "once, but response times can tell one tenant what another sent)"));
    t.push_back(GatewayKeys::Number("gateway.drain_timeout_seconds", "drain-timeout",
                                    [](G& c) -> double& { return c.gateway.drain_timeout_seconds; }, 0, false, 3600,
                                    "On SIGTERM: how long in-flight requests may take before they are cut"));
    t.push_back(GatewayKeys::String("gateway.state_file", "state-file",
                                    [](G& c) -> std::string& { return c.gateway.state_file; }, "a file path or \"\"",
                                    "Where the gateway records its automatic canary rollbacks, so a restart keeps a "
                                    "rolled-back canary at weight 0 (a reload always does); \"\": in memory only"));
    t.push_back(GatewayKeys::String("gateway.key_file", "key-file", [](G& c) -> std::string& { return c.gateway.key_file; },
                                    "a file path or \"\"",
                                    "Tenants, limits and API-key digests (written by `kvserve gateway keys`); reloaded on change "
                                    "and on SIGHUP"));
    t.push_back(GatewayKeys::Bool("gateway.allow_anonymous", "allow-anonymous",
                                  [](G& c) -> bool& { return c.gateway.allow_anonymous; },
                                  "Without key_file: serve without authentication (otherwise start-up fails)"));
    t.push_back(GatewayKeys::Number("gateway.key_file_poll_seconds", "key-file-poll",
                                    [](G& c) -> double& { return c.gateway.key_file_poll_seconds; }, 0, true, 3600,
                                    "How often the key file's and the TLS files' modification times are checked"));
    t.push_back(GatewayKeys::Number("gateway.rate_limit_per_second", "rate-limit-per-second",
                                    [](G& c) -> double& { return c.gateway.rate_limit_per_second; }, 0, false, 1e9,
                                    "Requests per second admitted for all tenants together (token bucket); 0: no limit"));
    t.push_back(GatewayKeys::String("gateway.tls_cert_file", "tls-cert-file", [](G& c) -> std::string& { return c.gateway.tls_cert_file; },
                                    "a file path or \"\"",
                                    "HTTPS on the public port: PEM certificate chain (leaf first); with tls_key_file. Reloaded on "
                                    "SIGHUP and when the file changes; \"\": plain HTTP"));
    t.push_back(GatewayKeys::String("gateway.tls_key_file", "tls-key-file", [](G& c) -> std::string& { return c.gateway.tls_key_file; },
                                    "a file path or \"\"", "The PEM private key of tls_cert_file"));
    t.push_back(GatewayKeys::String("gateway.shared_state", "shared-state", [](G& c) -> std::string& { return c.gateway.shared_state; },
                                    "\"\", redis://[USER:PASSWORD@]HOST:PORT or rediss://...",
                                    "Where rate-limit counters live: \"\" in this process; a Redis shared by every gateway using "
                                    "it (rediss: over TLS; with a password, AUTH on every connection)",
                                    SharedStateCheck));
    t.push_back(GatewayKeys::String("gateway.shared_state_tls_ca_file", "shared-state-tls-ca-file",
                                    [](G& c) -> std::string& { return c.gateway.shared_state_tls_ca_file; }, "a file path or \"\"",
                                    "rediss: PEM CA certificates Redis's certificate must chain to (\"\": the system's store)"));
    t.push_back(GatewayKeys::String("gateway.shared_state_password_env", "shared-state-password-env",
                                    [](G& c) -> std::string& { return c.gateway.shared_state_password_env; },
                                    "an environment variable name or \"\"",
                                    "Take the Redis password from this environment variable instead of the URL (it stays out of "
                                    "the configuration file)"));
    t.push_back(GatewayKeys::Enum("gateway.shared_state_failure", "shared-state-failure",
                                  [](G& c) -> std::string& { return c.gateway.shared_state_failure; },
                                  {"open", "closed", "local"},
                                  "When Redis does not answer: open admits without limits, closed refuses with 503, local "
                                  "enforces the limits in this process"));
    t.push_back(GatewayKeys::Number("gateway.shared_state_timeout_seconds", "shared-state-timeout",
                                    [](G& c) -> double& { return c.gateway.shared_state_timeout_seconds; }, 0, true, 60,
                                    "How long one Redis call may take before it counts as a failure"));
    t.push_back(GatewayKeys::Number("gateway.health_interval_seconds", "health-interval",
                                    [](G& c) -> double& { return c.gateway.health_interval_seconds; }, 0, true, 3600,
                                    "Period of the /ready probe and /metrics scrape of each replica"));
    t.push_back(GatewayKeys::Number("gateway.dns_refresh_seconds", "dns-refresh",
                                    [](G& c) -> double& { return c.gateway.dns_refresh_seconds; }, 0, true, 3600,
                                    "How often the pools' replicas_dns names are resolved again (replicas join and leave "
                                    "with the addresses)"));
    t.push_back(GatewayKeys::Int("gateway.eject_after_failures", "eject-after-failures",
                                 [](G& c) -> int64_t& { return c.gateway.eject_after_failures; }, 1, 1000,
                                 "Consecutive failed requests (connect error, timeout, 5xx) that eject a replica"));
    t.push_back(GatewayKeys::Int("gateway.readmit_after_probes", "readmit-after-probes",
                                 [](G& c) -> int64_t& { return c.gateway.readmit_after_probes; }, 1, 1000,
                                 "Consecutive good /ready probes that bring an ejected replica back"));
    t.push_back(GatewayKeys::String("model.path", "model", [](G& c) -> std::string& { return c.model.path; },
                                    "a GGUF file path or \"\"",
                                    "Model whose tokenizer and chat template count prompt tokens (no weights are loaded); \"\": "
                                    "the bundled model"));
    t.push_back(GatewayKeys::String("model.chat_template", "chat-template",
                                    [](G& c) -> std::string& { return c.model.chat_template; },
                                    "a built-in template name, a .jinja file path or \"\"",
                                    "Replaces the model's chat template when counting prompts: set it to the replicas' "
                                    "model.chat_template, so that the gateway counts the prompts they render"));
    t.push_back(GatewayKeys::Enum("logging.level", "log-level", [](G& c) -> std::string& { return c.logging.level; },
                                  {"trace", "debug", "info", "warn", "error", "off"}, "Log level (stderr)"));
    t.push_back(GatewayKeys::String("logging.audit_log", "audit-log", [](G& c) -> std::string& { return c.logging.audit_log; },
                                    "stdout, stderr, off, or a file path", "Where the JSON audit log goes (one line per request)",
                                    NonEmpty));
    t.push_back(GatewayKeys::Bool("logging.audit_prompts", "audit-prompts", [](G& c) -> bool& { return c.logging.audit_prompts; },
                                  "Include the prompt text in the audit log (off: never)"));
    return GatewayKeys(std::move(t));
  }();
  return table;
}

const PoolKeyTable& PoolKeys() {
  static const PoolKeyTable table = [] {
    std::vector<PoolKeyTable::Key> t;
    t.push_back(PoolKeyTable::String("name", "", [](P& p) -> std::string& { return p.name; }, "a unique name",
                                     "Pool name (metrics and audit log label)", NonEmpty));
    t.push_back(PoolKeyTable::Int("max_context", "", [](P& p) -> int64_t& { return p.max_context; }, 1, int64_t{1} << 24,
                                  "Most tokens (prompt + max_tokens) a request routed here may need; required"));
    t.push_back(PoolKeyTable::Int("default_max_tokens", "", [](P& p) -> int64_t& { return p.default_max_tokens; }, 1,
                                  int64_t{1} << 24, "max_tokens given to (and charged for) chat requests that set none"));
    t.push_back(PoolKeyTable::Number("connect_timeout_seconds", "", [](P& p) -> double& { return p.connect_timeout_seconds; }, 0,
                                     true, 600, "TCP connect to a replica"));
    t.push_back(PoolKeyTable::Number("first_token_timeout_seconds", "",
                                     [](P& p) -> double& { return p.first_token_timeout_seconds; }, 0, true, 86400,
                                     "Streams: until the first generated token (long pools need more: prefill is slow)"));
    t.push_back(PoolKeyTable::Number("total_timeout_seconds", "", [](P& p) -> double& { return p.total_timeout_seconds; }, 0, true,
                                     86400, "The whole request, retries included"));
    t.push_back(PoolKeyTable::Int("max_retries", "", [](P& p) -> int64_t& { return p.max_retries; }, 0, 16,
                                  "Other replicas tried when an attempt fails before any byte reached the client"));
    t.push_back(PoolKeyTable::String("api_key", "", [](P& p) -> std::string& { return p.api_key; }, "a string",
                                     "Bearer key the replicas of this pool require (\"\": none); prefer api_key_file or "
                                     "api_key_env, which keep it out of this file"));
    t.push_back(PoolKeyTable::String("api_key_file", "", [](P& p) -> std::string& { return p.api_key_file; }, "a file path or \"\"",
                                     "A file in the replicas' key-file format (server.api_key_file, e.g. a mounted Secret): its "
                                     "first key is sent; re-read on SIGHUP"));
    t.push_back(PoolKeyTable::String("api_key_env", "", [](P& p) -> std::string& { return p.api_key_env; },
                                     "an environment variable name or \"\"",
                                     "Environment variable holding the replicas' key"));
    t.push_back(PoolKeyTable::String("tls_ca_file", "", [](P& p) -> std::string& { return p.tls_ca_file; }, "a file path or \"\"",
                                     "https replicas: PEM CA certificates their certificates must chain to (and name the URL's "
                                     "host); \"\": the system's store"));
    t.push_back(PoolKeyTable::Enum("routing", "", [](P& p) -> std::string& { return p.routing; },
                                   {kRoutingPolicyNames.begin(), kRoutingPolicyNames.end()},
                                   "How a replica is picked: round_robin; least_load (fewest outstanding tokens per weight); "
                                   "cache_aware (fewest uncached prompt tokens + outstanding tokens, from the replicas' "
                                   "published prefix-cache blocks)"));
    t.push_back(PoolKeyTable::Enum("on_overflow", "", [](P& p) -> std::string& { return p.on_overflow; },
                                   {std::string(kOverflowReject), std::string(kOverflowTruncateOldestTurns),
                                    std::string(kOverflowTruncateMiddle)},
                                   "A prompt too long for every pool, when this pool has the longest context: reject (400 "
                                   "context_length_exceeded); truncate_oldest_turns (drop the oldest turns after the system "
                                   "messages, the fewest that fit); truncate_middle (cut tokens from the middle of the longest "
                                   "text). A truncated answer carries X-Kvserve-Truncated-Prompt-Tokens and "
                                   "usage.truncated_prompt_tokens"));
    t.push_back(PoolKeyTable::Bool("clean_content", "", [](P& p) -> bool& { return p.clean_content; },
                                   "Remove invisible and control characters (zero-width, bidi controls, tag characters, C0/C1 "
                                   "controls but tab and newlines) from the prompts of requests routed here"));
    t.push_back(PoolKeyTable::Number("max_kv_usage", "", [](P& p) -> double& { return p.max_kv_usage; }, 0, true, 1,
                                     "Replicas whose KV use (scraped) is at or above this fraction get no new requests while "
                                     "another replica is below it (1: no limit)"));
    t.push_back(PoolKeyTable::Int("max_queue", "", [](P& p) -> int64_t& { return p.max_queue; }, 0, 1 << 20,
                                  "Replicas with this many requests waiting (scraped) get no new requests while another has "
                                  "fewer (0: no limit)"));
    t.push_back(PoolKeyTable::Int("max_requests_per_replica", "", [](P& p) -> int64_t& { return p.max_requests_per_replica; }, 0,
                                  1 << 20,
                                  "When every available replica has this many requests in flight, further requests wait in "
                                  "the gateway, served by weighted fair queueing across tenants (key file weight); 0: never wait"));
    t.push_back(PoolKeyTable::Int("max_queued_requests", "", [](P& p) -> int64_t& { return p.max_queued_requests; }, 1, 1 << 20,
                                  "Requests that may wait for the pool; more get 503"));
    t.push_back(PoolKeyTable::Number("queue_timeout_seconds", "", [](P& p) -> double& { return p.queue_timeout_seconds; }, 0, true,
                                     86400, "A request that waited this long for a replica gets 503 queue_timeout"));
    t.push_back(PoolKeyTable::Number("slow_start_seconds", "", [](P& p) -> double& { return p.slow_start_seconds; }, 0, false, 3600,
                                     "A replica that becomes ready (start-up of the replica, re-admission) gets 10 % of its weight, "
                                     "ramping linearly to all of it over this time, so a cold replica is not flooded; 0: off"));
    t.push_back(PoolKeyTable::String("warm_prompts_file", "", [](P& p) -> std::string& { return p.warm_prompts_file; },
                                     "a file path or \"\"",
                                     "Prompts replayed (max_tokens 1) to a replica that joins the pool (start-up, re-admission) "
                                     "before it takes traffic, so its prefix cache is warm: one per line, plain text, "
                                     "{\"prompt\": ...} or {\"messages\": [...]} (kvserve serve's warm_prompts_file format); "
                                     "\"\": none"));
    t.push_back(PoolKeyTable::Number("warm_timeout_seconds", "", [](P& p) -> double& { return p.warm_timeout_seconds; }, 0, true,
                                     3600,
                                     "The longest a joining replica is held out of routing for its warm-up; then it takes traffic "
                                     "with what was replayed"));
    t.push_back(PoolKeyTable::Int("warm_concurrency", "", [](P& p) -> int64_t& { return p.warm_concurrency; }, 1, 64,
                                  "Warm prompts replayed to one replica at a time"));
    t.push_back(PoolKeyTable::Number("routed_prefix_ttl_seconds", "", [](P& p) -> double& { return p.routed_prefix_ttl_seconds; },
                                     0, true, 86400,
                                     "cache_aware: how long a prefix the gateway itself sent to a replica is assumed cached there "
                                     "(the fallback when the replica's index is stale or missing)"));
    t.push_back(PoolKeyTable::String("canary_version", "", [](P& p) -> std::string& { return p.canary_version; },
                                     "a replica version or \"\"",
                                     "The version (replicas[].version) that gets canary_weight percent of the traffic; \"\": none"));
    t.push_back(PoolKeyTable::Number("canary_weight", "", [](P& p) -> double& { return p.canary_weight; }, 0, false, 100,
                                     "Percent of sticky keys sent to canary_version (reloaded on SIGHUP; 0: roll back)"));
    t.push_back(PoolKeyTable::String("sticky_header", "", [](P& p) -> std::string& { return p.sticky_header; },
                                     "a header name or \"\"",
                                     "Requests with the same value of this header (e.g. X-Session-Id) get the same version; \"\" "
                                     "or absent: the same tenant gets the same version"));
    t.push_back(PoolKeyTable::Number("canary_max_error_rate_margin", "",
                                     [](P& p) -> double& { return p.canary_max_error_rate_margin; }, 0, false, 1,
                                     "Automatic rollback (canary_weight 0) when the canary's attempt error rate exceeds the stable "
                                     "version's by more than this over canary_window_seconds; 0: never"));
    t.push_back(PoolKeyTable::Number("canary_window_seconds", "", [](P& p) -> double& { return p.canary_window_seconds; }, 0, true,
                                     86400, "The window the canary's and the stable version's error rates are compared over"));
    t.push_back(PoolKeyTable::Int("canary_min_requests", "", [](P& p) -> int64_t& { return p.canary_min_requests; }, 1, 1 << 20,
                                  "Canary attempts in the window before an automatic rollback can happen"));
    return PoolKeyTable(std::move(t));
  }();
  return table;
}

// A replica's value: a single scalar (quoted strings are not numbers).
Status ScalarOf(const YAML::Node& n, const std::string& name, RawValue* out) {
  *out = frontend::FromYaml(n);
  if (!out->is_text()) {
    return InvalidArgument("{}: expected a single value, got {}", name, frontend::Describe(*out));
  }
  return Status::Ok();
}

// A replicas_dns address: NAME:PORT or http://NAME:PORT, kept as the latter.
std::string DnsUrl(const std::string& address) {
  return address.find("://") == std::string::npos ? "http://" + address : address;
}

// A replica (dns: a replicas_dns entry, whose location key is `address`).
Status LoadReplica(const YAML::Node& n, const std::string& where, bool dns, ReplicaConfig* r) {
  const char* location = dns ? "address" : "url";
  if (n.IsScalar()) {
    r->url = dns ? DnsUrl(n.Scalar()) : n.Scalar();
    return Status::Ok();
  }
  if (!n.IsMap()) {
    return InvalidArgument("{}: expected a mapping ({}, weight, version) or {}", where, location,
                           dns ? "an address NAME:PORT" : "a URL");
  }
  for (const auto& kv : n) {
    const std::string k = kv.first.Scalar();
    RawValue v;
    KVS_RETURN_IF_ERROR(ScalarOf(kv.second, where + "." + k, &v));
    if (k == location) {
      r->url = dns ? DnsUrl(v.text) : v.text;
    } else if (k == "weight") {
      double w = 0;
      auto [p, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), w);
      if (v.kind != RawValue::kScalar || ec != std::errc() || p != v.text.data() + v.text.size() || !(w > 0) || w > 1e6) {
        return InvalidArgument("{}.weight: expected a number in (0, 1000000], got \"{}\"", where, v.text);
      }
      r->weight = w;
    } else if (k == "version") {
      const bool ok = !v.text.empty() && v.text.size() <= 64 &&
                      std::all_of(v.text.begin(), v.text.end(), [](char c) {
                        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
                      });
      if (!ok) return InvalidArgument("{}.version: expected 1-64 letters, digits, '.', '_' or '-', got \"{}\"", where, v.text);
      r->version = v.text;
    } else if (k == "fault_rate") {
      double f = -1;
      auto [p, ec] = std::from_chars(v.text.data(), v.text.data() + v.text.size(), f);
      if (v.kind != RawValue::kScalar || ec != std::errc() || p != v.text.data() + v.text.size() || !(f >= 0) || f > 1) {
        return InvalidArgument("{}.fault_rate: expected a number in [0, 1], got \"{}\"", where, v.text);
      }
      r->fault_rate = f;
    } else {
      return InvalidArgument("{}: unknown key \"{}\"; keys of a replica are: {}, weight, version, fault_rate", where, k,
                             location);
    }
  }
  return Status::Ok();
}

Status LoadPool(const YAML::Node& n, size_t index, PoolConfig* p) {
  std::string where = fmt::format("pools[{}]", index);
  if (!n.IsMap()) return InvalidArgument("{}: expected a mapping with name, max_context, replicas, ...", where);
  if (n["name"] && n["name"].IsScalar()) where += fmt::format(" ({})", n["name"].Scalar());
  std::set<std::string> seen;
  for (const auto& kv : n) {
    const std::string k = kv.first.Scalar();
    if (!seen.insert(k).second) return InvalidArgument("{}: key \"{}\" appears twice", where, k);
    if (k == "replicas" || k == "replicas_dns") {
      if (!kv.second.IsSequence()) return InvalidArgument("{}.{}: expected a list", where, k);
      for (size_t i = 0; i < kv.second.size(); ++i) {
        ReplicaConfig r;
        KVS_RETURN_IF_ERROR(LoadReplica(kv.second[i], fmt::format("{}.{}[{}]", where, k, i), k == "replicas_dns", &r));
        (k == "replicas" ? p->replicas : p->replicas_dns).push_back(std::move(r));
      }
      continue;
    }
    const PoolKeyTable::Key* key = PoolKeys().FindName(k);
    if (!key) {
      return InvalidArgument("{}: unknown key \"{}\"{}; keys of a pool are: {}, replicas, replicas_dns", where, k,
                             PoolKeys().Suggest(k), PoolKeys().Names(""));
    }
    const RawValue v = frontend::FromYaml(kv.second);
    if (v.kind == RawValue::kNull) continue;
    KVS_RETURN_IF_ERROR(key->set(*p, v).WithContext(where));
  }
  return Status::Ok();
}

}  // namespace

const std::vector<GatewayKeyInfo>& GatewayConfigKeys() {
  static const std::vector<GatewayKeyInfo> keys = [] {
    std::vector<GatewayKeyInfo> out = Scalars().Infos(GatewayConfig{});
    for (GatewayKeyInfo& k : PoolKeys().Infos(PoolConfig{}, "pools[].", /*options=*/false)) out.push_back(std::move(k));
    out.push_back({"pools[].replicas", "", "list", "{url, weight, version, fault_rate} mappings or URLs", "[]",
                   "The pool's replicas: url http://HOST:PORT or https://HOST:PORT (verified with tls_ca_file), weight (0, 1000000] (default 1), version (release "
                   "label, default stable), fault_rate [0, 1] (drills: that fraction of attempts fails in the "
                   "gateway; default 0)", /*option=*/false});
    out.push_back({"pools[].replicas_dns", "", "list", "{address, weight, version} mappings or NAME:PORT", "[]",
                   "Replicas found in DNS: each NAME:PORT (a Kubernetes headless Service) is resolved at start and "
                   "every gateway.dns_refresh_seconds, and every address it resolves to is a replica (http) with the "
                   "entry's weight and version; addresses that leave the name leave the pool", /*option=*/false});
    return out;
  }();
  return keys;
}

Status LoadGatewayConfigYaml(std::string_view yaml, GatewayConfig* cfg) {
  KVS_ASSIGN_OR_RETURN(const YAML::Node root, frontend::ParseYaml(yaml));
  if (root.IsNull()) return Status::Ok();
  if (!root.IsMap()) return InvalidArgument("the configuration must be a mapping (gateway, model, logging, pools)");
  std::set<std::string> seen;
  for (const auto& sec : root) {
    const std::string section = sec.first.Scalar();
    if (!seen.insert(section).second) return InvalidArgument("section \"{}\" appears twice", section);
    if (section == "pools") {
      if (sec.second.IsNull()) continue;
      if (!sec.second.IsSequence()) return InvalidArgument("pools: expected a list of pools");
      cfg->pools.clear();
      for (size_t i = 0; i < sec.second.size(); ++i) {
        PoolConfig p;
        KVS_RETURN_IF_ERROR(LoadPool(sec.second[i], i, &p));
        cfg->pools.push_back(std::move(p));
      }
      continue;
    }
    if (section != "gateway" && section != "model" && section != "logging") {
      return InvalidArgument("unknown section \"{}\"{}; sections are gateway, model, logging, pools", section,
                             Scalars().Suggest(section));
    }
    KVS_RETURN_IF_ERROR(Scalars().LoadSection(section, sec.second, cfg));
  }
  return Status::Ok();
}

Status LoadGatewayConfigFile(const std::string& path, GatewayConfig* cfg) {
  KVS_ASSIGN_OR_RETURN(const std::string text, frontend::ReadConfigFile(path));
  return LoadGatewayConfigYaml(text, cfg).WithContext(path);
}

Status ApplyGatewayOverrides(const std::vector<std::string>& args, GatewayConfig* cfg) {
  for (size_t i = 0; i < args.size(); ++i) {
    std::string_view a = args[i];
    if (a.size() <= 2 || a.substr(0, 2) != "--") {
      return InvalidArgument("unexpected argument \"{}\"; overrides look like --gateway.port 8081", a);
    }
    std::string name(a.substr(2));
    std::string value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else {
      if (i + 1 >= args.size()) return InvalidArgument("option --{} needs a value", name);
      value = args[++i];
    }
    KVS_RETURN_IF_ERROR(
        Scalars().SetOption(cfg, name, value, "`kvserve gateway --help` lists them (pools are set in the file)"));
  }
  return Status::Ok();
}

Status ValidateGatewayConfig(const GatewayConfig& cfg) {
  if (cfg.pools.empty()) return InvalidArgument("pools: at least one pool is required");
  std::set<std::string> names, urls;
  for (size_t i = 0; i < cfg.pools.size(); ++i) {
    const PoolConfig& p = cfg.pools[i];
    const std::string where = fmt::format("pools[{}]{}", i, p.name.empty() ? "" : " (" + p.name + ")");
    if (p.name.empty()) return InvalidArgument("{}: name is required", where);
    if (!names.insert(p.name).second) return InvalidArgument("{}: the pool name \"{}\" is used twice", where, p.name);
    if (p.max_context <= 0) return InvalidArgument("{}: max_context is required", where);
    if (p.replicas.empty() && p.replicas_dns.empty()) {
      return InvalidArgument("{}: replicas: at least one replica (or a replicas_dns name) is required", where);
    }
    if (p.replicas.size() > 1024) return InvalidArgument("{}: replicas: at most 1024 are allowed", where);
    for (size_t r = 0; r < p.replicas_dns.size(); ++r) {
      auto u = http::Url::Parse(p.replicas_dns[r].url);
      if (!u.ok()) return InvalidArgument("{}.replicas_dns[{}]: {}", where, r, u.status().message());
      if (u->tls || !u->base_path.empty()) {
        return InvalidArgument("{}.replicas_dns[{}]: expected NAME:PORT (plain http; https replicas are verified "
                               "against their names: list them under replicas)",
                               where, r);
      }
      if (!urls.insert(u->ToString()).second) {
        return InvalidArgument("{}.replicas_dns[{}]: {} is listed twice", where, r, u->HostPort());
      }
    }
    for (size_t r = 0; r < p.replicas.size(); ++r) {
      auto u = http::Url::Parse(p.replicas[r].url);
      if (!u.ok()) return InvalidArgument("{}.replicas[{}].url: {}", where, r, u.status().message());
      if (!urls.insert(u->ToString()).second) {
        return InvalidArgument("{}.replicas[{}].url: {} is listed twice", where, r, u->ToString());
      }
    }
    if (!p.warm_prompts_file.empty()) {
      auto prompts = LoadWarmPrompts(p.warm_prompts_file, cfg.gateway.prefix_cache_scope == "tenant");
      if (!prompts.ok()) return InvalidArgument("{}.warm_prompts_file: {}", where, prompts.status().message());
    }
    if (!p.canary_version.empty()) {
      size_t canary = 0;
      for (const auto& r : p.replicas) canary += r.version == p.canary_version ? 1 : 0;
      for (const auto& r : p.replicas_dns) canary += r.version == p.canary_version ? 1 : 0;
      if (canary == 0 || canary == p.replicas.size() + p.replicas_dns.size()) {
        return InvalidArgument("{}: canary_version \"{}\" needs at least one replica of that version and one of "
                               "another (replicas or replicas_dns entries)",
                               where, p.canary_version);
      }
    }
  }
  if (cfg.gateway.tls_cert_file.empty() != cfg.gateway.tls_key_file.empty()) {
    return InvalidArgument("{}: HTTPS needs both gateway.tls_cert_file and gateway.tls_key_file",
                           cfg.gateway.tls_cert_file.empty() ? "gateway.tls_cert_file" : "gateway.tls_key_file");
  }
  if (!cfg.gateway.shared_state_tls_ca_file.empty() && cfg.gateway.shared_state.rfind("rediss://", 0) != 0) {
    return InvalidArgument("gateway.shared_state_tls_ca_file: only used with a rediss:// shared_state");
  }
  if (!cfg.gateway.shared_state_password_env.empty() && cfg.gateway.shared_state.empty()) {
    return InvalidArgument("gateway.shared_state_password_env: only used with a Redis shared_state");
  }
  if (cfg.gateway.key_file.empty() && !cfg.gateway.allow_anonymous) {
    return InvalidArgument(
        "gateway.key_file is required (create one with `kvserve gateway keys add --file FILE --tenant NAME`); "
        "set gateway.allow_anonymous: true to serve without authentication");
  }
  return Status::Ok();
}

Status ResolveGatewaySecrets(GatewayConfig* cfg) {
  for (size_t i = 0; i < cfg->pools.size(); ++i) {
    PoolConfig& p = cfg->pools[i];
    const std::string where = fmt::format("pools[{}] ({})", i, p.name);
    const int given = (p.api_key.empty() ? 0 : 1) + (p.api_key_file.empty() ? 0 : 1) + (p.api_key_env.empty() ? 0 : 1);
    if (given > 1) return InvalidArgument("{}: give at most one of api_key, api_key_file, api_key_env", where);
    if (!p.api_key_file.empty()) {
      // The replicas' key-file format; the first key is the one sent.
      auto keys = ReadApiKeyFile(p.api_key_file);
      if (!keys.ok()) return keys.status().WithContext(where + ".api_key_file");
      p.api_key = keys->front();
    } else if (!p.api_key_env.empty()) {
      const char* v = std::getenv(p.api_key_env.c_str());
      if (!v || !*v) return NotFound("{}.api_key_env: the environment variable {} is not set", where, p.api_key_env);
      p.api_key = v;
    }
  }
  return Status::Ok();
}

nlohmann::json GatewayConfigToJson(const GatewayConfig& cfg) {
  nlohmann::json j = Scalars().ToJson(cfg);
  if (auto redis = RedisAddress::Parse(cfg.gateway.shared_state); redis.ok()) {
    j["gateway"]["shared_state"] = redis->Redacted();
  }
  j["pools"] = nlohmann::json::array();
  for (const auto& p : cfg.pools) {
    nlohmann::json pj = PoolKeys().ToJson(p);
    if (!p.api_key.empty()) pj["api_key"] = "<redacted>";
    pj["replicas"] = nlohmann::json::array();
    for (const auto& r : p.replicas) {
      pj["replicas"].push_back({{"url", r.url}, {"weight", r.weight}, {"version", r.version}, {"fault_rate", r.fault_rate}});
    }
    j["pools"].push_back(std::move(pj));
  }
  return j;
}

std::string GatewayConfigHelp() {
  return frontend::KeyHelp("Configuration keys (override the scalar ones with --section.key VALUE or the alias):",
                           GatewayConfigKeys());
}

}  // namespace kvs::gateway
