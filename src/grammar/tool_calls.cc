// Tool-call formats: recognition from chat templates, markers, ids, and
// whole-output parsing (tool_calls.h).
#include "grammar/tool_calls.h"

#include <algorithm>
#include <random>

#include "grammar/reasoning.h"

namespace kvs::grammar {

namespace {

bool Has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

}  // namespace

ToolCallFormat DetectToolCallFormat(std::string_view t) {
  if (Has(t, "<|channel|>") && (Has(t, "<|constrain|>") || Has(t, "to=functions"))) return ToolCallFormat::kHarmony;
  if (Has(t, "tool▁calls▁begin")) {
    return Has(t, "```json") ? ToolCallFormat::kDeepSeekV3 : ToolCallFormat::kDeepSeekV31;
  }
  if (Has(t, "[TOOL_CALLS]")) return ToolCallFormat::kMistral;
  if (Has(t, "<tool_call>") && Has(t, "<function=") && Has(t, "<parameter=")) return ToolCallFormat::kQwen3Coder;
  // Hermes: <tool_call> around a JSON object whose first key is "name"
  // (GLM, MiniMax and others use <tool_call> with other bodies).
  if (Has(t, "<tool_call>") && (Has(t, "{\"name\"") || Has(t, "{\\\"name\\\"") || Has(t, "'\"name\": "))) {
    return ToolCallFormat::kHermes;
  }
  if (Has(t, "<function=") && Has(t, "</function>") && Has(t, "<|python_tag|>")) return ToolCallFormat::kFunctionary;
  if (Has(t, "<|python_tag|>") || (Has(t, "<|start_header_id|>") && Has(t, "\"parameters\""))) {
    return ToolCallFormat::kLlama3;
  }
  return ToolCallFormat::kNone;
}

const char* ToolCallFormatName(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kNone: return "none";
    case ToolCallFormat::kHermes: return "hermes";
    case ToolCallFormat::kQwen3Coder: return "qwen3_coder";
    case ToolCallFormat::kLlama3: return "llama3_json";
    case ToolCallFormat::kMistral: return "mistral";
    case ToolCallFormat::kDeepSeekV3: return "deepseek_v3";
    case ToolCallFormat::kDeepSeekV31: return "deepseek_v31";
    case ToolCallFormat::kFunctionary: return "functionary_v3_1";
    case ToolCallFormat::kHarmony: return "harmony";
  }
  return "none";
}

std::vector<std::string> ToolCallMarkers(ToolCallFormat f) {
  switch (f) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder: return {"<tool_call>", "</tool_call>"};
    case ToolCallFormat::kLlama3: return {"<|python_tag|>"};
    case ToolCallFormat::kMistral: return {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"};
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31:
      return {"<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
              "<｜tool▁sep｜>"};
    case ToolCallFormat::kFunctionary: return {"<|python_tag|>"};
    case ToolCallFormat::kHarmony:
      return {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|call|>", "<|return|>"};
    case ToolCallFormat::kNone: break;
  }
  return {};
}

std::vector<std::pair<int32_t, std::string>> ToolCallMarkerTokens(const tok::Tokenizer& tokenizer, ToolCallFormat format) {
  return DroppedMarkerTokens(tokenizer, ToolCallMarkers(format));
}

std::string MakeToolCallId(ToolCallFormat format) {
  static const char kAlnum[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const bool mistral = format == ToolCallFormat::kMistral;  // its templates require 9 alphanumerics
  std::string id = mistral ? "" : "call_";
  for (int i = 0, n = mistral ? 9 : 24; i < n; ++i) id += kAlnum[rng() % (sizeof(kAlnum) - 1)];
  return id;
}

ParsedOutput ParseToolCalls(ToolCallFormat format, std::string_view text, const ToolCallParseOptions& options) {
  ToolCallStreamParser parser(format, options);
  (void)parser.Feed(text);
  (void)parser.Finish();
  ParsedOutput out = parser.result();
  for (const ToolCall& call : out.tool_calls) {
    const auto args = nlohmann::json::parse(call.arguments, nullptr, false);
    if (call.name.empty() || !args.is_object()) {
      ParsedOutput plain;
      plain.content = std::string(text);
      return plain;
    }
  }
  return out;
}

}  // namespace kvs::grammar
