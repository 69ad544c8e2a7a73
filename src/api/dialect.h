// API dialects beyond Chat Completions: OpenAI's Responses API
// (/v1/responses, responses_api.h) and Anthropic's Messages API
// (/v1/messages, messages_api.h). Each is parsed into the same ParsedRequest
// a chat completion becomes (Dialect says which shape the answer takes), and
// answered through a DialectShape: the one choice's output (reasoning, text
// and tool calls, in order) goes in; SSE events or the whole response body
// come out.
//
// Invariants: a shape serves one request with one choice (n = 1); Start (when
// streaming) comes first, Finish once, last. Body() describes exactly what the
// events described (both are built from the same items).
// Thread-safety: a value per request, used on the request's strand.
#pragma once

#include <functional>
#include <optional>
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

// One server-sent event: `event` is the event line ("" for none).
struct SseOut {
  std::string event;
  nlohmann::json data;
};

// How the generation ended, as the engine and the stop strings decided.
struct DialectEnd {
  std::string finish_reason;  // "stop", "length", "tool_calls"
  std::string stop_string;    // the stop string that ended it, if one did
  Usage usage;
};

class DialectShape {
 public:
  virtual ~DialectShape() = default;
  // The opening events of a stream (usage: prompt tokens known so far).
  virtual std::vector<SseOut> Start(const Usage& usage) = 0;
  // Reasoning text (Responses: a reasoning item; Messages: a thinking block).
  virtual std::vector<SseOut> Reasoning(std::string_view text) = 0;
  // Content text, in order with tool-call fragments.
  virtual std::vector<SseOut> Text(std::string_view text) = 0;
  // A tool-call fragment (the first of a call has id and name).
  virtual std::vector<SseOut> ToolCall(const grammar::ToolCallDelta& d) = 0;
  // Closes what is open and ends the stream.
  virtual std::vector<SseOut> Finish(const DialectEnd& end) = 0;
  // The whole response (after Finish).
  virtual nlohmann::json Body() const = 0;
  // An error once the stream has started; and as a whole body.
  virtual SseOut StreamError(const ApiError& e) = 0;
  virtual nlohmann::json ErrorBody(const ApiError& e) const = 0;
};

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
