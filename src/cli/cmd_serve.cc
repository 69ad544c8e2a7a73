// `kvserve serve`: the OpenAI-compatible HTTP service.
//   kvserve serve --config configs/default.yaml [--section.key VALUE | --alias VALUE]...
// Every configuration key is also a command-line option (--help lists them;
// configs/default.yaml documents them). Exit codes: 0 after a drain (SIGTERM/SIGINT),
// 1 when the port or the model cannot be used, 2 for bad configuration.
// (The test servers over a fake backend are a separate, test-only binary:
// src/server/testing/fake_serve_main.cc.)
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "api/routes.h"
#include "backend/mpi_collective.h"
#include "backend/tensor_parallel.h"
#include "base/signal_block.h"
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
                   // Tensor parallel: every rank runs this same command under mpirun;
                   // rank 0 goes on to serve, the others follow its engine.
                   std::shared_ptr<backend::MpiGroup> group;
                   // Blocked before MPI starts its threads, which inherit the mask: mpirun
                   // forwards SIGTERM to every rank, and a worker must not die of it but
                   // end when rank 0, having drained, tells it to (RunServe handles the
                   // signals on rank 0). Blocked until the process exits: the forwarded
                   // SIGTERM stays pending in a worker, and unblocking it on the way out
                   // would end a worker that exits 0 by that signal, which makes mpirun
                   // abort the job (SIGKILL to the ranks still ending) and, with Open MPI
                   // 4.1.4, sometimes hang (docs/parallel.md).
                   const int64_t ranks = cfg.runtime.tensor_parallel * cfg.runtime.pipeline_parallel;
                   if (ranks > 1) {
                     SignalBlock({SIGTERM, SIGINT, SIGHUP}).KeepBlocked();
                     auto g = backend::MpiGroup::Open();
                     if (!g.ok()) {
                       std::fprintf(stderr, "kvserve serve: runtime.tensor_parallel x pipeline_parallel = %lld: %s\n",
                                    static_cast<long long>(ranks), g.status().message().c_str());
                       return 1;
                     }
                     group = std::move(*g);
                     if (group->size() != ranks) {
                       if (group->rank() == 0) {
                         std::fprintf(stderr,
                                      "kvserve serve: runtime.tensor_parallel is %lld and pipeline_parallel %lld "
                                      "(%lld processes) but %d process(es) were started; start them with "
                                      "mpirun -np %lld kvserve serve ...\n",
                                      static_cast<long long>(cfg.runtime.tensor_parallel),
                                      static_cast<long long>(cfg.runtime.pipeline_parallel),
                                      static_cast<long long>(ranks), group->size(), static_cast<long long>(ranks));
                       }
                       return 2;  // the group's destructor ends every rank
                     }
                     if (group->rank() != 0) {
                       // Its own logger: rank 0's lines and a worker's interleave on mpirun's stderr.
                       spdlog::set_default_logger(spdlog::stderr_color_mt(fmt::format("kvserve rank {}", group->rank())));
                       spdlog::set_level(spdlog::level::from_str(cfg.logging.level));
                       const Status w = backend::RunTensorParallelWorker(*group, cfg.model.path,
                                                                         static_cast<int>(cfg.runtime.threads));
                       if (!w.ok()) {
                         std::fprintf(stderr, "kvserve serve: tensor parallel rank %d: %s\n", group->rank(),
                                      w.message().c_str());
                         return 1;
                       }
                       group->MarkDone();
                       return 0;
                     }
                     std::fprintf(stderr,
                                  "kvserve serve: tensor parallel %lld x pipeline parallel %lld: rank 0 of %d on %s "
                                  "serves; the others follow\n",
                                  static_cast<long long>(cfg.runtime.tensor_parallel),
                                  static_cast<long long>(cfg.runtime.pipeline_parallel), group->size(),
                                  group->host().c_str());
                   }
                   // SIGHUP: the same file and command line, read again.
                   opts->reload = [a, model = cfg.model.path]() -> StatusOr<server::ServeConfig> {
                     server::ServeConfig fresh;
                     KVS_RETURN_IF_ERROR(server::LoadServeConfig(a->config, a->overrides, &fresh));
                     if (fresh.model.path.empty()) fresh.model.path = model;  // the default found at start
                     return fresh;
                   };
                   const int rc = server::RunServe(
                       cfg,
                       [group](const server::ServeConfig& c) -> StatusOr<std::unique_ptr<server::InferenceBackend>> {
                         auto b = server::EngineBackend::Load(c, group.get());
                         if (!b.ok()) return b.status();
                         return std::unique_ptr<server::InferenceBackend>(std::move(*b));
                       },
                       *opts);
                   if (group != nullptr) {
                     backend::ShutdownTensorParallelWorkers(*group);
                     group->MarkDone();
                   }
                   return rc;
                 };
               }});

}  // namespace
}  // namespace kvs::cli
