// DialectShape: the answer of one request in its API dialect (dialect.h
// lists the dialects). Each choice's output (reasoning, text with its
// logprobs, and tool calls, in order) goes in; SSE events or the whole
// response body come out. Each dialect implements one (openai_shape.h,
// responses_api.h, messages_api.h); the registry (dialect.h) makes them.
//
// Invariants: Start (when streaming) comes first; per choice, its output,
// then FinishChoice once; End once, last. Body() describes exactly what the
// events described. The Responses and Messages shapes serve one choice
// (n = 1, index 0).
// Thread-safety: a shape is a value per request, used on the request's
// strand.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/error.h"
#include "api/response.h"
#include "grammar/tool_call_stream.h"

namespace kvs::api {

// One server-sent event: `event` is the event line ("" for none). `done`:
// instead, the "data: [DONE]" line that ends an OpenAI stream.
struct SseOut {
  std::string event;
  nlohmann::json data;
  bool done = false;
};

// How one choice ended, as the engine and the stop strings decided.
struct ChoiceEnd {
  std::string finish_reason;  // "stop", "length", "tool_calls", "error", ...
  std::string stop_string;    // the stop string that ended it, if one did
};

// A one-choice end with the request's usage (DialectShape::Finish).
struct DialectEnd {
  std::string finish_reason;
  std::string stop_string;
  Usage usage;
};

// What a shape needs to know of its request.
struct ShapeOptions {
  std::string id;  // the response id (the dialect's id_prefix + random)
  int64_t created = 0;  // Unix seconds
  std::string model;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;       // logprobs were asked for
  bool reasoning = false;      // chat: the model has a reasoning format (reasoning_content is reported)
  // One entry per choice (its size is the choice count): the echoed prompt
  // text before the choice's output ("": no echo).
  std::vector<std::string> choice_echo;
  nlohmann::json request_echo = nlohmann::json::object();  // ParsedRequest::dialect_echo
};

class DialectShape {
 public:
  virtual ~DialectShape() = default;
  // The opening events of a stream (usage: prompt tokens known so far).
  virtual std::vector<SseOut> Start(const Usage& usage) = 0;
  // Reasoning text of a choice (chat: reasoning_content; Responses: a
  // reasoning item; Messages: a thinking block).
  virtual std::vector<SseOut> Reasoning(int choice, std::string_view text) = 0;
  // Content text, in order with tool-call fragments, and the logprobs of the
  // tokens it completes (empty when none were asked for).
  virtual std::vector<SseOut> Text(int choice, std::string_view text, std::vector<LogprobToken> logprobs) = 0;
  // Tool-call fragments (the first of a call has id and name).
  virtual std::vector<SseOut> ToolCalls(int choice, std::span<const grammar::ToolCallDelta> calls) = 0;
  // A choice has ended (after all its output).
  virtual std::vector<SseOut> FinishChoice(int choice, const ChoiceEnd& end) = 0;
  // Every choice has ended: closes what is open and ends the stream.
  virtual std::vector<SseOut> End(const Usage& usage) = 0;
  // The whole response (after End).
  virtual nlohmann::json Body() const = 0;
  // An error once the stream has started: its event; and the events that
  // end the stream with it (the event, then what the dialect ends with).
  virtual SseOut StreamError(const ApiError& e) = 0;
  virtual std::vector<SseOut> FailStream(const ApiError& e) { return {StreamError(e)}; }
  // An error as a whole body.
  virtual nlohmann::json ErrorBody(const ApiError& e) const = 0;

  // One-choice shorthands (choice 0).
  std::vector<SseOut> Reasoning(std::string_view text) { return Reasoning(0, text); }
  std::vector<SseOut> Text(std::string_view text) { return Text(0, text, {}); }
  std::vector<SseOut> ToolCall(const grammar::ToolCallDelta& d) { return ToolCalls(0, std::span(&d, 1)); }
  // FinishChoice(0, ...) then End(end.usage).
  std::vector<SseOut> Finish(const DialectEnd& end);
};

}  // namespace kvs::api
