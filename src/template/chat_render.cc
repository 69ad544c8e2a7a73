#include "template/chat_render.h"

#include <optional>

#include "template/chat_polyfill.h"
#include "template/model_chat.h"

namespace kvs::tmpl {

StatusOr<RenderedChat> RenderChat(const ChatTemplate& chat, const tok::Tokenizer& tok, const ChatRequest& request,
                                  const RenderChatOptions& options) {
  // The template's missing capabilities polyfilled (chat_polyfill.h); a
  // template that has them all renders the request as given.
  std::optional<ChatRequest> polyfilled;
  if (chat.capabilities().NeedsPolyfill()) {
    KVS_ASSIGN_OR_RETURN(polyfilled, ApplyChatPolyfills(chat.capabilities(), chat.tool_call_syntax(), request));
  }
  KVS_ASSIGN_OR_RETURN(RenderedText r, chat.RenderTracked(polyfilled ? *polyfilled : request, options.limits));
  RenderedChat out;
  if (options.parse_special_in_content) {
    out.tokens = tok.Encode(r.text, options.add_special, /*parse_special=*/true);
  } else {
    std::vector<tok::TextRange> plain;
    plain.reserve(r.content.size());
    for (const Span& s : r.content) plain.push_back(tok::TextRange{s.b, s.e});
    out.tokens = tok.EncodeWithPlainRanges(r.text, options.add_special, plain);
  }
  out.text = std::move(r.text);
  out.content = std::move(r.content);
  return out;
}

StatusOr<RenderedChat> RenderChat(const ChatTemplate& chat, const tok::Tokenizer& tok,
                                  const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                                  bool add_generation_prompt, const RenderChatOptions& options) {
  return RenderChat(chat, tok, MakeChatRequest(tok, messages, tools, add_generation_prompt), options);
}

ChatRequest MakeChatRequest(const tok::Tokenizer& tok, const nlohmann::ordered_json& messages,
                            const nlohmann::ordered_json& tools, bool add_generation_prompt,
                            const nlohmann::ordered_json& extra) {
  ChatRequest request;
  request.messages = messages;
  if (tools.is_array() && !tools.empty()) request.tools = tools;
  request.add_generation_prompt = add_generation_prompt;
  request.extra = extra.is_object() ? extra : nlohmann::ordered_json::object();
  SetSpecialTokens(tok, &request);
  return request;
}

}  // namespace kvs::tmpl
