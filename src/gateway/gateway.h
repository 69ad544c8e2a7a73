// Gateway: the HTTP handler and lifecycle of `kvserve gateway`.
//
// The public port serves the replicas' whole public API (api::PublicApiRoutes:
// completions, chat completions, /v1/responses, /v1/messages, /tokenize,
// /detokenize, the models list), so whatever works against a replica works
// through the gateway. For a generation request, in any dialect, in order:
// route (404/405), API key (401, from the header alone, before the body is
// read: a client without a key cannot make the gateway buffer a body;
// nothing reaches a replica without one), then on the prep
// pool (503 when its queue is full): parse and validate as the server does
// (400), count prompt tokens with the model's tokenizer and template, pick
// the pools that can hold prompt + max_tokens (400 with the counts when none
// can; 404 for a model no replica serves), admit against the rate limits
// (429 + Retry-After), then proxy (proxy.h) to a replica chosen by the
// routing policy; a replica that joins a pool with warm prompts gets them
// replayed before it takes traffic (warmup.h). /tokenize and /detokenize are
// admitted against the request limits only and proxied alike. Errors take
// the route's dialect's shape (Anthropic's on /v1/messages). /health, /ready
// (200 when every pool has an available replica) and the merged /v1/models
// are answered by the gateway itself.
// /metrics, the status page (GET /) and its JSON document (GET /status,
// status_board.h) name tenants, replicas and files: they are served only on
// the admin listener (gateway.admin_host/admin_port, loopback by default),
// with /health and /ready, never on the public port.
// Connections: gateway.max_connections in all, max_connections_per_client
// from one address (503 / 429 beyond, without reading the request).
//
// States: serving -> draining (SIGTERM: /ready and new requests get 503,
// in-flight ones get gateway.drain_timeout_seconds). SIGHUP reloads the key
// file (it is also polled for changes) and replica weights from the
// configuration file; open streams are not affected.
// Thread-safety: Handle runs on connection strands; the rest is thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <memory>
#include <mutex>
#include <string>

#include "base/file_stamp.h"
#include "frontend/work_queue.h"
#include "gateway/client_address.h"
#include "gateway/config.h"
#include "gateway/discovery.h"
#include "gateway/gateway_metrics.h"
#include "gateway/health.h"
#include "gateway/keys.h"
#include "gateway/limits.h"
#include "gateway/pool.h"
#include "gateway/prompt_counter.h"
#include "gateway/proxy_host.h"
#include "gateway/router.h"
#include "gateway/status_board.h"
#include "gateway/warmup.h"
#include "http/http_client.h"
#include "http/http_server.h"

namespace kvs::gateway {

class Gateway : public ProxyHost {
 public:
  // Everything built from the configuration; the Gateway owns it.
  struct Parts {
    std::unique_ptr<PromptCounter> counter;
    std::unique_ptr<Authenticator> auth;
    std::unique_ptr<RateLimiter> limiter;
    std::unique_ptr<AuditLog> audit;
    std::map<std::string, std::vector<WarmPrompt>> warm_prompts;  // pool -> its warm_prompts_file's prompts
  };
  static StatusOr<Parts> BuildParts(const GatewayConfig& cfg);

  Gateway(GatewayConfig cfg, Parts parts);
  ~Gateway() override;  // Stop()s

  // Starts the upstream client, the health checker (one probe round first)
  // and the HTTP server.
  Status Start();
  uint16_t port() const { return server_ ? server_->port() : 0; }
  uint16_t admin_port() const { return admin_ ? admin_->port() : 0; }
  void BeginDrain();
  bool draining() const { return draining_.load(); }
  int64_t in_flight() const { return in_flight_.load(); }
  void Stop();

  // Reloads the key file now (SIGHUP).
  Status ReloadKeys();
  // Re-reads gateway.tls_cert_file / tls_key_file for new connections (the
  // old pair stays on a failure; counted in tls_cert_reloads) and the pools'
  // CA files for new replica connections. Ok without TLS.
  Status ReloadTls();
  // Applies a re-read configuration (SIGHUP): replica weights take effect at
  // once (the path by which traffic is shifted without a restart); other
  // changes are reported as needing a restart. Returns what was not applied.
  std::vector<std::string> ReloadConfig(const GatewayConfig& fresh);

  void Handle(std::shared_ptr<http::Exchange> ex);       // the public listener
  void HandleAdmin(std::shared_ptr<http::Exchange> ex);  // the admin listener

  // ProxyHost: shared with the proxy (proxy_host.h).
  const GatewayConfig& config() const override { return cfg_; }
  GatewayMetrics& metrics() override { return metrics_; }
  Router& router() override { return *router_; }
  http::HttpClient& client() override { return *client_; }
  RateLimiter& limiter() override { return *parts_.limiter; }
  AuditLog& audit() override { return *parts_.audit; }
  const PromptCounter& counter() const override { return *parts_.counter; }
  frontend::WorkQueue& prep() override { return *prep_; }
  http::HttpServer* server() { return server_.get(); }
  // A tenant refused for its request rate (its own or the gateway's) is
  // refused again, before its next bodies are parsed or tokenized, until the
  // refusal's Retry-After has passed: a tenant over its rate pays for its
  // own flood, not the prep threads everyone shares. Thread-safe.
  void RememberRefusal(const std::string& tenant, const AdmitResult& r) override;
  std::optional<AdmitResult> RecentRefusal(const std::string& tenant) const;

  void RequestStarted() override { in_flight_.fetch_add(1); }
  void RequestEnded() override { in_flight_.fetch_sub(1); }
  void CanaryRolledBack(Pool& pool) override;

 private:
  // True when not draining and every pool has an available replica; fills
  // *pools (when given) with each pool's counts.
  bool Ready(nlohmann::json* pools) const;
  std::string StateName() const;  // ready, not_ready, draining
  // Sets the gauges read at scrape time (replica health and outstanding
  // tokens, ready, process figures): before /metrics, /status and a sample.
  void RefreshMetrics();
  void SampleStatus();  // every StatusBoard::kSampleSeconds until Stop
  void HandleReady(std::shared_ptr<http::Exchange> ex);
  void HandleMetrics(std::shared_ptr<http::Exchange> ex);
  void HandleStatusPage(std::shared_ptr<http::Exchange> ex);
  void HandleStatus(std::shared_ptr<http::Exchange> ex);
  void HandleModels(std::shared_ptr<http::Exchange> ex, const std::string& id);
  void WatchKeyFile();
  // The client's address: the TCP peer, or what a trusted proxy says
  // (gateway.trusted_proxies, client_address.h).
 public:
  std::string ClientAddress(const http::Exchange& ex) const override;  // "IP:PORT" of the peer, or the forwarded IP
  std::string ClientIp(const http::Exchange& ex) const override;       // the address alone (X-Forwarded-For upstream)

 private:
  void WatchTlsFiles();
  // A replica joined a pool (at start, or found in DNS later): its series
  // exported from 0 (and shown again if it had left), warm-up set up.
  void OnReplicaListed(Replica* r);
  // A replica left its pool (its address left the DNS name): its series hidden.
  void OnReplicaUnlisted(Replica* r);
  // gateway.state_file: the canary rollbacks ({"canary_rolled_back": {POOL:
  // VERSION}}), read at start (a pool whose canary_version was rolled back
  // starts at weight 0) and written (atomically) at each rollback.
  void RestoreState();
  void SaveState();
  std::pair<std::optional<FileStamp>, std::optional<FileStamp>> TlsStamp() const;  // the certificate's and key's  // every key_file_poll_seconds: ReloadTls when either file changed
  // The public listener's header check (http::ServerOptions::header_check):
  // 401 for a request to an authenticated route without a valid key.
  int CheckHeader(const http::HttpRequest& head, std::string* message) const;

  GatewayConfig cfg_;
  Parts parts_;
  GatewayMetrics metrics_;
  StatusBoard status_board_;
  std::unique_ptr<Router> router_;
  std::unique_ptr<http::HttpClient> client_;
  std::unique_ptr<Warmer> warmer_;
  std::unique_ptr<HealthChecker> health_;
  std::unique_ptr<ReplicaDiscovery> discovery_;  // pools' replicas_dns
  std::unique_ptr<frontend::WorkQueue> prep_;
  std::unique_ptr<http::HttpServer> server_;
  std::unique_ptr<http::HttpServer> admin_;
  TrustedProxies trusted_proxies_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<bool> stopped_{false};
  mutable std::mutex refusals_mu_;
  std::map<std::string, std::pair<std::chrono::steady_clock::time_point, AdmitResult>> refusals_;  // tenant -> until
  std::mutex state_mu_;  // serializes SaveState
  std::mutex tls_mu_;
  // Guarded by tls_mu_: the certificate's and key's stamps at the last (tried) load.
  std::pair<std::optional<FileStamp>, std::optional<FileStamp>> tls_stamp_;
};

// `kvserve gateway`: builds, starts, serves until SIGTERM/SIGINT, drains.
// Returns the process exit code (0 after a drain, 1 when the port or the
// model cannot be used, 2 for bad configuration).
// reload: re-reads the configuration on SIGHUP (nullptr: keys only).
int RunGateway(const GatewayConfig& cfg, std::function<StatusOr<GatewayConfig>()> reload = nullptr);

}  // namespace kvs::gateway
