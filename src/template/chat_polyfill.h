// Chat polyfills: a conversation rewritten, before rendering, into shapes a
// template without some capability (chat_capabilities.h) can render, so that
// an OpenAI tool loop (tools -> assistant tool_calls with null content ->
// tool result -> next turn) works on any template. Applied by RenderChat
// (chat_render.h), the one renderer of the server's dialects, /tokenize and
// the gateway's prompt counter, so all of them see the same prompt.
//
// Each polyfill runs only when its capability is missing; a template that
// supports everything gets the request unchanged (byte-identical prompts):
//   null-content          content null on an assistant message with calls -> ""
//   empty-content         content "" there -> null (templates that show calls only then)
//   object-arguments      arguments given as JSON text -> the object (invalid JSON stays text)
//   string-arguments      arguments given as an object -> its JSON text
//   call-ids              call ids -> 9 alphanumerics (the same id -> the same result, calls and results alike)
//   tool-calls-as-text    the calls are written into the assistant's content in the tool-call syntax
//   tool-results-as-user  tool results become user messages naming the tool and the call id (runs of
//                         them, and a user message right after them, merge into one user message)
//   tools-list            no tools -> an empty list (templates that iterate `tools` unchecked)
//   tool-descriptions     a function or parameter without "description" gets "" (templates that
//                         concatenate or trim it)
//   tool-definitions-in-system
//                         the tool definitions (JSON, one per line) and how to call them (an example in
//                         the syntax) are appended to the system message (one is added when absent)
//   system-into-user      system messages are prefixed to the next user message
//
// Tool-call syntax: the text form of calls, by the names of
// grammar::ToolCallFormatName ("hermes", "llama3_json", "mistral",
// "deepseek_v3", "deepseek_v31", "functionary_v3_1", "harmony",
// "qwen3_coder"; anything else is "hermes"). The template module sits below
// grammar and never sees its parser: the layer that knows both (the server's
// EngineBackend, the gateway's prompt counter, the CLI) passes the name of
// the format its parser reads, so what the polyfill writes into the history
// and teaches in the instruction is what the reply is parsed with; the
// round trip is tested in src/server/tool_polyfill_test.cc.
//
// Text written by a polyfill is part of the messages, so RenderChat
// tokenizes it as content: marker strings in it (<tool_call>, DeepSeek's
// markers) are spelled as characters, never as control tokens.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "template/chat_capabilities.h"
#include "template/chat_template.h"

namespace kvs::tmpl {

// The request with every polyfill that `caps` calls for applied (a copy;
// *applied, when given, gets the names of the polyfills that changed
// something). Errors: a malformed conversation the polyfills cannot read
// (InvalidArgument; BuildContext would reject most of them too).
StatusOr<ChatRequest> ApplyChatPolyfills(const ChatCapabilities& caps, const std::string& tool_call_syntax,
                                         const ChatRequest& request, std::vector<std::string>* applied = nullptr);

// The syntax the polyfills write tool calls in: `syntax` when WriteToolCalls
// knows it, else "hermes" ("" and "none": the template shows no syntax of its
// own; the other formats are those of templates that render their calls
// themselves, so no call is ever written for them).
const char* EffectiveToolCallSyntax(const std::string& syntax);

// An assistant's tool calls (OpenAI form: [{"id", "type", "function":
// {"name", "arguments"}}]) as text in EffectiveToolCallSyntax(syntax): what
// the model would have written. Arguments given as JSON text are kept as
// written; invalid JSON is written as a JSON string.
std::string WriteToolCalls(const std::string& syntax, const nlohmann::ordered_json& tool_calls);

// The text tool-definitions-in-system adds: the definitions and how to call
// them in `syntax`.
std::string ToolInstruction(const std::string& syntax, const nlohmann::ordered_json& tools);

}  // namespace kvs::tmpl
