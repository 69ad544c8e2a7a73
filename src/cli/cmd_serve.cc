// `kvserve serve`: the OpenAI-compatible HTTP service.
//   kvserve serve --config configs/default.yaml [--section.key VALUE | --alias VALUE]...
// Every configuration key can be overridden on the command line (see --help
// or configs/default.yaml). Exit codes: 0 after a drain (SIGTERM/SIGINT),
// 1 when the port or the model cannot be used, 2 for bad configuration.
//
// Hidden test options: --fake-backend serves FakeBackend (src/server/
// fake_backend.h) instead of a model: no weights needed, deterministic
// output; --fake-step-ms, --fake-load-seconds, --fake-kv-blocks tune it.
#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

#include "bench/needle_run.h"
#include "cli/command.h"
#include "cli/default_model.h"
#include "server/config.h"
#include "server/fake_backend.h"
#include "server/serve.h"
#ifdef KVSERVE_HAVE_ENGINE
#include "server/engine_backend.h"
#endif

namespace kvs::cli {
namespace {

#ifdef KVSERVE_HAVE_ENGINE
constexpr bool kHaveEngine = true;
#else
constexpr bool kHaveEngine = false;  // built without the engine modules
#endif

struct ServeArgs {
  std::string config;
  bool print_config = false;
  bool fake = false;
  bool engine_available = false;
  double fake_step_ms = 2;
  double fake_load_seconds = 0;
  int64_t fake_kv_blocks = 4096;
  std::string needle_gate;  // LENGTH:THRESHOLD[:TRIALS]; "" = off
};

server::BackendFactory FakeFactory(const ServeArgs& a) {
  return [a](const server::ServeConfig& c) -> StatusOr<std::unique_ptr<server::InferenceBackend>> {
    if (a.fake_load_seconds > 0) std::this_thread::sleep_for(std::chrono::duration<double>(a.fake_load_seconds));
    server::FakeBackendOptions o;
    o.model_name = c.model.name.empty() && c.model.path.empty() ? "fake-model" : server::ServedModelName(c);
    o.model_path = c.model.path;
    o.max_context_length = c.model.max_context_length;
    o.max_batch_size = c.runtime.max_batch_size;
    o.block_size = c.kv_cache.block_size;
    o.prefix_caching = c.kv_cache.prefix_caching;
    o.num_blocks = a.fake_kv_blocks;
    o.step_time = std::chrono::microseconds(static_cast<int64_t>(a.fake_step_ms * 1000));
    return std::unique_ptr<server::InferenceBackend>(std::make_unique<server::FakeBackend>(o));
  };
}

Registrar reg({"serve", "Serve a model over an OpenAI-compatible HTTP API", [](CLI::App* app) {
                 auto a = std::make_shared<ServeArgs>();
                 app->add_option("-c,--config", a->config, "YAML configuration file (see configs/default.yaml)");
                 app->add_flag("--print-config", a->print_config,
                               "Print the effective configuration as JSON and exit");
                 app->add_option("--needle-gate", a->needle_gate,
                                 "After loading, stay not ready (503 on /ready) until a needle recall check at "
                                 "LENGTH tokens reaches THRESHOLD, e.g. 4096:0.9 (off by default)");
                 app->add_flag("--fake-backend", a->fake)->group("");
                 app->add_flag("--engine-available", a->engine_available)->group("");
                 app->add_option("--fake-step-ms", a->fake_step_ms)->group("");
                 app->add_option("--fake-load-seconds", a->fake_load_seconds)->group("");
                 app->add_option("--fake-kv-blocks", a->fake_kv_blocks)->group("");
                 app->allow_extras();
                 app->footer(server::ConfigHelp());
                 return [a, app]() -> int {
                   // For tests: exit 0 when real models can be served.
                   if (a->engine_available) return kHaveEngine ? 0 : 3;
                   server::ServeConfig cfg;
                   if (!a->config.empty()) {
                     if (Status s = server::LoadConfigFile(a->config, &cfg); !s.ok()) {
                       std::fprintf(stderr, "kvserve serve: %s\n", s.message().c_str());
                       return 2;
                     }
                   }
                   if (Status s = server::ApplyOverrides(app->remaining(), &cfg); !s.ok()) {
                     std::fprintf(stderr, "kvserve serve: %s\n", s.message().c_str());
                     return 2;
                   }
                   if (Status s = server::ValidateConfig(cfg); !s.ok()) {
                     std::fprintf(stderr, "kvserve serve: %s\n", s.message().c_str());
                     return 2;
                   }
                   if (a->print_config) {
                     std::printf("%s\n", server::ConfigToJson(cfg).dump(2).c_str());
                     return 0;
                   }
                   server::ServeOptions opts;
                   if (!a->needle_gate.empty()) {
                     auto gate = bench::ParseNeedleGate(a->needle_gate);
                     if (!gate.ok()) {
                       std::fprintf(stderr, "kvserve serve: %s\n", gate.status().message().c_str());
                       return 2;
                     }
                     opts.gate = server::ReadinessGate{
                         "needle gate " + gate->ToString(),
                         [g = *gate](const std::string& url,
                                     const std::string& key) -> StatusOr<server::GateOutcome> {
                           KVS_ASSIGN_OR_RETURN(bench::NeedleGateResult r, bench::RunNeedleGate(url, key, g));
                           return server::GateOutcome{r.passed, r.detail};
                         }};
                   }
                   if (a->fake) {
                     opts.require_model_file = false;
                     return server::RunServe(cfg, FakeFactory(*a), opts);
                   }
#ifdef KVSERVE_HAVE_ENGINE
                   if (cfg.model.path.empty()) cfg.model.path = DefaultModelPath();
                   if (cfg.model.path.empty()) {
                     std::fprintf(stderr, "kvserve serve: %s\n", kNoModelMessage);
                     return 2;
                   }
                   return server::RunServe(
                       cfg,
                       [](const server::ServeConfig& c) -> StatusOr<std::unique_ptr<server::InferenceBackend>> {
                         auto b = server::EngineBackend::Load(c);
                         if (!b.ok()) return b.status();
                         return std::unique_ptr<server::InferenceBackend>(std::move(*b));
                       },
                       opts);
#else
                   std::fprintf(stderr,
                                "kvserve serve: this build has no inference engine (src/engine and src/backend were "
                                "left out); run with --fake-backend for a test server\n");
                   return 2;
#endif
                 };
               }});

}  // namespace
}  // namespace kvs::cli
