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

#include <memory>
#include <optional>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "api/dialect_shape.h"
#include "api/error.h"
#include "api/openai_request.h"
#include "api/request_fields.h"

namespace kvs::api {

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

// Every dialect, in route order.
std::span<const DialectEntry> Dialects();
// The entry of (endpoint, dialect); every route's pair has one (CHECKed).
const DialectEntry& FindDialect(Endpoint endpoint, Dialect dialect);

}  // namespace kvs::api
