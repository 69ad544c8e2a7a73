// FakeUpstream: a fake-fast kvserve replica for gateway benchmarks (test
// support; never in the kvserve binary). An HttpServer on a loopback port
// that answers /ready, /health, /metrics (an idle replica), /v1/models (one
// model, "fake") and completions: at once, or when streaming with one event
// per token_interval_ms (0: all at once), then a usage chunk and [DONE].
// Thread-safety: serves on the HttpServer's threads; Start before use.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "http/http_server.h"

namespace kvs::gateway::testing {

struct FakeUpstreamOptions {
  int tokens = 50;                 // events of a stream
  double token_interval_ms = 5;    // between a stream's events
};

class FakeUpstream {
 public:
  explicit FakeUpstream(FakeUpstreamOptions options) : options_(options), server_(http::ServerOptions{}) {}
  Status Start() {
    return server_.Start([this](std::shared_ptr<http::Exchange> ex) { Handle(std::move(ex)); });
  }
  uint16_t port() const { return server_.port(); }

 private:
  void Handle(std::shared_ptr<http::Exchange> ex);
  void Stream(std::shared_ptr<http::Exchange> ex);

  const FakeUpstreamOptions options_;
  http::HttpServer server_;
};

}  // namespace kvs::gateway::testing
