// `kvserve serve`: the OpenAI-compatible HTTP service.
//   kvserve serve --config configs/default.yaml [--section.key VALUE | --alias VALUE]...
// Every configuration key is also a command-line option (--help lists them;
// configs/default.yaml documents them). Exit codes: 0 after a drain (SIGTERM/SIGINT),
// 1 when the port or the model cannot be used, 2 for bad configuration.
// (The test servers over a fake backend are a separate, test-only binary:
// src/server/testing/fake_serve_main.cc.)
#include <cstdio>
#include <memory>

#include "api/routes.h"
#include "bench/needle_run.h"
#include "cli/command.h"
#include "cli/default_model.h"
#include "server/config.h"
#include "server/engine_backend.h"
#include "server/serve.h"

namespace kvs::cli {
namespace {

struct ServeArgs {
  std::string config;
  bool print_config = false;
  bool print_routes = false;
  bool engine_available = false;
  server::ConfigOverrides overrides;  // filled by the options of every config key
  std::string needle_gate;  // LENGTH:THRESHOLD[:TRIALS]; "" = off
};

// --needle-gate: the serve start-up gate built on `kvserve needle`.
StatusOr<server::ServeOptions> GateOptions(const std::string& spec) {
  server::ServeOptions opts;
  if (spec.empty()) return opts;
  KVS_ASSIGN_OR_RETURN(bench::NeedleGateSpec gate, bench::ParseNeedleGate(spec));
  opts.gate = server::ReadinessGate{
      "needle gate " + gate.ToString(),
      [gate](const std::string& url, const std::string& key) -> StatusOr<server::GateOutcome> {
        KVS_ASSIGN_OR_RETURN(bench::NeedleGateResult r, bench::RunNeedleGate(url, key, gate));
        return server::GateOutcome{r.passed, r.detail};
      }};
  return opts;
}

const Registrar kRegister_serve({"serve", "Serve a model over an OpenAI-compatible HTTP API", [](CLI::App* app) {
                 auto a = std::make_shared<ServeArgs>();
                 app->add_option("-c,--config", a->config, "YAML configuration file (see configs/default.yaml)");
                 app->add_flag("--print-config", a->print_config,
                               "Print the effective configuration as JSON and exit");
                 app->add_flag("--print-routes", a->print_routes,
                               "Print the public API's routes (which the gateway serves too) as JSON and exit");
                 app->add_option("--needle-gate", a->needle_gate,
                                 "After loading, stay not ready (503 on /ready) until a needle recall check at "
                                 "LENGTH tokens reaches THRESHOLD, e.g. 4096:0.9 (off by default)");
                 // For tests: exit 0 when this build serves real models.
                 app->add_flag("--engine-available", a->engine_available)->group("");
                 server::AddConfigOptions(app, &a->overrides);
                 // Unknown options are reported by us, with a suggestion.
                 app->allow_extras();
                 return [a, app]() -> int {
                   if (a->engine_available) return 0;
                   if (a->print_routes) {
                     std::printf("%s\n", api::PublicApiRoutesJson().dump(2).c_str());
                     return 0;
                   }
                   server::ServeConfig cfg;
                   Status s = server::CheckExtraArguments(app->remaining());
                   if (s.ok()) s = server::LoadServeConfig(a->config, a->overrides, &cfg);
                   if (!s.ok()) {
                     std::fprintf(stderr, "kvserve serve: %s\n", s.message().c_str());
                     return 2;
                   }
                   if (a->print_config) {
                     std::printf("%s\n", server::ConfigToJson(cfg).dump(2).c_str());
                     return 0;
                   }
                   // What the engine is built from, checked before the port is taken
                   // (runtime.device: a runner this build has).
                   if (Status spec = server::EngineSpecFromConfig(cfg).status(); !spec.ok()) {
                     std::fprintf(stderr, "kvserve serve: %s\n", spec.message().c_str());
                     return 2;
                   }
                   auto opts = GateOptions(a->needle_gate);
                   if (!opts.ok()) {
                     std::fprintf(stderr, "kvserve serve: %s\n", opts.status().message().c_str());
                     return 2;
                   }
                   if (cfg.model.path.empty()) cfg.model.path = DefaultModelPath();
                   if (cfg.model.path.empty()) {
                     std::fprintf(stderr, "kvserve serve: %s\n", kNoModelMessage);
                     return 2;
                   }
                   // SIGHUP: the same file and command line, read again.
                   opts->reload = [a, model = cfg.model.path]() -> StatusOr<server::ServeConfig> {
                     server::ServeConfig fresh;
                     KVS_RETURN_IF_ERROR(server::LoadServeConfig(a->config, a->overrides, &fresh));
                     if (fresh.model.path.empty()) fresh.model.path = model;  // the default found at start
                     return fresh;
                   };
                   return server::RunServe(
                       cfg,
                       [](const server::ServeConfig& c) -> StatusOr<std::unique_ptr<server::InferenceBackend>> {
                         auto b = server::EngineBackend::Load(c);
                         if (!b.ok()) return b.status();
                         return std::unique_ptr<server::InferenceBackend>(std::move(*b));
                       },
                       *opts);
                 };
               }});

}  // namespace
}  // namespace kvs::cli
