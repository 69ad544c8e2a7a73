#include "backend/cpu_engine.h"

#include <algorithm>
#include <thread>

#include "backend/cpu_runner.h"
#include "plan/model_shape.h"

namespace kvs::backend {

StatusOr<CpuEngine> CreateCpuEngine(std::unique_ptr<model::LlamaModel> model, const CpuEngineOptions& o) {
  if (model == nullptr) return InvalidArgument("CreateCpuEngine: no model");
  CpuEngine out;
  out.threads = o.threads > 0 ? o.threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  KVS_ASSIGN_OR_RETURN(const plan::ModelShape shape, plan::ShapeFromGgufFile(model->file(), o.model_path));
  plan::ServingPlanOptions po;
  po.memory_limit_bytes = o.memory_limit_bytes;
  po.memory_fraction = o.memory_fraction;
  po.kv_dtype = o.kv_dtype;
  po.block_size = o.block_size;
  po.context = o.context;
  po.sequences = o.sequences;
  po.max_num_batched_tokens = o.engine.max_num_batched_tokens;
  po.max_batch_size = o.engine.max_batch_size;
  po.threads = out.threads;
  KVS_ASSIGN_OR_RETURN(out.plan, plan::PlanServing(shape, model->weight_bytes(), po));
  // LongRoPE picks its factors by the context served (as llama.cpp does).
  model->SetContextLength(out.plan.context);

  CpuRunnerOptions ro;
  ro.threads = out.threads;
  ro.block_size = o.block_size;
  ro.num_blocks = static_cast<int32_t>(out.plan.num_kv_blocks);
  ro.num_window_blocks = static_cast<int32_t>(out.plan.num_window_blocks);  // sliding layers' own group
  ro.kv_dtype = o.kv_dtype;
  ro.max_batch_tokens = std::max(o.engine.max_num_batched_tokens, o.engine.max_batch_size);
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<CpuRunner> runner, CpuRunner::Create(std::move(model), ro));
  engine::EngineConfig ec = o.engine;
  ec.max_context_length = static_cast<int32_t>(out.plan.context);
  KVS_ASSIGN_OR_RETURN(out.engine, engine::Engine::Create(std::move(ec), std::move(runner)));
  return out;
}

}  // namespace kvs::backend
