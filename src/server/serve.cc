#include "server/serve.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <csignal>
#include <filesystem>
#include <mutex>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "http/http_server.h"
#include "http/tls.h"
#include "server/access_log.h"
#include "server/reload.h"
#include "server/service.h"
#include "base/file_stamp.h"
#include "base/sha256.h"
#include "base/signal_block.h"
#include "server/warm.h"

namespace kvs::server {

namespace {

using SteadyClock = std::chrono::steady_clock;

// What the main thread waits for.
struct Events {
  std::mutex mu;
  std::condition_variable cv;
  int signals = 0;          // SIGTERM/SIGINT received
  bool load_done = false;
  Status load_status;
};

// The readiness gate, against the server itself over loopback.
void RunGate(const ReadinessGate& gate, const ServeConfig& config, const std::string& api_key, uint16_t port,
             Service* service) {
  std::string host = config.server.host;
  if (host == "0.0.0.0" || host.empty()) host = "127.0.0.1";
  if (host == "::") host = "::1";
  if (host.find(':') != std::string::npos) host = "[" + host + "]";
  const std::string url = "http://" + host + ":" + std::to_string(port);
  spdlog::info("{}: checking before reporting ready", gate.name);
  for (int attempt = 1;; ++attempt) {
    auto r = gate.run(url, api_key);
    if (r.ok() && r->passed) {
      service->SetNotReadyReason("");
      spdlog::info("{} passed: {}", gate.name, r->detail);
      return;
    }
    if (r.ok()) {
      service->SetNotReadyReason(gate.name + " failed: " + r->detail);
      spdlog::error("{} failed: {}; the server stays not ready", gate.name, r->detail);
      return;
    }
    if (attempt >= 3 || service->state() != Service::State::kReady) {
      service->SetNotReadyReason(gate.name + " could not run: " + r.status().message());
      spdlog::error("{} could not run: {}; the server stays not ready", gate.name, r.status().message());
      return;
    }
    spdlog::warn("{} could not run ({}); retrying", gate.name, r.status().message());
    std::this_thread::sleep_for(std::chrono::seconds(2));
  }
}

}  // namespace

std::string ServedModelName(const ServeConfig& config) {
  if (!config.model.name.empty()) return config.model.name;
  if (!config.model.path.empty()) {
    std::filesystem::path p(config.model.path);
    std::string stem = p.filename().string();
    if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
    if (!stem.empty()) return stem;
  }
  return "default";
}

int RunServe(const ServeConfig& config, const BackendFactory& factory, const ServeOptions& options) {
  // A client that sees /ready answered may signal at once: SIGTERM/SIGINT
  // stay pending, not fatal, until their handler is installed below. The
  // block comes before any thread starts (the service's pools, the io
  // threads), since every thread inherits it: the kernel delivers a
  // process-directed signal to any thread that does not block it, and with
  // no handler installed yet its default action ends the process.
  SignalBlock term_signals({SIGTERM, SIGINT, SIGHUP});
  // Logs go to stderr; stdout is left to the access log.
  if (!spdlog::get("kvserve")) spdlog::set_default_logger(spdlog::stderr_color_mt("kvserve"));
  spdlog::set_level(spdlog::level::from_str(config.logging.level));
  if (options.require_model_file) {
    std::error_code ec;
    if (config.model.path.empty()) {
      spdlog::error("configuration: model.path is required (--model FILE.gguf)");
      return 2;
    }
    if (!std::filesystem::is_regular_file(config.model.path, ec)) {
      spdlog::error("configuration: model.path: no such file: {}", config.model.path);
      return 2;
    }
  }
  auto keys = LoadApiKeys(config);
  if (!keys.ok()) {
    spdlog::error("configuration: {}", keys.status().message());
    return 2;
  }
  auto access_log = AccessLog::Open(config.logging.access_log);
  if (!access_log.ok()) {
    spdlog::error("configuration: {}", access_log.status().message());
    return 2;
  }
  spdlog::info("configuration: {}", ConfigToJson(config).dump());
  if (keys->empty()) spdlog::warn("no API keys configured: the API is open to anyone who can reach it");

  ServerMetrics metrics;
  Service service(config, *keys, &metrics, access_log->get());
  http::ServerOptions ho;
  ho.host = config.server.host;
  ho.port = static_cast<uint16_t>(config.server.port);
  ho.io_threads = static_cast<int>(config.server.io_threads);
  ho.max_body_bytes = static_cast<uint64_t>(config.server.max_body_bytes);
  ho.keep_alive_timeout = std::chrono::milliseconds(static_cast<int64_t>(config.server.keep_alive_timeout_seconds * 1000));
  ho.header_timeout = std::chrono::milliseconds(static_cast<int64_t>(config.server.header_timeout_seconds * 1000));
  ho.max_connections = static_cast<int>(config.server.max_connections);
  ho.max_connections_per_client = static_cast<int>(config.server.max_connections_per_client);
  ho.tls_cert_file = config.server.tls_cert_file;
  ho.tls_key_file = config.server.tls_key_file;
  ho.tls_cert_setting = "server.tls_cert_file";
  ho.tls_key_setting = "server.tls_key_file";
  if (ho.tls()) {
    // Unreadable or mismatched files are a configuration error, as a bad
    // key file is (the listener loads them again when it starts).
    auto tls = http::MakeServerTlsContext({ho.tls_cert_file, ho.tls_key_file, ho.tls_cert_setting, ho.tls_key_setting});
    if (!tls.ok()) {
      spdlog::error("configuration: {}", tls.status().message());
      return 2;
    }
  }
  http::HttpServer server(ho);
  if (Status s = server.Start([&service](std::shared_ptr<http::Exchange> ex) { service.Handle(std::move(ex)); });
      !s.ok()) {
    spdlog::error("{}", s.message());
    return 1;
  }
  spdlog::info("listening on {}://{}:{}", server.scheme(), config.server.host, server.port());

  Events ev;
  server.OnSignal({SIGTERM, SIGINT}, [&ev](int sig) {
    spdlog::info("received {}: draining", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    std::lock_guard<std::mutex> lock(ev.mu);
    ++ev.signals;
    ev.cv.notify_all();
  });
  // SIGHUP: the configuration is read again and what can change live is
  // applied (ConfigReloader: log level, API keys, limits), the API keys
  // (api_keys_env, api_key_file) are read again, the access log is reopened
  // (rotation) and the TLS certificate reloaded (new connections get the
  // files' new pair; a bad pair is refused and the old one stays); the key
  // file is also polled for changes. A reload that fails keeps what was in
  // force, and is logged (keys: counted).
  auto reloader = std::make_shared<ConfigReloader>(config, &service, &server, &metrics);
  AccessLog* log = access_log->get();
  server.OnSignal({SIGHUP}, [reloader, log, &server, reload = options.reload](int) {
    reloader->OnSighup(reload);
    if (Status s = log->Reopen(); !s.ok()) spdlog::error("SIGHUP: access log not reopened: {}", s.message());
    if (!server.tls()) return;
    if (Status s = server.ReloadTls(); s.ok()) {
      spdlog::info("SIGHUP: TLS certificate reloaded");
    } else {
      spdlog::error("SIGHUP: TLS certificate not reloaded (the previous one stays in force): {}", s.message());
    }
  });
  std::function<void()> watch_key_file;
  if (!config.server.api_key_file.empty()) {
    // Tried once per change, once it has held still for a poll (FileWatch);
    // a removed file keeps the keys.
    auto watch = std::make_shared<FileWatch>(StampOf(config.server.api_key_file));
    watch_key_file = [&server, &watch_key_file, &path = config.server.api_key_file, watch, reloader] {
      server.RunAfter(std::chrono::seconds(1), [&watch_key_file, &path, watch, reloader] {
        if (watch->Poll(StampOf(path))) reloader->ReloadKeys("server.api_key_file changed");
        watch_key_file();
      });
    };
    watch_key_file();
  }
  term_signals.Release();

  std::unique_ptr<InferenceBackend> backend;
  std::mutex backend_mu;
  std::thread loader([&] {
    const auto t0 = SteadyClock::now();
    Status st;
    ModelCard card;
    card.path = config.model.path;
    if (!config.model.path.empty()) {
      spdlog::info("hashing {}", config.model.path);
      auto sha = Sha256File(config.model.path);
      if (!sha.ok()) {
        st = sha.status();
      } else {
        card.sha256 = *sha;
        std::string want = config.model.sha256;
        std::transform(want.begin(), want.end(), want.begin(), [](unsigned char c) { return std::tolower(c); });
        if (!want.empty() && want != card.sha256) {
          st = Status(StatusCode::kDataLoss, "model.sha256 mismatch: " + config.model.path + " hashes to " +
                                                 card.sha256 + ", the configuration expects " + want);
        }
      }
    }
    std::unique_ptr<InferenceBackend> b;
    if (st.ok()) {
      // The replica knows its weights' SHA-256 from here on (the disk KV
      // tier's fingerprint names them by it).
      ServeConfig loaded_config = config;
      if (!card.sha256.empty()) loaded_config.model.sha256 = card.sha256;
      auto created = factory(loaded_config);
      if (created.ok()) {
        b = std::move(*created);
      } else {
        st = created.status();
      }
    }
    if (st.ok() && !config.kv_cache.warm_prompts_file.empty()) {
      auto warm = WarmPrefixCache(*b, config.kv_cache.warm_prompts_file);
      if (warm.ok()) {
        spdlog::info("prefix cache warmed: {} prompts, {} tokens in {:.2f} s", warm->prompts, warm->tokens,
                     warm->seconds);
      } else {
        st = warm.status();
      }
    }
    if (st.ok()) {
      card.id = b->Info().name.empty() ? ServedModelName(config) : b->Info().name;
      card.max_context_length = b->Info().limits.max_context_length;
      card.load_seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
      card.created = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
      if (b->Info().trained_context_length > 0 && config.model.max_context_length > b->Info().trained_context_length) {
        spdlog::warn("model.max_context_length {} exceeds the model's trained context {}; serving {}",
                     config.model.max_context_length, b->Info().trained_context_length, card.max_context_length);
      }
      if (options.gate) service.SetNotReadyReason(options.gate->name + " running");
      service.SetReady(b.get(), card);
      spdlog::info("model '{}' ready in {:.2f} s (sha256 {}, context {} tokens)", card.id, card.load_seconds,
                   card.sha256.empty() ? "-" : card.sha256, card.max_context_length);
      if (options.gate) RunGate(*options.gate, config, keys->empty() ? std::string() : keys->front(), server.port(),
                                &service);
    }
    {
      std::lock_guard<std::mutex> lock(backend_mu);
      backend = std::move(b);
    }
    std::lock_guard<std::mutex> lock(ev.mu);
    ev.load_done = true;
    ev.load_status = st;
    ev.cv.notify_all();
  });

  // The status page's history: one sample every 2 s until shutdown.
  std::mutex sampler_mu;
  std::condition_variable sampler_cv;
  bool sampler_stop = false;
  std::thread sampler([&] {
    std::unique_lock<std::mutex> lock(sampler_mu);
    while (!sampler_cv.wait_for(lock, std::chrono::duration<double>(StatusBoard::kSampleSeconds),
                                [&] { return sampler_stop; })) {
      lock.unlock();
      service.SampleStatus();
      lock.lock();
    }
  });

  int exit_code = 0;
  {
    std::unique_lock<std::mutex> lock(ev.mu);
    ev.cv.wait(lock, [&] { return ev.signals > 0 || (ev.load_done && !ev.load_status.ok()); });
    if (ev.signals == 0) {
      spdlog::error("loading the model failed: {}", ev.load_status.ToString());
      exit_code = 1;
    } else if (!ev.load_done) {
      // SIGTERM/SIGINT while the model is still loading (hashing, reading,
      // repacking weights can take minutes): nothing has been served, so
      // there is nothing to drain, and the loader cannot be interrupted
      // half-way through building the weights. Exit now instead of after the
      // load; the OS releases the memory and the listening socket.
      spdlog::info("signal during model load: exiting without waiting for the load to finish");
      spdlog::default_logger()->flush();
      std::fflush(nullptr);  // the access log and stdio
      std::_Exit(0);
    }
  }
  if (exit_code == 0) {
    // Drain.
    service.BeginDrain();
    server.SetDraining();
    server.StopAccepting();
    const auto deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(
                                                   std::chrono::duration<double>(config.server.drain_timeout_seconds));
    std::optional<SteadyClock::time_point> cut_at;
    for (;;) {
      if (server.active_exchanges() == 0 && service.sequences_in_flight() == 0) break;
      const auto now = SteadyClock::now();
      int signals;
      {
        std::lock_guard<std::mutex> lock(ev.mu);
        signals = ev.signals;
      }
      if (!cut_at && (now >= deadline || signals > 1)) {
        spdlog::warn("drain: {} requests still running after {} s; ending them", service.running_jobs(),
                     config.server.drain_timeout_seconds);
        const api::ApiError e = api::MakeError(503, "the server is shutting down (drain timeout reached)",
                                               "service_unavailable", "server_shutting_down");
        service.AbortAll(e, "shutdown");
        cut_at = now;
      }
      if (cut_at && now - *cut_at > std::chrono::seconds(5)) {
        spdlog::warn("drain: giving up on {} exchanges", server.active_exchanges());
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    spdlog::info("drained; shutting down");
  }
  {
    std::lock_guard<std::mutex> lock(sampler_mu);
    sampler_stop = true;
  }
  sampler_cv.notify_all();
  sampler.join();
  server.Stop();
  loader.join();
  service.StopPreparing();
  {
    std::lock_guard<std::mutex> lock(backend_mu);
    if (backend) backend->Shutdown();
    backend.reset();
  }
  return exit_code;
}

}  // namespace kvs::server
