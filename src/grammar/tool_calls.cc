// Tool-call formats: recognition from chat templates and markers
// (tool_calls.h).
#include "grammar/tool_calls.h"

#include <algorithm>

#include "grammar/reasoning.h"
#include "grammar/tool_call_syntax.h"

namespace kvs::grammar {

namespace {

bool Has(std::string_view s, std::string_view what) { return s.find(what) != std::string_view::npos; }

// The descriptor's tags that may be single tokens (whole tags: not
// '<function name="'-style openings, "\n" or "{"), and the format's other
// special tokens (those inside longer markers, e.g. "function call<|role_sep|>").
std::vector<std::string> TaggedMarkers(ToolCallFormat f) {
  const internal::TaggedSyntax* s = internal::TaggedSyntaxOf(f);
  if (s == nullptr) return {};
  std::vector<std::string> all = {s->section_open, s->section_close, s->call_open, s->call_close, s->key_open,
                                  s->key_close, s->value_open, s->value_close, s->param_close,
                                  s->reasoning_open, s->reasoning_close};
  all.insert(all.end(), s->name_ends.begin(), s->name_ends.end());
  all.insert(all.end(), s->drop.begin(), s->drop.end());
  std::vector<std::string> out;
  for (std::string& m : all) {
    const bool tag = m.size() > 2 && m.front() == '<' && m.back() == '>' && !Has(m, " ");
    if (tag && std::find(out.begin(), out.end(), m) == out.end()) out.push_back(std::move(m));
  }
  switch (f) {
    case ToolCallFormat::kGemma4: out.insert(out.end(), {"<|tool_call>", "<|\"|>"}); break;
    case ToolCallFormat::kGigaChat3: out.push_back("<|role_sep|>"); break;
    case ToolCallFormat::kAtem: out.insert(out.end(), {"<|start|>", "<|message|>"}); break;
    case ToolCallFormat::kSolarOpen: out.insert(out.end(), {"<|begin|>", "<|tool_call:name|>"}); break;
    case ToolCallFormat::kMiniMaxM3: out.push_back(s->param_open); break;  // its "]<]minimax[>[" prefix
    case ToolCallFormat::kFirefunction: out.push_back(s->section_open); break;
    default: break;
  }
  return out;
}

}  // namespace

// Each rule keys on markers the template writes around an assistant's calls
// (see the table in tool_calls.h); the specific ones come before the
// generic <tool_call> / Llama rules they would otherwise fall into.
ToolCallFormat DetectToolCallFormat(std::string_view t) {
  if (Has(t, "<|tool_calls_section_begin|>")) return ToolCallFormat::kKimiK2;
  if (Has(t, "｜DSML｜")) return Has(t, "tool_calls>") ? ToolCallFormat::kDeepSeekV4 : ToolCallFormat::kDeepSeekV32;
  if (Has(t, "<|tool_call>call:")) return ToolCallFormat::kGemma4;
  if (Has(t, "<|tool_call_start|>") || Has(t, "<|tool_list_start|>")) return ToolCallFormat::kLfm2;
  if (Has(t, "]<]minimax[>[") && Has(t, "<invoke name=")) return ToolCallFormat::kMiniMaxM3;
  if (Has(t, "<atem:function_calls>")) return ToolCallFormat::kAtem;
  if (Has(t, "<seed:tool_call>")) return ToolCallFormat::kSeedOss;
  if (Has(t, "<tool_sep") && Has(t, "<arg_key")) return ToolCallFormat::kHy3;
  if (Has(t, "<tool_call>") && Has(t, "<arg_key>")) return ToolCallFormat::kGlm45;
  if (Has(t, "<|tool_call:begin|>")) return ToolCallFormat::kSolarOpen;
  if (Has(t, "<TOOLCALL>")) return ToolCallFormat::kNemotron;
  if (Has(t, "<|START_ACTION|>")) return ToolCallFormat::kCommandR;
  if (Has(t, "<|tools_prefix|>")) return ToolCallFormat::kApertus;
  if (Has(t, "<|function_call|>")) return ToolCallFormat::kGigaChat31;
  if (Has(t, "<|role_sep|>") && Has(t, "function call")) return ToolCallFormat::kGigaChat3;
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
  if (Has(t, "<tool_calls>[")) return ToolCallFormat::kApriel;
  if (Has(t, "<tool_calls>")) return ToolCallFormat::kMiniMaxM1;  // objects one per line
  if (Has(t, "functools[")) return ToolCallFormat::kFirefunction;
  if (Has(t, "<function name=") && Has(t, "<param name=")) return ToolCallFormat::kMiniCpm5;
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
    case ToolCallFormat::kGlm45: return "glm45";
    case ToolCallFormat::kHy3: return "hy3";
    case ToolCallFormat::kKimiK2: return "kimi_k2";
    case ToolCallFormat::kSolarOpen: return "solar_open";
    case ToolCallFormat::kDeepSeekV32: return "deepseek_v32";
    case ToolCallFormat::kDeepSeekV4: return "deepseek_v4";
    case ToolCallFormat::kAtem: return "atem";
    case ToolCallFormat::kMiniCpm5: return "minicpm5";
    case ToolCallFormat::kSeedOss: return "seed_oss";
    case ToolCallFormat::kMiniMaxM3: return "minimax_m3";
    case ToolCallFormat::kGemma4: return "gemma4";
    case ToolCallFormat::kLfm2: return "lfm2";
    case ToolCallFormat::kNemotron: return "nemotron";
    case ToolCallFormat::kCommandR: return "command_r7b";
    case ToolCallFormat::kApriel: return "apriel";
    case ToolCallFormat::kMiniMaxM1: return "minimax_m1";
    case ToolCallFormat::kFirefunction: return "firefunction_v2";
    case ToolCallFormat::kGigaChat3: return "gigachat3";
    case ToolCallFormat::kGigaChat31: return "gigachat3_1";
    case ToolCallFormat::kApertus: return "apertus";
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
    default: return TaggedMarkers(f);
  }
  return {};
}

std::vector<std::pair<int32_t, std::string>> ToolCallMarkerTokens(const tok::Tokenizer& tokenizer, ToolCallFormat format) {
  return DroppedMarkerTokens(tokenizer, ToolCallMarkers(format));
}

}  // namespace kvs::grammar
