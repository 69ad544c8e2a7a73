// The device seam: which engine::ModelRunner computes a loaded model.
//
// RunnerFactories() maps a device name (EngineSpec::device, the server's
// runtime.device) to the factory that turns the loaded weights into a
// runner. "cpu" (backend::CpuRunner) is the only entry in this build.
// LoadEngine (load_engine.h) is the one caller: it looks the device up
// before it reads the weights, so an unknown device fails fast with the
// accepted names.
//
// What a runner for another device (CUDA, a multi-process runner, ...) must
// implement: engine::ModelRunner (engine/model_runner.h), i.e.
//   * vocab_size(), block_size(), num_blocks() (and window(),
//     num_window_blocks() when sliding layers get a KV group of their own);
//   * Forward(batch, logits): every token of the batch, its K/V written into
//     the blocks the batch names (position p at block_table[p / block_size],
//     slot p % block_size), logits [batch.NumLogits(), vocab_size] back in
//     host memory;
//   * ReleaseBlocks / ReleaseWindowBlocks: storage the engine freed;
//   * kv_committed_bytes(): KV memory actually committed (for /metrics).
// Ownership: the factory takes the model (weights) and owns it from then on,
// together with its KV storage and any threads, streams or workers it
// starts; the engine owns the runner; destroying the runner frees all of it.
// The memory plan (plan::PlanServing, sized by the spec) decides
// RunnerOptions::num_blocks; a runner that cannot hold that many blocks
// fails its factory instead of allocating fewer.
// Threading: a factory runs on the loading thread; the runner it returns is
// then used only by the engine thread (Forward and the Release calls are
// never concurrent), so it needs no locking of its own.
// Thread-safety: RunnerFactories() is an immutable table built once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/model_runner.h"
#include "backend/runner_options.h"
#include "model/llama.h"

namespace kvs::backend {

using RunnerFactory = std::function<StatusOr<std::unique_ptr<engine::ModelRunner>>(
    std::unique_ptr<model::LlamaModel> model, const RunnerOptions& options)>;

struct RunnerFactoryEntry {
  std::string device;       // "cpu"
  std::string description;  // for --help and errors
  RunnerFactory make;
};

// Every device this build can run on, in the order --help lists them.
const std::vector<RunnerFactoryEntry>& RunnerFactories();

// The entry for `device`, or InvalidArgument
// "'cuda' is not available in this build; accepted: cpu" (callers prefix
// the key that named it: "runtime.device: ...").
StatusOr<const RunnerFactoryEntry*> FindRunnerFactory(const std::string& device);

}  // namespace kvs::backend
