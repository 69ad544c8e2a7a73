// RunServe: the lifecycle of `kvserve serve`.
//
//   1. Checks the API keys and access log (the configuration was validated
//      by LoadServeConfig); fails with exit code 2 naming what is wrong.
//   2. Starts HTTP at once (/health answers, /ready and the API say 503
//      while loading), then in a loader thread hashes the weights file
//      (SHA-256, compared with model.sha256 when set), creates the backend
//      and, with kv_cache.warm_prompts_file, prefills those prompts into the
//      prefix cache (warm.h); the service becomes ready. A failed load (or
//      warm file) exits with 1. A sampler thread adds a status-page history
//      sample every 2 s (Service::SampleStatus) until shutdown.
//   3. On SIGTERM or SIGINT it drains: /ready and new requests get 503,
//      the listener closes (connections already queued in its backlog are
//      still answered), in-flight requests get server.drain_timeout_seconds
//      to finish; then the rest are ended with an error, and it returns 0.
//      A second signal cuts the wait short.
// Thread-safety: call from the main thread, once.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "base/status.h"
#include "server/backend.h"
#include "server/config.h"

namespace kvs::server {

// Creates (loads) the backend for a configuration; called on the loader
// thread. The model card's name and context come from the backend's Info().
using BackendFactory = std::function<StatusOr<std::unique_ptr<InferenceBackend>>(const ServeConfig&)>;

// A check run against the server itself once the model is loaded (e.g. the
// needle gate): until it passes, /ready says 503 with its reason (the API
// already serves, so the check can use it). One that cannot run at all
// (an error) is retried a few times; one that fails keeps the server
// not ready, with the result in /ready and the log.
struct GateOutcome {
  bool passed = false;
  std::string detail;
};
struct ReadinessGate {
  std::string name;  // "needle gate 4096:90%"
  std::function<StatusOr<GateOutcome>(const std::string& base_url, const std::string& api_key)> run;
};

struct ServeOptions {
  bool require_model_file = true;  // false for the fake backend: model.path may be empty
  std::optional<ReadinessGate> gate;
  // SIGHUP: the configuration read again (the same file and command line).
  // What can change without a restart is applied (ConfigReloader: log
  // level, API keys, limits) and every other changed key is logged as
  // needing a restart. Unset: keys, access log and TLS only.
  std::function<StatusOr<ServeConfig>()> reload;
};

// Returns the process exit code.
int RunServe(const ServeConfig& config, const BackendFactory& factory, const ServeOptions& options);

// The served model id: model.name, else the file name of model.path
// without ".gguf", else "default".
std::string ServedModelName(const ServeConfig& config);

}  // namespace kvs::server
