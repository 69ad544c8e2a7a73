// Parsing model output into content, reasoning and tool calls, whole or
// incrementally while streaming (OpenAI's delta.tool_calls). The formats,
// how cut calls are returned and the arguments' text are described in
// tool_calls.h, which includes this.
// Thread-safety: a ToolCallStreamParser is one sequence's state, used by
// one thread at a time; the functions are pure.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "grammar/tool_call_format.h"

namespace kvs::grammar {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};

struct ParsedOutput {
  std::string content;    // text outside tool calls
  std::string reasoning;  // kHarmony's analysis channel, kCommandR's / kSolarOpen's thinking, kAtem's to=self
  std::vector<ToolCall> tool_calls;
};

struct ToolCallParseOptions {
  // The request's tools (OpenAI form: [{"type": "function", "function":
  // {"name", "parameters"}}]); the syntaxes that write values as text
  // (kQwen3Coder, kGlm45, ...) use parameter types to decide which values
  // are strings. May be null.
  nlohmann::ordered_json tools;
  // Makes call ids ("call_" + 24 characters by default); tests pin it.
  std::function<std::string()> make_id;
};

// One tool-call fragment of a stream chunk, as OpenAI's delta.tool_calls[i]:
// the first fragment of a call carries id and name, later ones argument text.
struct ToolCallDelta {
  int32_t index = 0;
  std::optional<std::string> id;
  std::optional<std::string> name;
  std::string arguments;
};

struct StreamDelta {
  std::string content;
  std::string reasoning;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

class ToolCallStreamParser {
 public:
  ToolCallStreamParser(ToolCallFormat format, ToolCallParseOptions options = {});
  ~ToolCallStreamParser();
  ToolCallStreamParser(ToolCallStreamParser&&) noexcept;
  ToolCallStreamParser& operator=(ToolCallStreamParser&&) noexcept;

  // Text newly decoded; returns what can be sent now. Text that may still
  // turn out to start a tool call is held back until it is decided.
  StreamDelta Feed(std::string_view text);
  // The output ended: releases what was held back.
  StreamDelta Finish();
  // Everything so far, aggregated (after Finish: the final message).
  const ParsedOutput& result() const;

 private:
  friend ParsedOutput ParseToolCalls(ToolCallFormat format, std::string_view text, const ToolCallParseOptions& options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whole-output parsing: the stream parser fed everything at once. When a
// finished call is malformed (its arguments not a JSON object, or, in a
// decoded syntax, not decodable to the end) the output is returned as plain
// content without tool calls (as vLLM does); a call the output ended in is
// kept as the stream gives it (above).
ParsedOutput ParseToolCalls(ToolCallFormat format, std::string_view text, const ToolCallParseOptions& options = {});

// "call_" + 24 random alphanumerics (Mistral's 9-character form for kMistral,
// Solar Open's 10 of [a-z0-9] for kSolarOpen).
std::string MakeToolCallId(ToolCallFormat format);

}  // namespace kvs::grammar
