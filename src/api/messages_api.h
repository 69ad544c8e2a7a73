// Anthropic's Messages API (POST /v1/messages) over the chat engine path.
//
// Request: `model`, `max_tokens` (required), `messages` (user / assistant;
// content a string or blocks: text, tool_use on assistant turns,
// tool_result on user turns), `system` (a string or text blocks),
// `stop_sequences`, `temperature`, `top_p`, `top_k`, `stream`, custom `tools`
// ({"name", "description", "input_schema"}), `tool_choice` (auto, any, tool,
// none; disable_parallel_tool_use), `thinking` (enabled / disabled: the
// template's enable_thinking; adaptive: its default), `metadata` (ignored);
// kvserve's `cache_salt` and `priority` as on chat completions. Thinking
// blocks of assistant turns become their reasoning_content. Rewritten into a
// chat completion body and parsed by ParseChatRequest (same validation and
// limits; error params name the Messages field). Refused with 400: image and
// document blocks, server tools (web_search, bash, ...).
//
// Response: {"type": "message", "role": "assistant", "content": [thinking,
// text and tool_use blocks], "stop_reason": end_turn | max_tokens |
// stop_sequence | tool_use, "stop_sequence", "usage": {input_tokens,
// output_tokens, cache_read_input_tokens}}. A thinking block's signature is
// the SHA-256 of its text (no key: nothing to verify). Streaming: named
// events message_start, content_block_start, ping, content_block_delta
// (thinking_delta, signature_delta, text_delta, input_json_delta),
// content_block_stop, message_delta, message_stop; errors
// are {"type": "error", "error": {"type", "message"}} (a body, or an
// "error" event).
// Thread-safety: pure functions; a shape is one request's value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/dialect_shape.h"
#include "api/openai_request.h"

namespace kvs::api {

std::optional<ApiError> ParseMessagesRequest(const Json& body, ParsedRequest* out);

// id: "msg_...".
std::unique_ptr<DialectShape> MakeMessagesShape(std::string id, std::string model);

// An error in Anthropic's shape: {"type": "error", "error": {"type", "message"}}
// with the type its HTTP status has there (invalid_request_error,
// authentication_error, not_found_error, rate_limit_error, overloaded_error...).
nlohmann::json AnthropicErrorJson(const ApiError& e);

// "toolu_" + 24 random alphanumerics: Anthropic's tool_use id form.
std::string MakeToolUseId();

}  // namespace kvs::api
