// Tensor and pipeline parallel across processes: one engine on rank 0,
// model shards on every rank. Ranks: rank = stage x T + t for T-way tensor
// parallel inside each of P pipeline stages; a stage holds a contiguous range
// of layers (model::StageLayers) and its T ranks split each of those layers'
// heads and FFN (model::LoadOptions). Each rank's KV cache holds its layers'
// share of the KV heads only.
//
// Rank 0's runner (LoadEngine's when EngineSpec::group has more than one
// rank; the device is then "cpu") sends every step to the workers before
// computing its own shard: the batch (token ids, positions, block tables)
// and the blocks the engine frees. No rank but 0 schedules, samples or sees a request; the
// workers run RunTensorParallelWorker, which only follows those messages.
// A stage's shards meet in two all-reduces per layer over the stage's group;
// stages pass the [tokens, hidden] residual stream on, and the last stage's
// first rank sends the logits to rank 0 (model::LlamaModel::SetPipeline).
// With P > 1 a step's sequences go through in up to P micro-batches of at
// least 64 tokens each (prefill; decode steps stay whole, tensor_parallel.cc
// says why), so that stage s works on one while stage s + 1 works on the
// one before.
//
// Start-up: rank 0 sends the runner's geometry (KV blocks as its memory plan
// sized them, dtype, context) and its model file's SHA-256; each worker
// hashes its own file, loads its shard and reports; rank 0's factory fails,
// naming the ranks, unless every one is ready. Messages, in order:
//   setup, then any number of forward / release / release-window, then end
//   (the runner is gone; a new setup may follow: a reload); shutdown ends
//   the workers.
// Thread-safety: the runner is used by the engine thread only (as every
// ModelRunner); the worker loop is its process's only caller of the group.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/cpu_runner.h"
#include "base/collective.h"

namespace kvs::backend {

struct TensorParallelSetup {
  int tensor_parallel = 1;    // T; the group has T x pipeline_parallel ranks
  int pipeline_parallel = 1;  // P
  std::string model_sha256;   // rank 0's file; every worker's must hash the same
  std::string model_dtype;    // model.dtype (model::LoadOptions::ForDtype)
  int64_t context = 0;        // the context served (LongRoPE's choice)
  RunnerOptions runner;       // geometry as rank 0 planned it (threads: each rank's own)
};

// Every rank's ParallelRankStats as rank 0 last heard them: the ranks add
// what they did since the last report every kReportEvery steps (one
// all-reduce of kFields floats per rank).
// Thread-safety: thread-safe (the engine thread adds, /metrics reads).
class ParallelStatsBoard {
 public:
  static constexpr int kReportEvery = 16;
  explicit ParallelStatsBoard(int ranks) : ranks_(static_cast<size_t>(ranks)) {}
  std::vector<ParallelRankStats> Snapshot() const {
    std::lock_guard<std::mutex> lock(mu_);
    return ranks_;
  }
  // deltas: [ranks, kFields] in ParallelRankStats's order.
  static constexpr int kFields = 5;
  void Add(std::span<const float> deltas);
  void AddMicroBatches(int64_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!ranks_.empty()) ranks_[0].micro_batches += static_cast<double>(n);
  }

 private:
  mutable std::mutex mu_;
  std::vector<ParallelRankStats> ranks_;
};

// What rank `rank` of a T x P layout loads of a model of `n_layers` layers.
model::LoadOptions ShardLoadOptions(const std::string& dtype, int tensor_parallel, int pipeline_parallel, int rank,
                                    int32_t n_layers);

// Rank 0: wraps its shard (loaded with ShardLoadOptions for rank 0) in a
// runner that drives the workers. Fails when any rank could not start.
StatusOr<std::unique_ptr<engine::ModelRunner>> MakeTensorParallelRunner(std::unique_ptr<model::LlamaModel> model,
                                                                        const TensorParallelSetup& setup,
                                                                        Collective& group,
                                                                        std::shared_ptr<ParallelStatsBoard> stats);

// Ranks > 0: follows rank 0 until it sends shutdown. `model_path` is this
// rank's copy of the model (hashed against rank 0's); threads: this host's
// compute threads (0: all cores).
Status RunTensorParallelWorker(Collective& group, const std::string& model_path, int threads);

// Rank 0, at exit: ends the workers' loops.
void ShutdownTensorParallelWorkers(Collective& group);

}  // namespace kvs::backend
