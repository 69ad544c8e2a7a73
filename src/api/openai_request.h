// OpenAI request parsing and validation: JSON bodies of /v1/completions,
// /v1/chat/completions, /tokenize and /detokenize become a ParsedRequest
// (with the engine's SamplingParams, so nothing downstream copies fields
// again), a TokenizeRequest or a DetokenizeRequest, or an ApiError that
// names the offending field (OpenAI's error shape, api/error.h).
//
// The body is parsed once, as an ordered_json (the client's key order
// survives into chat templates that render tool schemas with tojson).
// Validation of the JSON happens once, here, with the engine's own table of
// sampling limits (engine::SamplingLimits: the same ranges and messages);
// the prompt against the model (token ids, context length, KV pool) is
// checked by the server once it is tokenized, where it builds the
// engine::ValidatedRequest the engine trusts. Fields OpenAI defines but
// kvserve cannot honour (suffix, best_of != n, non-text content parts)
// are refused with 400 rather than silently ignored; fields that do not change
// the output (user, store, metadata, parallel_tool_calls, ...) and unknown
// fields are accepted and ignored. A JSON null counts as an absent field.
// Thread-safety: pure functions and value types.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/error.h"
#include "api/request_fields.h"
#include "base/json_depth.h"
#include "engine/sampling_params.h"
#include "grammar/grammar.h"

namespace kvs::api {

enum class Endpoint { kCompletions, kChatCompletions };

// The API shape a chat request came in (and is answered) in: Chat
// Completions, OpenAI's Responses API (/v1/responses) or Anthropic's
// Messages API (/v1/messages); the last two are parsed into a chat request
// (dialect.h), always with one choice.
enum class Dialect { kOpenAI, kResponses, kAnthropic };

struct PromptInput {
  std::optional<std::string> text;  // a string prompt (tokenized by the service)
  std::vector<int32_t> tokens;      // a token-id prompt (when text is absent)
};

struct ParsedRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  Dialect dialect = Dialect::kOpenAI;
  // kResponses: the request's fields the response object repeats
  // (instructions, tools, text, temperature, ...).
  nlohmann::json dialect_echo = nlohmann::json::object();
  std::string model;

  std::vector<PromptInput> prompts;  // completions: one or more
  // chat: the messages with content flattened to strings, and the tools
  // for the template ([] with tool_choice "none"), in the client's key order.
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();

  std::optional<int64_t> max_tokens;  // absent: the endpoint's default (the server resolves it per prompt)
  std::string max_tokens_param = "max_tokens";  // which field gave it (for errors)
  int32_t n = 1;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;

  // temperature, top_p, top_k, min_p, penalties, seed, stop_token_ids,
  // ignore_eos, logprobs; max_tokens is set per prompt by the server.
  engine::SamplingParams sampling;
  std::vector<std::string> stop;
  std::string cache_salt;  // prefix-cache namespace (vLLM's field): KV is shared only within one salt
  int32_t priority = 0;    // lower first, with runtime.scheduling_policy "priority" (vLLM's field)
  // Constrained decoding (structured_output.h): the grammar every choice's
  // output must match; nullptr: free text. constraint_param names the field
  // it came from ("response_format", "guided_regex", ...) for errors.
  std::shared_ptr<const grammar::Grammar> constraint;
  std::string constraint_param;
  // chat: tool_choice. kRequired / kNamed force a call in the model's own
  // syntax (the service builds the grammar: it knows the syntax); tool
  // calls in the answer are parsed into message.tool_calls whenever tools
  // are given (not with kNone).
  enum class ToolChoice { kAuto, kNone, kRequired, kNamed };
  ToolChoice tool_choice = ToolChoice::kAuto;
  std::string tool_choice_name;     // kNamed
  bool parallel_tool_calls = true;
  // chat: extra chat-template variables (an object, {} when none):
  // chat_template_kwargs (vLLM's field, e.g. {"enable_thinking": false}),
  // with reasoning_effort under that name (the variable templates read);
  // the dialects map their thinking switches here (Responses
  // reasoning.effort -> reasoning_effort, Anthropic thinking ->
  // enable_thinking).
  nlohmann::ordered_json template_kwargs = nlohmann::ordered_json::object();
};

// POST /tokenize (vLLM's shape): a prompt, or chat messages rendered with
// the model's template.
struct TokenizeRequest {
  std::optional<std::string> model;  // when given (a non-string model reads as "?")
  std::optional<std::string> prompt;
  ParsedRequest chat;                // messages and tools when prompt is absent
  bool add_special_tokens = true;    // default: true for a prompt, false for messages
  bool return_token_strs = false;
  bool add_generation_prompt = true;
};

// POST /detokenize: {"tokens": [ids]}.
struct DetokenizeRequest {
  std::vector<int32_t> tokens;
};

// Limits of fields that would otherwise cost memory or engine time per
// token without bound (docs/api.md lists every limit).
inline constexpr int32_t kMaxN = 128;
inline constexpr size_t kMaxStopBytes = 1024;       // each stop string
inline constexpr size_t kMaxStopTokenIds = 64;      // scanned per generated token
inline constexpr size_t kMaxCacheSaltBytes = 256;
// Arrays and objects nested deeper than this are refused before parsing
// (every endpoint's body goes through ParseJsonObject).
inline constexpr size_t kMaxJsonDepth = 64;
// Members of one object, and of all the body's objects: parsing an object
// costs its members squared (base/json_depth.h), so these bound a body's
// parse to ~0.3 s at worst (a logit_bias of 2,048 tokens still fits).
inline constexpr size_t kMaxObjectMembers = 2048;
inline constexpr size_t kMaxBodyMembers = 131072;
// Elements of one array, and of all the body's arrays: each costs the
// parser 16-32 bytes (base/json_depth.h), so these bound a body's parsed
// size to ~64 MB whatever it holds (a prompt of 1M token ids still fits).
inline constexpr size_t kMaxArrayElements = size_t{1} << 20;
inline constexpr size_t kMaxBodyElements = size_t{2} << 20;
inline constexpr size_t kMaxStops = 16;
inline constexpr size_t kMaxPrompts = 128;
// chat_template_kwargs, serialized: the variables are rendered into every
// prompt of the request, so they are bounded like a stop list, not a body.
inline constexpr size_t kMaxTemplateKwargsBytes = 65536;
inline constexpr size_t kMaxReasoningEffortBytes = 64;

// Parses a request body into a JSON object (400 invalid_json otherwise,
// also when it nests deeper than kMaxJsonDepth, its objects hold more
// members than kMaxObjectMembers / kMaxBodyMembers, or its arrays more
// elements than kMaxArrayElements / kMaxBodyElements).
std::optional<ApiError> ParseJsonObject(std::string_view body, Json* out);
// JsonNestingDepth (base/json_depth.h) is part of this API's vocabulary.
using ::kvs::JsonNestingDepth;
using ::kvs::CountJsonObjectMembers;

std::optional<ApiError> ParseCompletionRequest(const Json& body, ParsedRequest* out);
std::optional<ApiError> ParseChatRequest(const Json& body, ParsedRequest* out);
std::optional<ApiError> ParseTokenizeRequest(const Json& body, TokenizeRequest* out);
std::optional<ApiError> ParseDetokenizeRequest(const Json& body, DetokenizeRequest* out);

// The OpenAI "content" of a message as one string: a string as is, an array
// of text parts joined with "\n". Error for other part types.
std::optional<ApiError> FlattenContent(const Json& content, const std::string& param, std::string* out);

}  // namespace kvs::api
