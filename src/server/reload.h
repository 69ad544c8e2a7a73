// ConfigReloader: what SIGHUP (and a change of server.api_key_file) changes
// in a running `kvserve serve`.
//
// It holds the configuration as applied. OnSighup reads the configuration
// again (the same file and command line) and applies every changed key that
// can change live, logging each change ("SIGHUP: KEY OLD -> NEW"); every
// other changed key is logged as needing a restart and stays as it was:
//   logging.level;
//   the API keys: server.api_keys, server.api_keys_env (and the key file,
//     re-read at every reload; its path takes a restart);
//   the HTTP limits: server.max_body_bytes, max_connections,
//     max_connections_per_client, keep_alive_timeout_seconds,
//     header_timeout_seconds (next connection, request or idle wait);
//   the request limits: runtime.request_timeout_seconds, and
//     runtime.max_concurrent_requests down to 1 and back up to the value the
//     server started with (the KV plan and the engine queue are sized for
//     that; higher takes a restart).
// A configuration that does not load changes nothing. Keys that fail to load
// keep the keys in force (kvserve:api_key_reloads_total{outcome="failed"}).
// Thread-safety: thread-safe (SIGHUP and the key-file poll run on io threads).
#pragma once

#include <functional>
#include <mutex>

#include "base/status.h"
#include "server/config.h"

namespace kvs::http {
class HttpServer;
}

namespace kvs::server {

class Service;
struct ServerMetrics;

class ConfigReloader {
 public:
  // All must outlive the reloader; server must be started.
  ConfigReloader(const ServeConfig& started, Service* service, http::HttpServer* server, ServerMetrics* metrics);

  // reread: the configuration read again; null re-reads the keys only.
  void OnSighup(const std::function<StatusOr<ServeConfig>()>& reread);
  // The API keys read again from the applied configuration; why: for the log.
  void ReloadKeys(const char* why);

 private:
  void ApplyLocked(const ServeConfig& fresh);  // REQUIRES: mu_ held
  void ReloadKeysLocked(const char* why);      // REQUIRES: mu_ held

  const int64_t started_max_concurrent_requests_;
  Service* const service_;
  http::HttpServer* const server_;
  ServerMetrics* const metrics_;
  std::mutex mu_;
  ServeConfig applied_;  // guarded by mu_
};

}  // namespace kvs::server
