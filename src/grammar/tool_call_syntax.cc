// The descriptors of tool_call_syntax.h, as each family's chat template
// renders an assistant turn with tool calls (../shared/templates; checked
// by tool_call_templates_test).
#include "grammar/tool_call_syntax.h"

namespace kvs::grammar::internal {

namespace {

using B = TaggedSyntax::Body;

TaggedSyntax Glm45() {
  TaggedSyntax s;
  s.body = B::kKeyValue;
  s.call_open = "<tool_call>";
  s.call_close = "</tool_call>";
  s.name_ends = {"\n", "<arg_key>"};
  s.keep_name_end = true;
  s.key_open = "<arg_key>";
  s.key_close = "</arg_key>";
  s.value_open = "<arg_value>";
  s.value_close = "</arg_value>";
  return s;
}

TaggedSyntax Hy3() {
  // Every tag carries the ":opensource" suffix of Hy3's special tokens.
  TaggedSyntax s;
  s.body = B::kKeyValue;
  s.section_open = "<tool_calls:opensource>";
  s.section_close = "</tool_calls:opensource>";
  s.call_open = "<tool_call:opensource>";
  s.call_close = "</tool_call:opensource>";
  s.name_ends = {"<tool_sep:opensource>"};
  s.key_open = "<arg_key:opensource>";
  s.key_close = "</arg_key:opensource>";
  s.value_open = "<arg_value:opensource>";
  s.value_close = "</arg_value:opensource>";
  return s;
}

TaggedSyntax KimiK2() {
  TaggedSyntax s;
  s.body = B::kJsonArgs;
  s.section_open = "<|tool_calls_section_begin|>";
  s.section_close = "<|tool_calls_section_end|>";
  s.call_open = "<|tool_call_begin|>";
  s.call_close = "<|tool_call_end|>";
  s.name_ends = {"<|tool_call_argument_begin|>"};
  s.newline_between = false;
  return s;
}

TaggedSyntax SolarOpen() {
  // An assistant message is <|begin|>assistant then <|think|>, <|content|>
  // or <|tool_calls|> and its body; the generation prompt ends before the
  // channel word.
  TaggedSyntax s;
  s.body = B::kJsonArgs;
  s.section_open = "<|tool_calls|>";
  s.section_close = "<|calls|>";
  s.call_open = "<|tool_call:begin|>";
  s.call_close = "<|tool_call:end|>";
  s.name_ends = {"<|tool_call:args|>"};
  s.drop = {"<|content|>", "<|end|>", "<|begin|>assistant"};
  s.reasoning_open = "<|think|>";
  s.reasoning_close = "<|end|>";
  s.newline_between = false;
  return s;
}

TaggedSyntax Dsml(const std::string& block) {
  const std::string t = "｜DSML｜";
  TaggedSyntax s;
  s.body = B::kNamedParams;
  s.section_open = "<" + t + block + ">";
  s.section_close = "</" + t + block + ">";
  s.call_open = "<" + t + "invoke name=\"";
  s.call_close = "</" + t + "invoke>";
  s.name_ends = {"\">"};
  s.param_open = "<" + t + "parameter name=\"";
  s.param_close = "</" + t + "parameter>";
  return s;
}

TaggedSyntax Atem() {
  // Each call is its own message: <|start|>assistant to=NAME<|message|>
  // then the block; "to=self" is reasoning, "to=user" the answer. The
  // stream parser reads those headers (Mode::kAtemHeader).
  TaggedSyntax s;
  s.body = B::kNamedParams;
  s.section_open = "<atem:function_calls>";
  s.section_close = "</atem:function_calls>";
  s.call_open = "<atem:invoke name=\"";
  s.call_close = "</atem:invoke>";
  s.name_ends = {"\">"};
  s.param_open = "<atem:parameter name=\"";
  s.param_close = "</atem:parameter>";
  s.drop = {"<|eom|>", "<|eot|>"};
  return s;
}

TaggedSyntax MiniCpm5() {
  TaggedSyntax s;
  s.body = B::kNamedParams;
  s.call_open = "<function name=\"";
  s.call_close = "</function>";
  s.name_ends = {"\">"};
  s.param_open = "<param name=\"";
  s.param_close = "</param>";
  return s;
}

TaggedSyntax SeedOss() {
  TaggedSyntax s;
  s.body = B::kNamedParams;
  s.section_open = "<seed:tool_call>";
  s.section_close = "</seed:tool_call>";
  s.call_open = "<function=";
  s.call_close = "</function>";
  s.name_ends = {">"};
  s.param_open = "<parameter=";
  s.param_close = "</parameter>";
  return s;
}

TaggedSyntax MiniMaxM3() {
  const std::string ns = "]<]minimax[>[";
  TaggedSyntax s;
  s.body = B::kMiniMaxXml;
  s.section_open = ns + "<tool_call>";
  s.section_close = ns + "</tool_call>";
  s.call_open = ns + "<invoke name=\"";
  s.call_close = ns + "</invoke>";
  s.name_ends = {"\">"};
  s.param_open = ns;
  return s;
}

TaggedSyntax Gemma4() {
  TaggedSyntax s;
  s.body = B::kGemma;
  s.call_open = "<|tool_call>call:";
  s.call_close = "<tool_call|>";
  s.name_ends = {"{"};
  s.newline_between = false;
  return s;
}

TaggedSyntax Lfm2() {
  TaggedSyntax s;
  s.body = B::kPythonic;
  s.section_open = "<|tool_call_start|>";
  s.section_close = "<|tool_call_end|>";
  s.newline_between = false;
  return s;
}

TaggedSyntax JsonSection(B body, std::string open, std::string close) {
  TaggedSyntax s;
  s.body = body;
  s.section_open = std::move(open);
  s.section_close = std::move(close);
  return s;
}

TaggedSyntax CommandR() {
  TaggedSyntax s = JsonSection(B::kJsonList, "<|START_ACTION|>", "<|END_ACTION|>");
  s.reasoning_open = "<|START_THINKING|>";
  s.reasoning_close = "<|END_THINKING|>";
  s.drop = {"<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"};
  return s;
}

TaggedSyntax GigaChat3() {
  // The answer ends with <|message_sep|>, then "function call" is the next
  // role: the separator and the blank line before it are no content.
  TaggedSyntax s = JsonSection(B::kJsonObjects, "function call<|role_sep|>", "");
  s.drop = {"<|message_sep|>"};
  return s;
}

TaggedSyntax Apertus() {
  TaggedSyntax s = JsonSection(B::kJsonList, "<|tools_prefix|>", "<|tools_suffix|>");
  s.name_keyed = true;
  return s;
}

}  // namespace

const TaggedSyntax* TaggedSyntaxOf(ToolCallFormat format) {
  static const TaggedSyntax glm = Glm45(), hy3 = Hy3(), kimi = KimiK2(), solar = SolarOpen(),
                            ds32 = Dsml("function_calls"), ds4 = Dsml("tool_calls"), atem = Atem(),
                            minicpm = MiniCpm5(), seed = SeedOss(), mm3 = MiniMaxM3(), gemma = Gemma4(),
                            lfm2 = Lfm2(), nemotron = JsonSection(B::kJsonList, "<TOOLCALL>", "</TOOLCALL>"),
                            command_r = CommandR(),
                            apriel = JsonSection(B::kJsonList, "<tool_calls>", "</tool_calls>"),
                            mm1 = JsonSection(B::kJsonObjects, "<tool_calls>", "</tool_calls>"),
                            firefunction = JsonSection(B::kJsonList, "functools", ""), giga3 = GigaChat3(),
                            giga31 = JsonSection(B::kJsonObjects, "<|function_call|>", ""), apertus = Apertus();
  switch (format) {
    case ToolCallFormat::kGlm45: return &glm;
    case ToolCallFormat::kHy3: return &hy3;
    case ToolCallFormat::kKimiK2: return &kimi;
    case ToolCallFormat::kSolarOpen: return &solar;
    case ToolCallFormat::kDeepSeekV32: return &ds32;
    case ToolCallFormat::kDeepSeekV4: return &ds4;
    case ToolCallFormat::kAtem: return &atem;
    case ToolCallFormat::kMiniCpm5: return &minicpm;
    case ToolCallFormat::kSeedOss: return &seed;
    case ToolCallFormat::kMiniMaxM3: return &mm3;
    case ToolCallFormat::kGemma4: return &gemma;
    case ToolCallFormat::kLfm2: return &lfm2;
    case ToolCallFormat::kNemotron: return &nemotron;
    case ToolCallFormat::kCommandR: return &command_r;
    case ToolCallFormat::kApriel: return &apriel;
    case ToolCallFormat::kMiniMaxM1: return &mm1;
    case ToolCallFormat::kFirefunction: return &firefunction;
    case ToolCallFormat::kGigaChat3: return &giga3;
    case ToolCallFormat::kGigaChat31: return &giga31;
    case ToolCallFormat::kApertus: return &apertus;
    default: return nullptr;
  }
}

std::string CleanCallName(ToolCallFormat format, std::string raw) {
  auto trim = [](std::string s) {
    const size_t a = s.find_first_not_of(" \n\t\r"), b = s.find_last_not_of(" \n\t\r");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
  };
  raw = trim(std::move(raw));
  if (format == ToolCallFormat::kKimiK2) {
    if (raw.rfind("functions.", 0) == 0) raw.erase(0, 10);
    if (const size_t colon = raw.rfind(':'); colon != std::string::npos &&
        raw.find_first_not_of("0123456789", colon + 1) == std::string::npos) {
      raw.resize(colon);
    }
  } else if (format == ToolCallFormat::kSolarOpen) {
    const std::string sep = "<|tool_call:name|>";
    if (const size_t p = raw.find(sep); p != std::string::npos) raw = trim(raw.substr(p + sep.size()));
  }
  return raw;
}

}  // namespace kvs::grammar::internal
