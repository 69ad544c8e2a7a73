#include "template/model_chat.h"

namespace kvs::tmpl {

StatusOr<ModelChatTemplate> LoadModelChatTemplate(const tok::Tokenizer& tok) {
  const std::string& source = tok.chat_template();
  if (source.empty()) {
    KVS_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::Builtin("chatml"));
    return ModelChatTemplate{std::move(t), true};
  }
  auto t = ChatTemplate::Parse(source);
  if (!t.ok()) return t.status().WithContext("the model's chat template");
  return ModelChatTemplate{std::move(*t), false};
}

void SetSpecialTokens(const tok::Tokenizer& tok, ChatRequest* request) {
  if (tok.bos_id() >= 0) request->bos_token = tok.TokenText(tok.bos_id());
  if (tok.eos_id() >= 0) request->eos_token = tok.TokenText(tok.eos_id());
}

}  // namespace kvs::tmpl
