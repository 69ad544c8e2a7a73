// gateway_bench: what the gateway adds, measured in one run on this machine.
//
//   gateway_bench --model models/kvserve-tiny.gguf [--requests 2000] [--streams 40] [--tokens 50]
//                 [--token-interval-ms 5] [--concurrency 32] [--seconds 5]
//
// A fake-fast upstream (testing/fake_upstream.h: an HttpServer in this
// process that answers like a kvserve replica, instantly or with a fixed
// inter-token interval; test support, not part of the kvserve binary) is reached directly and through
// an in-process Gateway (anonymous, local limits), alternately, by the same
// HttpClient:
//   1. added latency of small non-streaming requests (p50, p99), one at a time;
//   2. added inter-token latency of streams (gap between consecutive events
//      at the client, direct vs through the gateway);
//   3. requests/s sustained through the gateway at a fixed concurrency.
// Prints a Markdown table for docs/benchmarks.md.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <mutex>
#include <thread>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gateway/gateway.h"
#include "gateway/testing/fake_upstream.h"
#include "http/http_client.h"
#include "http/http_server.h"
#include "http/sse.h"
#include "http/sse_parser.h"

namespace kvs::gateway {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string model;
  int requests = 2000;
  int streams = 40;
  int tokens = 50;
  double token_interval_ms = 5;
  int concurrency = 32;
  double seconds = 5;
};

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

http::ClientRequest Completion(bool stream) {
  http::ClientRequest r;
  r.method = "POST";
  r.target = "/v1/completions";
  r.headers = {{"Content-Type", "application/json"}};
  r.body = stream ? R"({"model":"fake","prompt":"Once upon a time","max_tokens":64,"stream":true})"
                  : R"({"model":"fake","prompt":"Once upon a time","max_tokens":1})";
  r.timeouts.total = std::chrono::seconds(30);
  return r;
}

// One request; returns its latency in ms, and the gaps between SSE events.
double Timed(http::HttpClient& c, const http::Url& url, bool stream, std::vector<double>* gaps) {
  std::promise<void> done;
  auto t0 = Clock::now();
  auto last = std::make_shared<Clock::time_point>();
  auto parser = std::make_shared<http::SseParser>();
  int status = 0;
  http::ClientCallbacks cb;
  cb.on_head = [&](const http::ClientResponseHead& h) { status = h.status; };
  cb.on_data = [&, last, parser](std::string_view d) {
    const auto now = Clock::now();
    for (auto& e : parser->Feed(d)) {
      if (e.data == "[DONE]") continue;
      if (gaps && last->time_since_epoch().count() != 0) {
        gaps->push_back(std::chrono::duration<double, std::milli>(now - *last).count());
      }
      *last = now;
    }
  };
  cb.on_done = [&](const http::ClientResult& r) {
    if (!r.ok() || status != 200) spdlog::error("bench request failed: {} {}", status, r.message);
    done.set_value();
  };
  c.Start(url, Completion(stream), std::move(cb));
  done.get_future().wait();
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int Run(const Args& a) {
  spdlog::set_level(spdlog::level::warn);
  testing::FakeUpstream up(testing::FakeUpstreamOptions{a.tokens, a.token_interval_ms});
  if (Status s = up.Start(); !s.ok()) return 1;
  GatewayConfig cfg;
  cfg.gateway.port = 0;
  cfg.gateway.allow_anonymous = true;
  cfg.logging.audit_log = "off";
  cfg.model.path = a.model;
  PoolConfig pool;
  pool.name = "main";
  pool.max_context = 4096;
  pool.replicas.push_back({"http://127.0.0.1:" + std::to_string(up.port()), 1});
  cfg.pools.push_back(pool);
  auto parts = Gateway::BuildParts(cfg);
  if (!parts.ok()) {
    std::fprintf(stderr, "%s\n", parts.status().message().c_str());
    return 2;
  }
  Gateway gw(cfg, std::move(*parts));
  if (Status s = gw.Start(); !s.ok()) return 1;
  const http::Url direct = *http::Url::Parse("http://127.0.0.1:" + std::to_string(up.port()));
  const http::Url via = *http::Url::Parse("http://127.0.0.1:" + std::to_string(gw.port()));
  http::HttpClient client;

  // 1. Small non-streaming requests, alternating, one at a time.
  std::vector<double> d_lat, g_lat;
  for (int i = 0; i < 100; ++i) Timed(client, i % 2 ? direct : via, false, nullptr);  // warm-up
  for (int i = 0; i < a.requests; ++i) {
    d_lat.push_back(Timed(client, direct, false, nullptr));
    g_lat.push_back(Timed(client, via, false, nullptr));
  }
  // 2. Streams, alternating.
  std::vector<double> d_gap, g_gap;
  for (int i = 0; i < a.streams; ++i) {
    Timed(client, direct, true, &d_gap);
    Timed(client, via, true, &g_gap);
  }
  // 3. Throughput at a fixed concurrency, through the gateway, then direct.
  auto throughput = [&](const http::Url& url) {
    std::atomic<int64_t> done{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> workers;
    const auto t0 = Clock::now();
    for (int w = 0; w < a.concurrency; ++w) {
      workers.emplace_back([&] {
        while (!stop.load()) {
          Timed(client, url, false, nullptr);
          done.fetch_add(1);
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(a.seconds));
    stop.store(true);
    for (auto& t : workers) t.join();
    return static_cast<double>(done.load()) / std::chrono::duration<double>(Clock::now() - t0).count();
  };
  const double g_rps = throughput(via);
  const double d_rps = throughput(direct);

  std::printf("| measure | direct | through the gateway | added |\n|---|---|---|---|\n");
  for (double p : {0.5, 0.99}) {
    const double d = Percentile(d_lat, p), g = Percentile(g_lat, p);
    std::printf("| small non-streaming request, p%.0f (ms) | %.3f | %.3f | %.3f |\n", p * 100, d, g, g - d);
  }
  for (double p : {0.5, 0.99}) {
    const double d = Percentile(d_gap, p), g = Percentile(g_gap, p);
    std::printf("| inter-token gap at %.0f ms/token, p%.0f (ms) | %.3f | %.3f | %.3f |\n", a.token_interval_ms,
                p * 100, d, g, g - d);
  }
  std::printf("| requests/s at concurrency %d (fake-fast upstream) | %.0f | %.0f | |\n", a.concurrency, d_rps, g_rps);
  std::printf("\n%d requests and %d streams of %d tokens each way; %.0f s per throughput run.\n", a.requests,
              a.streams, a.tokens, a.seconds);
  client.Stop();
  gw.Stop();
  return 0;
}

}  // namespace
}  // namespace kvs::gateway

int main(int argc, char** argv) {
  CLI::App app("gateway_bench: latency and throughput the gateway adds");
  kvs::gateway::Args a;
  app.add_option("--model", a.model, "GGUF for the gateway's tokenizer")->required();
  app.add_option("--requests", a.requests);
  app.add_option("--streams", a.streams);
  app.add_option("--tokens", a.tokens);
  app.add_option("--token-interval-ms", a.token_interval_ms);
  app.add_option("--concurrency", a.concurrency);
  app.add_option("--seconds", a.seconds);
  CLI11_PARSE(app, argc, argv);
  return kvs::gateway::Run(a);
}
