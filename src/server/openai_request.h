// OpenAI request parsing and validation: JSON bodies of /v1/completions and
// /v1/chat/completions become a ParsedRequest, or an ApiError that names the
// offending field (OpenAI's error shape: {"error": {"message", "type",
// "param", "code"}}).
//
// Validation happens once, here; everything downstream trusts a
// ParsedRequest. Fields OpenAI defines but kvserve cannot honour (suffix,
// logit_bias, best_of != n, non-text content parts, tool_choice "required",
// response_format other than text) are refused with 400 rather than
// silently ignored; fields that do not change the output (user, store,
// metadata, parallel_tool_calls, ...) and unknown fields are accepted and
// ignored. A JSON null counts as an absent field.
// Thread-safety: pure functions and value types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvs::server {

// An error response in OpenAI's shape. `extra` fields are merged into the
// error object (e.g. prompt_tokens / max_context_length for too-long input).
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;
  std::string code = "invalid_value";
  nlohmann::json extra = nlohmann::json::object();
  std::optional<int> retry_after_seconds;  // 429/503: sent as Retry-After

  nlohmann::json ToJson() const;  // {"error": {...}}
};

ApiError BadRequest(std::string message, std::optional<std::string> param, std::string code = "invalid_value");

enum class Endpoint { kCompletions, kChatCompletions };

struct PromptInput {
  std::optional<std::string> text;  // a string prompt (tokenized by the service)
  std::vector<int32_t> tokens;      // a token-id prompt (when text is absent)
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;

  std::vector<PromptInput> prompts;  // completions: one or more
  // chat: the messages with content flattened to strings, and the tools
  // for the template ([] with tool_choice "none"), in the client's key order.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();

  std::optional<int64_t> max_tokens;  // absent: the endpoint's default
  std::string max_tokens_param = "max_tokens";  // which field gave it (for errors)
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;

  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  std::optional<int32_t> logprobs;  // top-N alternatives; set when logprobs were asked for
  std::string cache_salt;  // prefix-cache namespace (vLLM's field): KV is shared only within one salt
  int32_t priority = 0;    // lower first, with runtime.scheduling_policy "priority" (vLLM's field)
};

inline constexpr int32_t kMaxN = 128;
inline constexpr int32_t kMaxLogprobs = 20;
inline constexpr size_t kMaxStops = 16;
inline constexpr size_t kMaxPrompts = 128;

// Parses a request body into a JSON object (400 invalid_json otherwise).
std::optional<ApiError> ParseJsonObject(std::string_view body, nlohmann::json* out);

std::optional<ApiError> ParseCompletionRequest(const nlohmann::json& body, ParsedRequest* out);
// raw_body: the same body as text, re-read to keep the key order of messages
// and tools ("" when there is none: keys come out sorted).
std::optional<ApiError> ParseChatRequest(const nlohmann::json& body, ParsedRequest* out,
                                         std::string_view raw_body = {});

// The OpenAI "content" of a message as one string: a string as is, an array
// of text parts joined with "\n". Error for other part types.
std::optional<ApiError> FlattenContent(const nlohmann::json& content, const std::string& param, std::string* out);

}  // namespace kvs::server
