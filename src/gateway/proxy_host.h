// ProxyHost: what the proxy (proxy.h, proxy_request.h) uses of the gateway
// that runs it: the configuration, metrics and audit log, the pools, the
// upstream client, the rate limits, the prompt counter, the prep pool, the
// in-flight count and the client's address. The Gateway implements it.
// Why an interface: the Gateway starts the proxy (gateway.cc calls
// StartProxy) and the proxy uses the Gateway's parts; with the proxy
// depending on this header instead of gateway.h the two are no longer one
// circle of components (tools/check_layers.py), and the proxy's whole
// dependence on its gateway is the list below.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <string>

#include "gateway/config.h"
#include "gateway/gateway_metrics.h"
#include "gateway/limits.h"
#include "gateway/prompt_counter.h"
#include "gateway/router.h"
#include "frontend/work_queue.h"
#include "http/http_client.h"
#include "http/http_server.h"

namespace kvs::gateway {

class ProxyHost {
 public:
  virtual ~ProxyHost() = default;

  virtual const GatewayConfig& config() const = 0;
  virtual GatewayMetrics& metrics() = 0;
  virtual Router& router() = 0;
  virtual http::HttpClient& client() = 0;
  virtual RateLimiter& limiter() = 0;
  virtual AuditLog& audit() = 0;
  virtual const PromptCounter& counter() const = 0;
  virtual frontend::WorkQueue& prep() = 0;
  // A tenant refused for its request rate is refused again, before its
  // next bodies are parsed, until the refusal's Retry-After has passed.
  virtual void RememberRefusal(const std::string& tenant, const AdmitResult& r) = 0;
  // Every proxied request, from StartProxy to its end (draining waits for 0).
  virtual void RequestStarted() = 0;
  virtual void RequestEnded() = 0;
  // "IP:PORT" of the peer, or the address a trusted proxy forwarded; and the
  // address alone (X-Forwarded-For upstream).
  virtual std::string ClientAddress(const http::Exchange& ex) const = 0;
  virtual std::string ClientIp(const http::Exchange& ex) const = 0;
  // The pool's canary was just rolled back (Canary::Record): recorded so that
  // reloads and restarts keep it at weight 0.
  virtual void CanaryRolledBack(Pool& pool) = 0;
};

}  // namespace kvs::gateway
