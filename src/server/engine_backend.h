// EngineBackend: the InferenceBackend over the real stack: a GGUF model
// loaded by backend::LoadEngine on the device runtime.device names (the
// memory plan sizes the KV pool, the device's runner computes,
// engine::Engine schedules), the model's tokenizer and chat template.
//
// Output path (no thread of its own): the engine thread pushes a request's
// tokens into its RequestStream; the stream's ready signal posts one drain to
// the consumer's executor (the connection's strand); the drain takes what is
// pending (tokens of several steps merge while a drain is queued),
// detokenizes it incrementally and calls the consumer's callback. So the
// output crosses one thread boundary, engine thread -> consumer, and nothing
// polls.
//
// Thread-safety: as InferenceBackend. The tokenizer and the chat template are
// immutable; the engine's Submit/Cancel/GetStats are thread-safe; the live
// map is guarded by mu_; each request's decoder is used only by its drains,
// which its mutex serializes.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backend/load_engine.h"
#include "server/backend.h"
#include "server/config.h"
#include "template/fwd.h"

namespace kvs::server {

// The configuration read once into what LoadEngine needs: model.*,
// kv_cache.* and runtime.* (device, threads, batching, admission). An
// unknown runtime.device is InvalidArgument "runtime.device: 'cuda' is not
// available in this build; accepted: cpu".
StatusOr<backend::EngineSpec> EngineSpecFromConfig(const ServeConfig& config);

class EngineBackend : public InferenceBackend {
 public:
  // Loads the model of config.model.path (LoadEngine over
  // EngineSpecFromConfig) and starts the engine. With `group` (size
  // runtime.tensor_parallel x pipeline_parallel > 1), as rank 0 of it
  // (backend/tensor_parallel.h).
  static StatusOr<std::unique_ptr<EngineBackend>> Load(const ServeConfig& config, Collective* group = nullptr);
  ~EngineBackend() override;

  const ModelInfo& Info() const override { return info_; }
  StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) override;
  StatusOr<std::string> Detokenize(std::span<const int32_t> ids) override;
  std::string TokenString(int32_t id) override;
  StatusOr<ChatPrompt> RenderChatPrompt(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                        bool add_generation_prompt, const nlohmann::ordered_json& template_kwargs) override;
  std::shared_ptr<const grammar::Vocabulary> GrammarVocabulary() override { return grammar_vocab_; }
  grammar::ToolCallFormat ToolCallFormat() override { return tool_format_; }
  grammar::ReasoningFormat ReasoningFormat() override { return reasoning_format_; }
  using InferenceBackend::Submit;
  Status Submit(engine::ValidatedRequest request, Executor executor, ChunkCallback on_chunk) override;
  void Cancel(const std::string& request_id) override;
  BackendStats Stats() override;
  std::optional<kvcache::CacheEventsPage> CacheEvents(uint64_t epoch, uint64_t since, size_t max_events) override;
  void Shutdown() override;

 private:
  struct Live;
  EngineBackend();
  // On the consumer's executor: takes the stream's pending output and
  // delivers it.
  void Drain(const std::shared_ptr<Live>& live);

  ModelInfo info_;
  MemoryAccounts memory_;
  std::shared_ptr<backend::ParallelStatsBoard> parallel_stats_;  // tensor parallel only
  std::unique_ptr<tok::Tokenizer> tok_;
  std::unique_ptr<tmpl::ChatTemplate> template_;
  std::unique_ptr<engine::Engine> engine_;
  std::shared_ptr<const grammar::Vocabulary> grammar_vocab_;  // immutable; nullptr if it could not be built
  grammar::ToolCallFormat tool_format_ = grammar::ToolCallFormat::kNone;
  // The format's markers that the decoder drops (ToolCallMarkerTokens): id -> text.
  std::unordered_map<int32_t, std::string> marker_text_;
  grammar::ReasoningFormat reasoning_format_;
  // The reasoning delimiters that the decoder drops (DroppedMarkerTokens): id -> text.
  std::unordered_map<int32_t, std::string> reasoning_marker_text_;

  std::mutex mu_;
  // Requests whose final chunk has not been delivered; the ready signal of
  // each stream holds only a weak reference, so no cycle keeps one alive.
  std::unordered_map<std::string, std::shared_ptr<Live>> live_;  // guarded by mu_
  bool stopping_ = false;                                        // guarded by mu_
  std::mutex shutdown_mu_;
  bool shut_down_ = false;  // guarded by shutdown_mu_
};

}  // namespace kvs::server
