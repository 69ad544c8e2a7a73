// InferenceBackend: everything the HTTP service needs from a model and its
// engine, and nothing more: tokenize, detokenize, render a chat template,
// submit a generation and receive its tokens, cancel, report statistics.
//
// Implementations: FakeBackend (fake_backend.h: deterministic, no model,
// for tests) and the adapter over engine::Engine + the tokenizer
// (engine_backend.h). The service never sees engine types.
//
// Generation contract:
//   * Submit either fails (nothing else happens) or accepts; an accepted
//     request gets its chunks through on_chunk, in order, from a backend
//     thread, and EXACTLY ONE of them is final (finish set), after which the
//     callback is dropped and never called again. This holds for cancelled
//     and failed requests too, and is what the service relies on to count
//     requests in flight.
//   * on_chunk must not block: the service only posts the chunk to the
//     connection's strand.
//   * Cancel(id) of an unknown or finished id is a no-op; otherwise the
//     final chunk (finish kCancelled) follows promptly and the request's KV
//     blocks are freed.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kvs::server {

struct GenerateRequest {
  std::string request_id;             // unique among requests in flight
  std::vector<int32_t> prompt_tokens;
  float temperature = 1.0f;           // 0: greedy
  float top_p = 1.0f;
  int32_t top_k = 0;                  // 0: off
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<uint64_t> seed;
  int32_t max_tokens = 16;            // >= 1
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::optional<int32_t> logprobs;    // top-N alternatives per token, [0, 20]; nullopt: none
  std::string cache_salt;             // requests share cached prefix KV only within one salt
  int32_t priority = 0;               // lower first under the priority scheduling policy
};

enum class FinishReason { kStop, kLength, kCancelled, kError };
const char* FinishReasonName(FinishReason r);  // "stop", "length", "cancelled", "error"

struct TopLogprob {
  int32_t token_id = 0;
  std::string piece;  // the token's own bytes (maybe not valid UTF-8 alone)
  float logprob = 0.0f;
};

struct TokenOutput {
  int32_t token_id = 0;
  // Text this token completes, from an incremental detokenizer: "" while the
  // token ends in an incomplete UTF-8 sequence (the bytes come out with a
  // later token or with the final chunk's text_tail).
  std::string text;
  std::string piece;    // the token's own bytes, for logprobs
  float logprob = 0.0f;                  // when logprobs were asked for
  std::vector<TopLogprob> top_logprobs;  // [logprobs], most likely first
};

struct GenerationChunk {
  std::vector<TokenOutput> tokens;  // may be empty (e.g. the final chunk of a cancel)
  std::optional<FinishReason> finish;
  Status error;                     // with kError: why
  std::string text_tail;            // final chunk: text left in the detokenizer
  // Known from the first chunk with tokens on (-1 / nullopt before):
  int32_t num_cached_tokens = -1;   // prompt tokens served from the prefix cache
  // Output tokens generated so far, counting a stop token (EOS) that is not
  // in `tokens`; -1 when the backend reports every token in `tokens`.
  int32_t num_output_tokens = -1;
  std::optional<double> queue_seconds;  // arrival to first scheduling
};

using ChunkCallback = std::function<void(GenerationChunk)>;

struct ModelInfo {
  std::string name;                 // served id
  std::string path;
  std::string architecture;         // "llama", "fake", ...
  int64_t max_context_length = 0;   // effective: min(config, model's trained context)
  int64_t trained_context_length = 0;
  int32_t vocab_size = 0;
  bool has_chat_template = false;
};

struct BackendStats {
  int64_t num_running = 0;
  int64_t num_waiting = 0;
  int64_t kv_block_size = 0;
  int64_t kv_blocks_total = 0;
  int64_t kv_blocks_used = 0;       // held by sequences
  int64_t kv_blocks_cached = 0;     // free but holding reusable prefix KV (evictable)
  int64_t kv_blocks_free = 0;       // free and empty
  uint64_t weights_bytes = 0;
  uint64_t kv_pool_bytes = 0;
  uint64_t activation_bytes = 0;
  uint64_t overhead_bytes = 0;  // the plan's runtime overhead account (stacks, allocator, code)
  int64_t max_admissible_context = 0;  // longest request (prompt + output) that fits right now
  int64_t prefix_cache_queried_tokens = 0;  // cumulative
  int64_t prefix_cache_hit_tokens = 0;      // cumulative
  int64_t num_preemptions = 0;              // cumulative
};

class InferenceBackend {
 public:
  virtual ~InferenceBackend() = default;

  virtual const ModelInfo& Info() const = 0;

  // add_special: add BOS (and what else the model's tokenizer adds). Special
  // token text in `text` (e.g. "<|im_start|>") is recognized.
  virtual StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) = 0;
  virtual StatusOr<std::string> Detokenize(std::span<const int32_t> ids) = 0;
  // A token's text as the vocabulary stores it ("▁upon", "Ġthe"; what
  // /tokenize returns as token_strs). "" for an id out of range.
  virtual std::string TokenString(int32_t id) = 0;
  // messages: OpenAI-style [{"role", "content": string}...] (content parts
  // already flattened to a string); tools: [] or the request's tools. Key
  // order is the client's (templates may render schemas with tojson).
  virtual StatusOr<std::string> ApplyChatTemplate(const nlohmann::ordered_json& messages,
                                                  const nlohmann::ordered_json& tools,
                                                  bool add_generation_prompt) = 0;

  virtual Status Submit(GenerateRequest request, ChunkCallback on_chunk) = 0;
  virtual void Cancel(const std::string& request_id) = 0;
  virtual BackendStats Stats() = 0;

  // Cancels everything, delivers the final chunks and stops backend threads.
  // Idempotent; no callback runs after it returns.
  virtual void Shutdown() = 0;
};

}  // namespace kvs::server
