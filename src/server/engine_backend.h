// EngineBackend: the InferenceBackend over the real stack: a GGUF model
// (model::LlamaModel) on the CPU runner (backend::CpuRunner), the serving
// engine (engine::Engine), the model's tokenizer and chat template.
//
// Load sizes the KV pool from the memory accounts (src/plan): machine memory
// x kv_cache.memory_fraction, minus weights, activations and runtime
// overhead, in whole blocks; never more than max_concurrent_requests
// sequences at full context could use, and never less than one sequence at
// full context (else Load fails naming the numbers to change).
//
// The engine hands each request's output to a RequestStream that is read by
// polling (Next with a zero timeout). One pump thread polls every live
// stream, detokenizes incrementally, and calls the service's callback; it
// naps for a fraction of a millisecond when nothing is new. So streams cost
// no thread each, and a chunk waits at most one nap before it is passed on.
//
// Thread-safety: as InferenceBackend. The tokenizer and the chat template are
// immutable; the engine's Submit/Cancel/GetStats are thread-safe; the live
// map is guarded by mu_; decoders belong to the pump thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "server/backend.h"
#include "server/config.h"

namespace kvs::engine {
class Engine;
class RequestStream;
}  // namespace kvs::engine
namespace kvs::tok {
class Tokenizer;
class IncrementalDecoder;
}  // namespace kvs::tok
namespace kvs::tmpl {
class ChatTemplate;
}  // namespace kvs::tmpl

namespace kvs::server {

class EngineBackend : public InferenceBackend {
 public:
  // Loads the model of config.model.path and starts the engine.
  static StatusOr<std::unique_ptr<EngineBackend>> Load(const ServeConfig& config);
  ~EngineBackend() override;

  const ModelInfo& Info() const override { return info_; }
  StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) override;
  StatusOr<std::string> Detokenize(std::span<const int32_t> ids) override;
  std::string TokenString(int32_t id) override;
  StatusOr<std::string> ApplyChatTemplate(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                          bool add_generation_prompt) override;
  Status Submit(GenerateRequest request, ChunkCallback on_chunk) override;
  void Cancel(const std::string& request_id) override;
  BackendStats Stats() override;
  void Shutdown() override;

 private:
  struct Live;
  EngineBackend();
  void Pump();
  // Reads what a stream has; true if it produced something.
  bool Poll(Live& live);

  ModelInfo info_;
  std::unique_ptr<tok::Tokenizer> tok_;
  std::unique_ptr<tmpl::ChatTemplate> template_;
  std::unique_ptr<engine::Engine> engine_;
  uint64_t weights_bytes_ = 0, kv_pool_bytes_ = 0, activation_bytes_ = 0, overhead_bytes_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::unordered_map<std::string, std::shared_ptr<Live>> live_;  // guarded by mu_
  bool stopping_ = false;                                        // guarded by mu_
  std::mutex shutdown_mu_;
  bool shut_down_ = false;  // guarded by shutdown_mu_
  std::thread pump_;
};

}  // namespace kvs::server
