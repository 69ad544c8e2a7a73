// CreateCpuEngine: the one assembly of a serving engine on the CPU, used by
// `kvserve serve`, `run` and `bench`: the memory plan sizes the KV pool
// (plan::PlanServing over the model's shape), a CpuRunner holds the model
// and that pool (sliding-window layers in a group of their own, whose blocks
// are freed as they leave the window), and an engine::Engine drives it.
// Thread-safety: a factory function; the engine it returns is not started.
#pragma once

#include <memory>
#include <string>

#include "base/dtype.h"
#include "base/status.h"
#include "engine/engine.h"
#include "model/llama.h"
#include "plan/serving.h"

namespace kvs::backend {

struct CpuEngineOptions {
  std::string model_path;            // for messages and the shape's source
  int threads = 0;                   // compute threads; 0: one per core
  DType kv_dtype = DType::kF16;
  int32_t block_size = 16;
  int64_t context = 0;               // tokens per sequence; 0: the model's trained context
  int64_t sequences = 1;             // sequences that should fit at full context at once
  uint64_t memory_limit_bytes = 0;   // 0: this machine's memory
  double memory_fraction = 1.0;
  // Batch limits, policy, prefix caching, EOS ids... The factory sets
  // max_context_length to the plan's context.
  engine::EngineConfig engine;
};

struct CpuEngine {
  std::unique_ptr<engine::Engine> engine;
  plan::ServingPlan plan;
  int threads = 0;  // resolved
};

StatusOr<CpuEngine> CreateCpuEngine(std::unique_ptr<model::LlamaModel> model, const CpuEngineOptions& options);

}  // namespace kvs::backend
