// Response building for /v1/completions and /v1/chat/completions, without
// any I/O: the JSON of whole responses and of SSE stream chunks in OpenAI's
// exact shapes (ResponseShape), and per choice the text a client may see:
// stop strings applied, with the logprobs of the tokens that text covers
// (ChoiceText).
// Thread-safety: value types, one per request / choice.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/stop_matcher.h"

namespace kvs::api {

struct TopLogprob {
  int32_t token_id = 0;
  std::string piece;  // the token's own bytes (maybe not valid UTF-8 alone)
  float logprob = 0.0f;
};

// One generated token as the API reports it.
struct TokenOutput {
  int32_t token_id = 0;
  // Text this token completes, from an incremental detokenizer: "" while the
  // token ends in an incomplete UTF-8 sequence (the bytes come out with a
  // later token or with the tail at the end).
  std::string text;
  std::string piece;                     // the token's own bytes, for logprobs
  // A tool-call marker that `text` dropped as a special token
  // (grammar::ToolCallMarkerTokens): its text, for the tool-call parser.
  std::string marker_text;
  // The same for a reasoning delimiter (grammar::ReasoningMarkers), for the
  // reasoning parser (a token may be both, e.g. harmony's <|channel|>).
  std::string reasoning_marker;
  float logprob = 0.0f;                  // when logprobs were asked for
  std::vector<TopLogprob> top_logprobs;  // most likely first
};

// A token whose logprobs are reported, and where its text lies in the
// choice's generated text.
struct LogprobToken {
  TokenOutput token;
  size_t start = 0, end = 0;  // byte range of its text in the generated text
};

// One choice's generated text on its way to the client: text that could be
// the start of a stop string is held back; a completed stop string ends the
// choice and is never released. A token's logprobs go out with the last byte
// of its text; when a stop string cut the text, the tokens that begin before
// the cut are reported and the stop string's own tokens are not; on any
// other end, all are.
class ChoiceText {
 public:
  ChoiceText() = default;
  ChoiceText(std::shared_ptr<const std::vector<std::string>> stops, bool logprobs);

  // A generated token; its released text is appended to *out. True when a
  // stop string completed (the choice is done).
  bool AddToken(TokenOutput t, std::string* out);
  // Generation ended without error: releases the detokenizer's tail and
  // whatever was held back (unless a stop string completes in the tail).
  // True when a stop string cut the text.
  bool End(std::string_view tail, std::string* out);
  // Ends the choice without releasing anything more (error, cancel).
  void Abandon() { done_ = true; }

  // The logprobs of tokens whose text has been released (all of them once
  // the choice is done, except a stop string's own tokens).
  std::vector<LogprobToken> TakeReadyLogprobs();

  bool done() const { return done_; }
  bool cut_by_stop() const { return cut_by_stop_; }
  const std::string& matched_stop() const { return matched_stop_; }  // the stop string that cut it

 private:
  StopMatcher stop_;
  bool logprobs_ = false;
  std::deque<LogprobToken> pending_;
  size_t generated_bytes_ = 0;  // generated text received (before stop handling)
  size_t released_bytes_ = 0;   // generated text released to the client
  bool done_ = false;
  bool cut_by_stop_ = false;
  std::string matched_stop_;
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;
  // Output tokens inside reasoning sections (grammar/reasoning.h); set when
  // the request's model has a reasoning format, reported as
  // completion_tokens_details.reasoning_tokens.
  std::optional<int64_t> reasoning_tokens;
};

// A choice of a whole (non-streamed) response.
struct FinalChoice {
  int index = 0;
  std::string text;
  nlohmann::json logprobs;  // null when none were asked for
  std::string finish_reason;
  // chat: message.tool_calls ([{"id", "type": "function", "function":
  // {"name", "arguments"}}]); null: none (content null when text is empty).
  nlohmann::json tool_calls;
  // chat: message.reasoning_content; nullopt: the model has no reasoning
  // format (no field); "": none was written (null).
  std::optional<std::string> reasoning;
};

// The JSON shapes of one response. Chat: "chat.completion" /
// "chat.completion.chunk" with message / delta; completions:
// "text_completion" with text.
class ResponseShape {
 public:
  ResponseShape(std::string id, int64_t created, std::string model, bool chat, bool include_usage);

  // Stream chunks.
  nlohmann::json StartChunk(int index, const std::string& echo_text) const;  // null: nothing to send
  nlohmann::json DeltaChunk(int index, const std::string& text, nlohmann::json logprobs) const;
  nlohmann::json FinishChunk(int index, const std::string& finish_reason) const;
  // chat: a delta with tool-call fragments (OpenAI's delta.tool_calls: the
  // first fragment of a call has index, id, type and function.name, later
  // ones index and function.arguments text).
  nlohmann::json ToolCallsChunk(int index, nlohmann::json tool_calls) const;
  // chat: a delta with reasoning text (delta.reasoning_content, the name
  // vLLM, llama.cpp and DeepSeek use).
  nlohmann::json ReasoningChunk(int index, const std::string& text) const;
  nlohmann::json UsageChunk(const Usage& u) const;

  // The whole response.
  nlohmann::json Body(const std::vector<FinalChoice>& choices, const Usage& u) const;

  // Logprobs of some tokens of a choice whose generated text starts at
  // byte offset_base of the choice's text (after an echoed prompt).
  nlohmann::json Logprobs(size_t offset_base, const std::vector<LogprobToken>& tokens) const;
  // Appends the token lists of `add` to `acc` (null acc: becomes add).
  static void AppendLogprobs(nlohmann::json& acc, const nlohmann::json& add);
  static nlohmann::json UsageJson(const Usage& u);

  bool chat() const { return chat_; }
  const std::string& id() const { return id_; }

 private:
  nlohmann::json ChunkBase() const;

  std::string id_;
  int64_t created_;
  std::string model_;
  bool chat_;
  bool include_usage_;
};

}  // namespace kvs::api
