#include "template/chat_capabilities.h"

#include <fmt/format.h>

namespace kvs::tmpl {

std::vector<std::string> ChatCapabilities::Polyfills() const {
  std::vector<std::string> out;
  if (!probed) return out;
  // The content and arguments shapes matter only where the template renders
  // the calls itself; written as text, they are the polyfill's own.
  if (tool_calls) {
    if (content_with_calls == ContentWithCalls::kNullToEmpty) out.emplace_back("null-content");
    if (content_with_calls == ContentWithCalls::kEmptyToNull) out.emplace_back("empty-content");
    if (arguments == ArgumentsForm::kObject) out.emplace_back("object-arguments");
    if (arguments == ArgumentsForm::kString) out.emplace_back("string-arguments");
  }
  if (!any_call_id) out.emplace_back("call-ids");
  if (!tool_calls) out.emplace_back("tool-calls-as-text");
  if (!tool_role) out.emplace_back("tool-results-as-user");
  if (!null_tools) out.emplace_back("tools-list");
  if (!descriptions_optional) out.emplace_back("tool-descriptions");
  if (!tools) out.emplace_back("tool-definitions-in-system");
  if (!system_role) out.emplace_back("system-into-user");
  return out;
}

std::vector<std::string> ChatCapabilities::Describe() const {
  if (!probed) return {"not probed, or the template fails a plain user message: no polyfills"};
  auto yes_no = [](bool native, const char* polyfill) {
    return native ? std::string("yes") : fmt::format("no (polyfilled: {})", polyfill);
  };
  std::vector<std::string> out;
  out.push_back("system role: " + yes_no(system_role, "prefixed to the next user message"));
  out.push_back("tool definitions: " + yes_no(tools, "listed in the system message with how to call them"));
  out.push_back("assistant tool calls: " + yes_no(tool_calls, "written into the assistant's content"));
  out.push_back("tool role: " + yes_no(tool_role, "tool results sent as user messages"));
  out.push_back("any tool call id: " + yes_no(any_call_id, "ids mapped to 9 alphanumerics"));
  out.push_back("renders without a tools list: " + yes_no(null_tools, "an empty list passed"));
  out.push_back("tools without descriptions: " + yes_no(descriptions_optional, "empty descriptions added"));
  if (tool_calls) {
    const char* args = arguments == ArgumentsForm::kObject   ? "an object only (polyfilled: JSON text parsed)"
                       : arguments == ArgumentsForm::kString ? "a string only (polyfilled: objects written as JSON)"
                                                             : "a JSON string or an object";
    out.push_back(fmt::format("tool call arguments: {}", args));
    const char* content = content_with_calls == ContentWithCalls::kNullToEmpty
                              ? "fails on null (polyfilled: null -> \"\")"
                          : content_with_calls == ContentWithCalls::kEmptyToNull
                              ? "shows the calls only with null (polyfilled: \"\" -> null)"
                              : "null or \"\"";
    out.push_back(fmt::format("content next to tool calls: {}", content));
  }
  return out;
}

}  // namespace kvs::tmpl
