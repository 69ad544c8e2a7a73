// OpenAI's Responses API (POST /v1/responses) over the chat engine path.
//
// Request: `input` (a string, or items: messages with input_text /
// output_text parts, function_call and function_call_output items),
// `instructions` (a system message), `max_output_tokens`, `temperature`,
// `top_p`, function `tools` (flat: {"type": "function", "name", "parameters"}),
// `tool_choice`, `parallel_tool_calls`, `text.format` (text, json_object,
// json_schema), `stream`; kvserve's sampling extras (seed, top_k, min_p,
// penalties) as on chat completions. It is rewritten into a chat completion
// body and parsed by ParseChatRequest, so validation and limits are the same;
// error params name the Responses field. Refused with 400: state kept on
// the server (previous_response_id, conversation, background), hosted tools
// (web_search, file_search, ...), non-text input parts, logprobs,
// truncation "auto", max_tool_calls.
//
// `reasoning.effort` is the chat template's reasoning_effort; reasoning
// input items become the next assistant turn's reasoning_content.
//
// Response: a "response" object with output items ("reasoning" with
// "reasoning_text" content, "message" with "output_text" content,
// "function_call"), status "completed" or "incomplete"
// (incomplete_details.reason "max_output_tokens"), usage in input/output
// tokens (output_tokens_details.reasoning_tokens). Streaming sends OpenAI's
// typed events, each with a sequence_number: response.created,
// response.in_progress, response.output_item.added,
// response.content_part.added, response.reasoning_text.delta / .done,
// response.output_text.delta / .done, response.content_part.done,
// response.function_call_arguments.delta / .done, response.output_item.done,
// and response.completed (or response.incomplete); errors as an "error" event.
// Thread-safety: pure function; a shape is one request's value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/dialect_shape.h"
#include "api/openai_request.h"

namespace kvs::api {

std::optional<ApiError> ParseResponsesRequest(const Json& body, ParsedRequest* out);

// id: "resp_..."; echo: ParsedRequest::dialect_echo.
std::unique_ptr<DialectShape> MakeResponsesShape(std::string id, int64_t created_at, std::string model,
                                                 nlohmann::json echo);

}  // namespace kvs::api
