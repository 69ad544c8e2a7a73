// GenerationJob: one /v1/completions, /v1/chat/completions, /v1/responses or
// /v1/messages request from
// submission to its last byte. It submits n choices per prompt to the
// backend as engine::Requests (the parsed request's SamplingParams, the
// prompt's tokens and max_tokens), and turns their token chunks into the
// client's response through api::ChoiceText (stop strings, logprobs) and
// the api::DialectShape of the request's dialect (api::Dialects(): whole
// JSON, or SSE events), the one interface to every API shape; it reports
// usage (with prompt_tokens_details.cached_tokens) and metrics.
//
// A chat reply of a model with a reasoning format goes through a
// grammar::ReasoningStreamParser first: the reasoning section goes out as
// reasoning (reasoning_content, thinking blocks, reasoning items), and only
// the content after it meets the stop strings (a stop string inside the
// reasoning does not end the reply, as in vLLM) and the tool-call parser.
//
// Ends early on: client disconnect (backend requests cancelled at once),
// request timeout (504, or an SSE error event once streaming), Abort (e.g.
// drain deadline: 503 / error event), or a backend error (500 / event).
//
// Invariants: the response is finished exactly once (done_fn runs then);
// every choice is either never submitted or gets exactly one backend final
// chunk, and each releases one of the sequence slots the service reserved
// (sequences_in_flight) exactly once.
// Thread-safety: all methods run on the exchange's strand; the backend
// delivers chunks by posting to it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/dialect.h"
#include "api/openai_request.h"
#include "api/response.h"
#include "grammar/reasoning.h"
#include "http/http_server.h"
#include "server/backend.h"
#include "server/server_metrics.h"

namespace kvs::server {

using Clock = std::chrono::steady_clock;

struct JobEnv {
  InferenceBackend* backend = nullptr;
  ServerMetrics* metrics = nullptr;
  std::atomic<int64_t>* sequences_in_flight = nullptr;  // n slots per prompt are reserved before Start
  std::string model_name;
  double timeout_seconds = 0;  // 0: none
};

struct PreparedPrompt {
  // The prompt's engine request, validated once against the backend's
  // limits (its tokens, max_tokens, sampling, compiled output constraint,
  // cache salt and priority); each choice submits a copy with its own id and
  // seed. Always set once prepared.
  std::optional<engine::ValidatedRequest> request;
  std::string echo_text;  // completions with echo: the prompt's text
  // chat: where the reply starts relative to a reasoning section (the
  // rendered prompt may have opened or closed one).
  grammar::ReasoningStart reasoning_start = grammar::ReasoningStart::kContent;

  const std::vector<int32_t>& tokens() const { return request->request().prompt_token_ids; }
};

// What the access log and the status metric need once the response ended.
struct JobSummary {
  int status = 200;  // 499: the client left before any response
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<double> ttft_ms;
  std::string finish_reason;  // of the first choice (the only one, usually)
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  using DoneFn = std::function<void(const JobSummary&)>;

  GenerationJob(JobEnv env, std::shared_ptr<http::Exchange> ex, api::ParsedRequest req,
                std::vector<PreparedPrompt> prompts, std::string id, DoneFn done);

  // Submits every choice and starts answering. On the strand.
  void Start();
  // Ends the request with `error` (503 / SSE error event) and cancels the
  // backend requests; finish_reason is the metric label. On the strand.
  void Abort(const api::ApiError& error, const std::string& finish_reason);

  const std::string& id() const { return id_; }
  const std::shared_ptr<http::Exchange>& exchange() const { return ex_; }
  bool finished() const { return finished_; }

 private:
  struct Choice {
    int index = 0;
    int prompt_index = 0;
    std::string backend_id;
    bool submitted = false;
    bool backend_final = false;  // final chunk received, slot released
    bool done = false;           // the client-visible end is decided
    std::string finish_reason;
    api::ChoiceText text;        // stop strings and logprob alignment
    std::string answer;          // non-streaming: the answer so far (the echo is the shape's)
    int64_t completion_tokens = 0;
    int64_t cached_tokens = -1;
    bool got_token = false;
    bool queue_observed = false;
    Clock::time_point first_token;
    Clock::time_point last_token;
    int64_t timed_tokens = 0;    // tokens received with a time (not a stop token counted at the end)
    std::vector<api::LogprobToken> logprobs;  // non-streaming: accumulated
    // chat with tools: separates tool calls from content as text arrives.
    std::unique_ptr<grammar::ToolCallStreamParser> tool_parser;
    // chat with a reasoning model: separates the reasoning section first.
    std::unique_ptr<grammar::ReasoningStreamParser> reasoning;
    std::string reasoning_text;    // non-streaming: the reasoning so far
    int64_t reasoning_tokens = 0;  // tokens fed while inside the section
  };

  void OnChunk(int index, GenerationChunk chunk);
  void OnClientClosed();
  void OnTimeout();
  // Sends released text (and the logprobs it covers) of a choice.
  void Emit(Choice& c, const std::string& text);
  // Sends (or, not streaming, keeps) reasoning text of a choice.
  void EmitReasoning(Choice& c, const std::string& text);
  void ChoiceDone(Choice& c, std::string finish_reason);
  // Streams a tool-call parser's output (content, then call fragments).
  void SendToolDelta(Choice& c, const grammar::StreamDelta& d, std::vector<api::LogprobToken> logprobs);
  void Complete();
  void Fail(const api::ApiError& error, const std::string& finish_reason);
  void CancelUnfinished();
  void ReleaseSlot(Choice& c);
  void Finish(int status);

  api::Usage Usage() const;
  // Writes a shape's events (one write).
  void Send(const std::vector<api::SseOut>& events);

  JobEnv env_;
  std::shared_ptr<http::Exchange> ex_;
  api::ParsedRequest req_;
  std::vector<PreparedPrompt> prompts_;
  std::string id_;
  DoneFn done_;
  std::unique_ptr<api::DialectShape> shape_;  // the request's dialect: every byte of the answer
  std::vector<Choice> choices_;
  bool finished_ = false;  // response ended (or the client left)
  std::optional<Clock::time_point> first_token_;
};

}  // namespace kvs::server
