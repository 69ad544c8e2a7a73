// The tool-call syntax a chat template gets: the one decision that the
// server (which parses replies in it and whose polyfills write calls of the
// history in it), the gateway's prompt counter and `kvserve template` all
// take, so that the three render the same prompt for the same conversation.
//
// Rule: the syntax the template renders calls in (DetectToolCallFormat);
// a template that shows none and either is ChatML (what ChatML models, Qwen
// and Hermes, are trained on) or has no tool support at all (the polyfill
// that lists the tools teaches Hermes's syntax: template/chat_polyfill.h)
// gets kHermes; otherwise kNone (the template renders tools its own way and
// no call in the reply is parsed).
// Thread-safety: pure functions over the template; UseToolCallFormatFor
// mutates the template it is given (call it before sharing it).
#pragma once

#include "grammar/tool_calls.h"
#include "template/chat_template.h"

namespace kvs::grammar {

ToolCallFormat ToolCallFormatFor(const tmpl::ChatTemplate& chat);

// ToolCallFormatFor(*chat), also set as the template's tool_call_syntax
// (the syntax its polyfills write calls in); returns it.
ToolCallFormat UseToolCallFormatFor(tmpl::ChatTemplate* chat);

}  // namespace kvs::grammar
