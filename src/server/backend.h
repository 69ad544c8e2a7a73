// InferenceBackend: everything the HTTP service needs from a model and its
// engine, and nothing more: tokenize, detokenize, render a chat template,
// submit a generation and receive its tokens, cancel, report statistics.
//
// The production implementation is EngineBackend (engine_backend.h: the
// engine over the CPU runner, the model's tokenizer and chat template).
// FakeBackend (fake_backend.h, test-only library kvs_server_testing) serves
// a fixed story without a model.
//
// A generation is an engine::ValidatedRequest: validated once, at the API
// boundary, against Info().limits; the backend and its engine trust it.
//
// Generation contract:
//   * Submit either fails (nothing else happens) or accepts; an accepted
//     request gets its chunks through on_chunk, in order, each call made by
//     posting to `executor` (the consumer's serial executor, e.g. the
//     connection's strand), and EXACTLY ONE of them is final (finish set),
//     after which the callback is dropped and never called again. This holds
//     for cancelled and failed requests too, and is what the service relies
//     on to count requests in flight.
//   * Chunks may merge: a consumer that is slower than the engine gets the
//     tokens of several steps in one chunk, never a queue of them.
//   * Cancel(id) of an unknown or finished id is a no-op; otherwise the
//     final chunk (finish kCancelled) follows promptly and the request's KV
//     blocks are freed.
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/prompt.h"
#include "api/response.h"
#include "backend/runner_options.h"
#include "base/status.h"
#include "engine/engine.h"
#include "grammar/reasoning.h"
#include "grammar/tool_calls.h"
#include "grammar/vocabulary.h"

namespace kvs::server {

struct GenerationChunk {
  std::vector<api::TokenOutput> tokens;  // may be empty (e.g. the final chunk of a cancel)
  engine::FinishReason finish = engine::FinishReason::kNone;  // set on the final chunk only
  Status error;                          // with kError: why
  std::string text_tail;                 // final chunk: text left in the detokenizer
  // Known from the first chunk with tokens on (-1 / nullopt before):
  int32_t num_cached_tokens = -1;  // prompt tokens served from the prefix cache
  // Output tokens generated so far, counting a stop token (EOS) that is not
  // in `tokens`; -1 when the backend reports every token in `tokens`.
  int32_t num_output_tokens = -1;
  std::optional<double> queue_seconds;  // arrival to first scheduling

  bool finished() const { return finish != engine::FinishReason::kNone; }
};

using ChunkCallback = std::function<void(GenerationChunk)>;
// Runs a function on the consumer's executor, one at a time and in order.
using Executor = std::function<void(std::function<void()>)>;

struct ModelInfo {
  std::string name;                 // served id
  std::string path;
  std::string architecture;         // "llama", "fake", ...
  int64_t trained_context_length = 0;
  // Effective limits of a request (context: min(config, the model's own)).
  engine::RequestLimits limits;
  bool has_chat_template = false;
};

// The start-up memory plan's accounts.
struct MemoryAccounts {
  uint64_t weights_bytes = 0;
  uint64_t kv_pool_bytes = 0;
  uint64_t activation_bytes = 0;
  uint64_t overhead_bytes = 0;  // the plan's runtime overhead account (stacks, allocator, code)
};

struct BackendStats {
  engine::EngineStats engine;
  MemoryAccounts memory;
  int64_t max_admissible_context = 0;  // longest request (prompt + output) that fits right now
  // Tensor parallel: every rank's work so far (empty otherwise).
  std::vector<backend::ParallelRankStats> parallel_ranks;
};

// A rendered chat prompt (api/prompt.h: what prompt preparation reads).
using ChatPrompt = api::ChatPrompt;

class InferenceBackend {
 public:
  virtual ~InferenceBackend() = default;

  virtual const ModelInfo& Info() const = 0;

  // add_special: add BOS (and what else the model's tokenizer adds). Special
  // token text in `text` (e.g. "<|im_start|>") is recognized.
  virtual StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) = 0;
  // InvalidArgument for an id outside the vocabulary.
  virtual StatusOr<std::string> Detokenize(std::span<const int32_t> ids) = 0;
  // A token's text as the vocabulary stores it ("▁upon", "Ġthe"; what
  // /tokenize returns as token_strs). "" for an id out of range.
  virtual std::string TokenString(int32_t id) = 0;
  // The model's chat template applied to a conversation, and its tokens.
  // messages: OpenAI-style [{"role", "content": string}...] (content parts
  // already flattened to a string); tools: [] or the request's tools. Key
  // order is the client's (templates may render schemas with tojson).
  // Only the template's own text can become control tokens: text that came
  // from the request (content, names, tool calls and results, tool
  // definitions) is tokenized as plain text, so "<|im_start|>" in a message
  // is characters, never a forged turn (tmpl::RenderChat). This is the one
  // way messages become tokens: chat requests of every dialect, /tokenize
  // with messages and warm prompts all call it. template_kwargs: extra
  // template variables (an object: chat_template_kwargs, reasoning_effort,
  // enable_thinking), the request's data like the messages.
  virtual StatusOr<ChatPrompt> RenderChatPrompt(const nlohmann::ordered_json& messages,
                                                const nlohmann::ordered_json& tools, bool add_generation_prompt,
                                                const nlohmann::ordered_json& template_kwargs) = 0;

  // The model's tokens for constrained decoding (grammar masks are as wide
  // as Info().limits.vocab_size); nullptr when this backend cannot
  // constrain its output (requests asking for it get a 400).
  virtual std::shared_ptr<const grammar::Vocabulary> GrammarVocabulary() { return nullptr; }
  // The syntax the model writes tool calls in (from its chat template);
  // kNone: tool calls are not parsed and cannot be forced.
  virtual grammar::ToolCallFormat ToolCallFormat() { return grammar::ToolCallFormat::kNone; }
  // The model's reasoning section syntax (from its chat template, or
  // model.reasoning_parser); disabled: chat replies are all content.
  virtual grammar::ReasoningFormat ReasoningFormat() { return {}; }

  virtual Status Submit(engine::ValidatedRequest request, Executor executor, ChunkCallback on_chunk) = 0;
  // Validates against Info().limits (engine::ValidatedRequest::Validate: its
  // InvalidArgument / OutOfRange), then submits as above.
  Status Submit(engine::Request request, Executor executor, ChunkCallback on_chunk) {
    auto v = engine::ValidatedRequest::Validate(std::move(request), Info().limits);
    if (!v.ok()) return v.status();
    return Submit(std::move(*v), std::move(executor), std::move(on_chunk));
  }
  virtual void Cancel(const std::string& request_id) = 0;
  virtual BackendStats Stats() = 0;
  // The prefix cache's stored/evicted block hashes after `since` of log
  // `epoch` (kvcache/cache_events.h), for routers; nullopt when this backend
  // publishes none. Blocks are Stats().engine.block_size tokens.
  virtual std::optional<kvcache::CacheEventsPage> CacheEvents(uint64_t /*epoch*/, uint64_t /*since*/,
                                                             size_t /*max_events*/) {
    return std::nullopt;
  }

  // Cancels everything, delivers the final chunks (posted to their
  // executors) and stops backend threads. Idempotent.
  virtual void Shutdown() = 0;
};

}  // namespace kvs::server
