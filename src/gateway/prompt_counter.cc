#include "gateway/prompt_counter.h"

#include <fmt/format.h>

#include "gguf/gguf.h"
#include "api/error.h"
#include "api/routes.h"
#include "template/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace kvs::gateway {

PromptCounter::~PromptCounter() = default;

StatusOr<std::unique_ptr<PromptCounter>> PromptCounter::Load(const std::string& gguf_path,
                                                                 const std::string& chat_template) {
  std::unique_ptr<PromptCounter> c(new PromptCounter());
  c->path_ = gguf_path;
  KVS_ASSIGN_OR_RETURN(c->file_, gguf::GgufFile::Open(gguf_path));
  auto tok = tok::Tokenizer::FromGguf(*c->file_);
  if (!tok.ok()) return tok.status().WithContext("tokenizer of " + gguf_path);
  c->tok_ = std::move(*tok);
  // The replicas' template (model.chat_template), with the tool-call syntax
  // its polyfills write in, as the replica loads it.
  KVS_ASSIGN_OR_RETURN(api::PromptTemplate t, api::LoadPromptTemplate(*c->tok_, chat_template));
  c->template_ = std::make_unique<tmpl::ChatTemplate>(std::move(t.chat.tmpl));
  c->model_ = std::make_unique<api::TemplatePromptModel>(*c->tok_, *c->template_);
  return c;
}

int32_t PromptCounter::vocab_size() const { return tok_->vocab_size(); }

std::optional<api::ApiError> PromptCounter::Count(api::Endpoint endpoint, const api::Json& body, CountedRequest* out,
                                                  api::Dialect dialect) const {
  using api::BadRequest;
  if (auto e = api::ParseGenerateRequest(endpoint, dialect, body, &out->req)) return e;
  // The replica's own preparation (api::PreparePrompt, as Service::Prepare
  // runs it): message text never becomes control tokens, the request's
  // template variables are rendered, and the count equals the replica's.
  std::vector<api::Prompt> prompts;
  if (auto e = api::PreparePrompt(out->req, *model_, &prompts)) return e;
  const bool chat = endpoint == api::Endpoint::kChatCompletions;
  const int32_t vocab = tok_->vocab_size();
  for (size_t i = 0; i < prompts.size(); ++i) {
    api::Prompt& p = prompts[i];
    if (chat) {
      out->prompt_text = std::move(*p.text);
    } else {
      // What the replica would refuse (engine::ValidateRequest), refused here
      // before it costs a replica anything.
      const std::string param = prompts.size() > 1 ? fmt::format("prompt[{}]", i) : "prompt";
      if (p.text) {
        if (!out->prompt_text.empty()) out->prompt_text += "\n";
        out->prompt_text += *p.text;
      } else {
        for (int32_t id : p.tokens) {
          if (id >= vocab) {
            return BadRequest(fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab), param);
          }
        }
      }
      if (p.tokens.empty()) return BadRequest("the prompt is empty (it has no tokens)", param);
    }
    out->prompts.push_back(std::move(p.tokens));
  }
  for (const auto& p : out->prompts) {
    const int64_t n = static_cast<int64_t>(p.size());
    out->max_prompt_tokens = std::max(out->max_prompt_tokens, n);
    out->total_prompt_tokens += n;
  }
  return std::nullopt;
}

}  // namespace kvs::gateway
