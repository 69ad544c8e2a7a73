#include "api/prompt.h"

#include <algorithm>

#include <fmt/format.h>

#include "grammar/template_tool_format.h"
#include "template/chat_render.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvs::api {

StatusOr<ChatPrompt> RenderChatPrompt(const tmpl::ChatTemplate& chat, const tok::Tokenizer& tok, const Json& messages,
                                      const Json& tools, bool add_generation_prompt, const Json& template_kwargs) {
  auto r = tmpl::RenderChat(chat, tok,
                            tmpl::MakeChatRequest(tok, messages, tools, add_generation_prompt, template_kwargs));
  if (!r.ok()) return InvalidArgument("{}", r.status().message());
  return ChatPrompt{std::move(r->text), std::move(r->tokens)};
}

StatusOr<std::vector<int32_t>> TemplatePromptModel::Tokenize(std::string_view text, bool add_special) const {
  return tok_.Encode(text, add_special, /*parse_special=*/true);
}

StatusOr<ChatPrompt> TemplatePromptModel::RenderChat(const Json& messages, const Json& tools,
                                                     bool add_generation_prompt, const Json& template_kwargs) const {
  return RenderChatPrompt(chat_, tok_, messages, tools, add_generation_prompt, template_kwargs);
}

StatusOr<PromptTemplate> LoadPromptTemplate(const tok::Tokenizer& tok, const std::string& override_template) {
  tmpl::ChatTemplateLoadOptions o;
  o.override = override_template;
  KVS_ASSIGN_OR_RETURN(tmpl::ModelChatTemplate chat, tmpl::LoadModelChatTemplate(tok, o));
  PromptTemplate t{std::move(chat), grammar::ToolCallFormat::kNone};
  t.tool_format = grammar::UseToolCallFormatFor(&t.chat.tmpl);
  return t;
}

std::optional<ApiError> PreparePrompt(const ParsedRequest& req, const PromptModel& model, std::vector<Prompt>* out) {
  if (req.endpoint == Endpoint::kChatCompletions) {
    // Rendered and tokenized at once: message text never becomes control tokens.
    auto rendered = model.RenderChat(req.messages, req.tools, /*add_generation_prompt=*/true, req.template_kwargs);
    if (!rendered.ok()) {
      ApiError e = ErrorFromStatus(rendered.status());
      e.message = "cannot apply the chat template: " + e.message;
      if (e.status == 400) e.param = "messages";
      return e;
    }
    out->push_back({std::move(rendered->tokens), std::move(rendered->text)});
    return std::nullopt;
  }
  for (const PromptInput& in : req.prompts) {
    if (!in.text) {
      out->push_back({in.tokens, std::nullopt});
      continue;
    }
    auto tokens = model.Tokenize(*in.text, /*add_special=*/true);
    if (!tokens.ok()) return ErrorFromStatus(tokens.status());
    out->push_back({std::move(*tokens), *in.text});
  }
  return std::nullopt;
}

int64_t DefaultMaxTokens(bool chat, int64_t prompt_tokens, int64_t context) {
  const int64_t room = context - prompt_tokens;
  return std::max<int64_t>(1, std::min<int64_t>(chat ? room : 16, room));
}

}  // namespace kvs::api
