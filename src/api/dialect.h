// The API dialects a generation is asked and answered in, and their one
// registry (Dialects()): OpenAI's Completions (/v1/completions) and Chat
// Completions (/v1/chat/completions, response.h), OpenAI's Responses API
// (/v1/responses, responses_api.h) and Anthropic's Messages API
// (/v1/messages, messages_api.h). An entry says where the dialect is served,
// how its body is parsed into a ParsedRequest (the dialects other than
// Completions become a chat request), the prefix of its response ids, how an
// error looks in it, and makes the DialectShape that answers one request:
// each choice's output (reasoning, text with its logprobs, and tool calls, in
// order) goes in; SSE events or the whole response body come out. The
// generation job (server/generation.h) talks to nothing else, so a dialect is
// one entry here plus its parser and shape (docs/developers.md, "Adding a
// dialect").
//
// Invariants: Start (when streaming) comes first; per choice, its output,
// then FinishChoice once; End once, last. Body() describes exactly what the
// events described. The Responses and Messages shapes serve one choice
// (n = 1, index 0).
// Thread-safety: a shape is a value per request, used on the request's
// strand; the registry is immutable.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/error.h"
#include "api/openai_request.h"
#include "api/response.h"
#include "grammar/tool_calls.h"

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

// One dialect of the registry.
struct DialectEntry {
  const char* path;       // POST route
  Endpoint endpoint;      // the request shape it is parsed into
  Dialect dialect;
  const char* name;       // in `kvserve serve --print-routes`
  const char* id_prefix;  // of response ids: "cmpl-", "chatcmpl-", "resp_", "msg_"
  std::optional<ApiError> (*parse)(const Json& body, ParsedRequest* out);
  std::unique_ptr<DialectShape> (*make_shape)(ShapeOptions options);
  nlohmann::json (*error_json)(const ApiError& e);  // an error body (before any stream)
  // Ids of parsed tool calls; nullptr: the tool-call parser's ("call_...").
  std::string (*tool_call_id)();
};

// The shapes of OpenAI's Chat Completions and Completions (response.cc).
std::unique_ptr<DialectShape> MakeChatShape(ShapeOptions options);
std::unique_ptr<DialectShape> MakeCompletionsShape(ShapeOptions options);

// Every dialect, in route order.
std::span<const DialectEntry> Dialects();
// The entry of (endpoint, dialect); every route's pair has one (CHECKed).
const DialectEntry& FindDialect(Endpoint endpoint, Dialect dialect);

// Helpers of the dialects' request parsers.
namespace dialect {
// A field's value; nullptr when absent or null.
const Json* Field(const Json& obj, const char* name);
std::optional<ApiError> WrongType(const std::string& param, const char* want, const Json& got);
// 400 unsupported_parameter: "'param' is not supported: why".
std::optional<ApiError> NotSupported(const std::string& param, const std::string& why);
// obj[name] as a string (p names obj in errors); 400 when absent or not one.
std::optional<ApiError> RequiredString(const Json& obj, const char* name, const std::string& p, std::string* out);
// obj[name], which must be present (p names obj in errors): 400
// missing_required_parameter when absent or null.
std::optional<ApiError> Required(const Json& obj, const char* name, const std::string& p, const Json** out);
// The text of a content value: a string as it is, or an array of parts
// whose texts are joined with "\n". part_text checks one part (an object; p
// is its param name) and says its text: the APIs differ in which part types
// they serve. `parts` and `part` name them in type errors ("content parts",
// "an object"). *out is set only on success.
using PartText = std::function<std::optional<ApiError>(const Json& part, const std::string& p, std::string* text)>;
std::optional<ApiError> JoinedText(const Json& content, const std::string& param, const char* parts, const char* part,
                                   const PartText& part_text, std::string* out);
// ParseChatRequest's errors in the dialect's field names: the first
// matching (from, to) prefix of the param is replaced, and in the message.
ApiError RenameParam(ApiError e, const std::vector<std::pair<std::string, std::string>>& prefixes);
}  // namespace dialect

}  // namespace kvs::api
