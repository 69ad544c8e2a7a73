#include "backend/runner_factory.h"

#include "backend/cpu_runner.h"

namespace kvs::backend {

const std::vector<RunnerFactoryEntry>& RunnerFactories() {
  static const std::vector<RunnerFactoryEntry> table = {
      {"cpu", "the host CPU (AVX2/AVX-512 kernels, one thread pool)",
       [](std::unique_ptr<model::LlamaModel> model,
          const RunnerOptions& o) -> StatusOr<std::unique_ptr<engine::ModelRunner>> {
         KVS_ASSIGN_OR_RETURN(std::unique_ptr<CpuRunner> r, CpuRunner::Create(std::move(model), o));
         return std::unique_ptr<engine::ModelRunner>(std::move(r));
       }},
  };
  return table;
}

StatusOr<const RunnerFactoryEntry*> FindRunnerFactory(const std::string& device) {
  std::string accepted;
  for (const RunnerFactoryEntry& e : RunnerFactories()) {
    if (e.device == device) return &e;
    accepted += (accepted.empty() ? "" : ", ") + e.device;
  }
  return InvalidArgument("'{}' is not available in this build; accepted: {}", device, accepted);
}

}  // namespace kvs::backend
