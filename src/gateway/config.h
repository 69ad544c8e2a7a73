// GatewayConfig: everything `kvserve gateway` can be told, from one YAML file
// (sections gateway, model, logging, and the list pools) and from
// command-line overrides of the scalar keys ("--gateway.port 8081",
// "--port 8081").
//
// The same conventions as `kvserve serve` (server/config.h), on the same
// frontend::KeyTable: built-in defaults < YAML file < command line; every
// key is declared once in a table (config.cc) with its type, range, default
// and help, which loading, overriding, --help and configs/gateway.yaml all
// follow; an unknown key (with a near one suggested), a value of the wrong
// type or out of range is an InvalidArgument naming the key (with the pool's
// index and name for pool keys).
// Thread-safety: plain values; the functions are pure apart from reading files.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "frontend/key_info.h"
#include "gateway/routing_names.h"

namespace kvs::gateway {

struct ReplicaConfig {
  std::string url;    // http://HOST:PORT of a `kvserve serve` replica
  double weight = 1;  // share of load relative to the pool's other replicas
  std::string version = "stable";  // release label (canary routing, metrics, audit)
  double fault_rate = 0;  // drills and tests: this fraction of attempts fails in the gateway as a 503 would
  bool operator==(const ReplicaConfig&) const = default;
};

struct PoolConfig {
  std::string name;
  int64_t max_context = 0;          // tokens (prompt + max_tokens) a request may need here; required
  int64_t default_max_tokens = 512; // chat requests without max_tokens get (and are charged) this
  double connect_timeout_seconds = 2;
  double first_token_timeout_seconds = 30;  // streams: until the first token event
  double total_timeout_seconds = 600;
  int64_t max_retries = 2;          // further replicas tried when an attempt fails before any byte reached the client
  std::string api_key;              // sent to the replicas as the Bearer key ("" : none)
  std::vector<ReplicaConfig> replicas;
  // Replicas found in DNS (discovery.h): each entry's url is http://NAME:PORT,
  // a name (a Kubernetes headless Service) resolved at start and every
  // gateway.dns_refresh_seconds; every address it resolves to is a replica
  // with the entry's weight and version (one per ready pod).
  std::vector<ReplicaConfig> replicas_dns{};
  // The same key kept out of the configuration file (a Kubernetes Secret
  // mounted as a file or passed in the environment): the first key of a file
  // in the replicas' key-file format (ReadApiKeyFile: their
  // server.api_key_file can be shared), or the named variable's value. At most one
  // of api_key, api_key_file, api_key_env; ResolveGatewaySecrets reads them
  // into api_key (at start and on SIGHUP: rotation without a restart).
  std::string api_key_file{};
  std::string api_key_env{};
  // Routing within the pool (routing.h): round_robin, least_load, cache_aware.
  std::string routing = kLeastLoad;
  double max_kv_usage = 0.9;        // replicas whose scraped KV use is at or above it are skipped (1: never)
  int64_t max_queue = 0;            // replicas with this many requests waiting are skipped (0: no limit)
  // Queueing in the gateway (fair_queue.h): when every available replica has
  // this many requests in flight from this gateway, requests wait in a
  // weighted fair queue across tenants. 0: never (send to the cheapest).
  int64_t max_requests_per_replica = 0;
  int64_t max_queued_requests = 1024;  // more waiting get 503
  double queue_timeout_seconds = 30;   // waited this long: 503
  double slow_start_seconds = 0;    // a replica (re)joining ramps from 10 % to its full weight over this; 0: off
  // Warm-up of a joining replica (warmup.h): prompts replayed to it before it
  // takes traffic, at most warm_concurrency at a time, for at most
  // warm_timeout_seconds.
  std::string warm_prompts_file{};  // "" : no warm-up
  double warm_timeout_seconds = 30;
  int64_t warm_concurrency = 2;
  double routed_prefix_ttl_seconds = 300;  // cache_aware: how long the gateway's own routing record counts
  // Canary release (canary.h): replicas whose version is canary_version get
  // canary_weight percent of the sticky keys (tenant, or sticky_header's value).
  std::string canary_version{};     // "" : no canary
  double canary_weight = 0;         // percent of traffic, [0, 100]; reloadable
  std::string sticky_header{};      // "" : sticky per tenant; else e.g. X-Session-Id
  double canary_max_error_rate_margin = 0;  // roll back (weight 0) when canary errors exceed stable's by this; 0: off
  double canary_window_seconds = 60;
  int64_t canary_min_requests = 20;  // canary attempts in the window before it can be judged
  std::string tls_ca_file{};        // https replicas: PEM CAs their certificates must chain to ("": the system's)
  // A prompt too long for every pool (context_policy.h), by the policy of
  // the pool with the longest context: reject, truncate_oldest_turns or
  // truncate_middle. clean_content: invisible and control characters are
  // removed from the prompts of requests routed here.
  std::string on_overflow = "reject";
  bool clean_content = false;
};

struct GatewaySection {
  std::string host = "127.0.0.1";
  int64_t port = 8080;
  int64_t io_threads = 2;         // client-facing HTTP threads
  int64_t upstream_threads = 2;   // HTTP client threads (replica connections)
  int64_t prep_threads = 2;       // parsing, tokenization and admission
  int64_t prep_queue = 256;       // requests waiting for a prep thread; more get 503
  int64_t max_body_bytes = int64_t{32} << 20;
  // A non-streaming answer is held whole (to read its usage) up to this;
  // a larger one is relayed as it arrives, its usage read from its end.
  int64_t max_response_buffer_bytes = int64_t{64} << 20;
  int64_t max_connections = 4096;           // open client connections; beyond: 503 and closed (0: no limit)
  int64_t max_connections_per_client = 256; // per remote address; beyond: 429 (0: no limit)
  // The admin listener: /metrics, /status and the status page, which name
  // tenants, replicas and files, are served here and not on the public port.
  // Load balancers allowed to name the client in X-Forwarded-For
  // (client_address.h): addresses and CIDR ranges, comma-separated.
  std::string trusted_proxies;
  std::string admin_host = "127.0.0.1";
  int64_t admin_port = 9180;                // 0 picks a free one (the log line "admin listening on" says which)
  double keep_alive_timeout_seconds = 60;
  double drain_timeout_seconds = 30;
  // Who shares prefix-cache blocks on the replicas: "tenant" (each
  // tenant its own namespace: the gateway folds the tenant into the
  // request's cache_salt, which clients cannot override) or "shared" (every
  // tenant of this gateway shares one cache: e.g. a common system prompt;
  // timing can then tell one tenant what another sent).
  std::string prefix_cache_scope = "tenant";

  std::string key_file;           // tenants and their key digests (`kvserve gateway keys`)
  std::string state_file{};       // what the gateway decided and must remember (canary rollbacks); "": none
  bool allow_anonymous = false;   // no key_file: serve without authentication (tests, trusted networks)
  double key_file_poll_seconds = 1;
  double rate_limit_per_second = 0;  // all tenants together; 0: no limit
  // HTTPS on the public listener: both set (PEM chain and key); both "": HTTP.
  // Reloaded on SIGHUP and when either file changes (key_file_poll_seconds).
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string shared_state;       // "" (counters in this process), redis://[USER:PASSWORD@]HOST:PORT or rediss://...
  std::string shared_state_tls_ca_file;   // rediss: PEM CAs of Redis's certificate ("" : the system's)
  std::string shared_state_password_env;  // the Redis password from this environment variable ("" : from the URL)
  std::string shared_state_failure = "local";  // Redis unreachable: open, closed, local
  double shared_state_timeout_seconds = 0.25;
  double health_interval_seconds = 1;
  double dns_refresh_seconds = 5;  // pools[].replicas_dns names are resolved again this often
  int64_t eject_after_failures = 3;  // consecutive failed requests that take a replica out
  int64_t readmit_after_probes = 2;  // consecutive good /ready probes that bring it back
};

struct ModelSection {
  std::string path;  // GGUF whose tokenizer and chat template count prompt tokens ("": the bundled model)
  std::string chat_template;  // "": the GGUF's; else a built-in name or a .jinja file (the replicas' model.chat_template)
};

struct LoggingSection {
  std::string level = "info";
  std::string audit_log = "stdout";  // stdout, stderr, off, or a file path (appended)
  bool audit_prompts = false;        // include the prompt text in the audit log
};

struct GatewayConfig {
  GatewaySection gateway;
  ModelSection model;
  LoggingSection logging;
  std::vector<PoolConfig> pools;
};

// One documented key: "gateway.port" (alias "--port"), or "pools[].max_context"
// (not a command-line option).
using GatewayKeyInfo = frontend::KeyInfo;
const std::vector<GatewayKeyInfo>& GatewayConfigKeys();

Status LoadGatewayConfigFile(const std::string& path, GatewayConfig* cfg);
Status LoadGatewayConfigYaml(std::string_view yaml, GatewayConfig* cfg);
// "--key value", "--key=value", aliases; pool keys are not overridable.
Status ApplyGatewayOverrides(const std::vector<std::string>& args, GatewayConfig* cfg);
// Checks between keys: at least one pool, names unique, URLs parse, ...
Status ValidateGatewayConfig(const GatewayConfig& cfg);
// Reads each pool's api_key_file / api_key_env into its api_key (NotFound
// or InvalidArgument naming the pool and the file or variable).
Status ResolveGatewaySecrets(GatewayConfig* cfg);

nlohmann::json GatewayConfigToJson(const GatewayConfig& cfg);  // pool api keys redacted
std::string GatewayConfigHelp();

}  // namespace kvs::gateway
