// The per-request types of the engine's public API: what a caller submits
// (Request) and the channel its output comes back on (RequestStream, a
// sequence of StreamChunks).
//
// A stream delivers the request's output tokens in order, in chunks, and
// ends with exactly one final chunk (finish_reason != kNone): stop, length,
// cancelled or error. If the consumer is slower than the engine, pending
// tokens merge into one chunk, so nothing is lost and nothing waits on the
// consumer. After the final chunk, Next returns OutOfRange. A consumer that
// does not want to block in Next registers SetOnReady: it is told whenever
// output becomes available and then takes it with Next(0).
// Thread-safety: RequestStream is shared by the engine thread (producer) and
// one consumer thread; all its methods are thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "engine/sequence.h"
#include "grammar/compiled_grammar.h"

namespace kvs::engine {

struct Request {
  std::string request_id;                // "": the engine assigns "req-<n>"; unique among live requests
  std::vector<int32_t> prompt_token_ids; // [num_prompt_tokens], each in [0, vocab_size)
  SamplingParams sampling;
  int32_t priority = 0;                  // lower first; used by SchedulingPolicy::kPriority
  // Requests share cached prefixes only within one salt. Opaque bytes kept
  // with every cached first block: callers with long or secret salts pass a
  // digest of them (the server does).
  std::string cache_salt;
  // Constrained decoding (response_format, guided_*, tool_choice): every
  // output token is drawn from the grammar's mask. Compiled by the API layer
  // (off the engine thread) for this engine's vocabulary (its mask width is
  // vocab_size); the engine gives the sequence its own matcher. nullptr: free text.
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
};

// What a request must fit: the engine's configuration and its runner.
struct RequestLimits {
  int32_t vocab_size = 0;
  int32_t max_context_length = 0;  // prompt + max_tokens
  int32_t block_size = 1;
  int32_t num_blocks = 0;          // the whole KV pool

  bool operator==(const RequestLimits&) const = default;
};

// The one validation of a request (ValidatedRequest::Validate runs it).
// InvalidArgument: empty prompt, token outside the vocabulary, bad sampling
//   parameters (SamplingParams::Validate), a grammar of another vocabulary.
// OutOfRange: prompt + max_tokens > max_context_length, or more KV blocks
//   than the whole pool could ever give it.
Status ValidateRequest(const Request& request, const RequestLimits& limits);

// A Request that ValidateRequest accepted for some RequestLimits. Only
// Validate makes one, so whoever takes it (Engine::Submit, a server's
// backend) trusts it: the server validates once where a request enters, to
// answer before queueing anything, and the engine does not check it again
// (Engine::Submit keeps a cheap CHECK of its invariants).
// Invariants: request() passed ValidateRequest(request(), limits()); only
// fields no limit concerns change afterwards (the setters).
// Thread-safety: value type.
class ValidatedRequest {
 public:
  static StatusOr<ValidatedRequest> Validate(Request request, const RequestLimits& limits);

  const Request& request() const { return request_; }
  const RequestLimits& limits() const { return limits_; }

  // Per-submission fields that no limit concerns.
  void set_request_id(std::string id) { request_.request_id = std::move(id); }
  void set_seed(std::optional<uint64_t> seed) { request_.sampling.seed = seed; }
  void set_priority(int32_t priority) { request_.priority = priority; }
  void set_cache_salt(std::string salt) { request_.cache_salt = std::move(salt); }

  // The request itself, for the engine that runs it.
  Request Release() && { return std::move(request_); }

 private:
  ValidatedRequest(Request request, const RequestLimits& limits) : request_(std::move(request)), limits_(limits) {}

  Request request_;
  RequestLimits limits_;
};

// Logprobs of one output token (see sampler.h for what they are).
struct OutputLogprobs {
  float logprob = 0.0f;
  std::vector<TokenLogprob> top;  // [SamplingParams::logprobs], most likely first
};

struct RequestTimings {
  double queue_time_s = 0.0;  // arrival -> first scheduled; 0 until then
  double ttft_s = 0.0;        // arrival -> first output token; 0 until then
  double e2e_s = 0.0;         // arrival -> finish; final chunk only
};

struct StreamChunk {
  std::vector<int32_t> token_ids;        // new output tokens, in order; never the matched stop token
  std::vector<OutputLogprobs> logprobs;  // parallel to token_ids when logprobs were asked for
  std::vector<double> token_times_s;     // parallel to token_ids: seconds from arrival to sampling

  FinishReason finish_reason = FinishReason::kNone;  // set on the final chunk only
  std::optional<int32_t> stop_token_id;  // the EOS/stop id that ended the request (kStop)
  Status error;                          // why, for kError

  // Cumulative, as of this chunk.
  int32_t num_prompt_tokens = 0;
  int32_t num_output_tokens = 0;           // generated so far, the stop token included
  int32_t num_cached_tokens = 0;           // prompt tokens served by the prefix cache
  int32_t num_computed_prompt_tokens = 0;  // prompt positions computed (more than prompt - cached
                                           // after a preemption recomputed them)
  int32_t num_preemptions = 0;
  RequestTimings timings;

  bool finished() const { return finish_reason != FinishReason::kNone; }
};

class RequestStream {
 public:
  explicit RequestStream(std::string request_id) : request_id_(std::move(request_id)) {}
  RequestStream(const RequestStream&) = delete;
  RequestStream& operator=(const RequestStream&) = delete;

  const std::string& request_id() const { return request_id_; }

  // The output produced since the previous call, waiting up to `timeout`
  // for some. DeadlineExceeded when nothing came in time; OutOfRange once
  // the final chunk has been returned.
  StatusOr<StreamChunk> Next(std::chrono::milliseconds timeout);
  // Waits as long as it takes.
  StatusOr<StreamChunk> Next();

  // Whether the final chunk has been produced (it may not be taken yet).
  bool finished() const;

  // Calls fn whenever output becomes available to a consumer that has taken
  // everything before (at most one call per batch of merged output), from
  // the engine thread, or at once from this thread if output is already
  // waiting. fn must not block; it typically posts a Next(0) to the
  // consumer's executor. Set at most once.
  void SetOnReady(std::function<void()> fn);

  // Engine side: merges `delta` into the pending chunk and wakes the
  // consumer. Only the engine calls it; once with a final chunk, then never.
  void Push(StreamChunk delta);

 private:
  StatusOr<StreamChunk> TakeLocked();

  const std::string request_id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  StreamChunk pending_;        // guarded by mu_
  bool has_pending_ = false;   // guarded by mu_
  bool final_pushed_ = false;  // guarded by mu_
  bool final_taken_ = false;   // guarded by mu_
  // Set once under mu_, then only read; called without the lock.
  std::function<void()> on_ready_;
};

}  // namespace kvs::engine
