#include "grammar/template_tool_format.h"

namespace kvs::grammar {

ToolCallFormat ToolCallFormatFor(const tmpl::ChatTemplate& chat) {
  const ToolCallFormat detected = DetectToolCallFormat(chat.source());
  if (detected != ToolCallFormat::kNone) return detected;
  const bool chatml = chat.source().find("<|im_start|>") != std::string::npos;
  return chatml || !chat.capabilities().tools ? ToolCallFormat::kHermes : ToolCallFormat::kNone;
}

ToolCallFormat UseToolCallFormatFor(tmpl::ChatTemplate* chat) {
  const ToolCallFormat f = ToolCallFormatFor(*chat);
  chat->set_tool_call_syntax(ToolCallFormatName(f));
  return f;
}

}  // namespace kvs::grammar
