#include "template/chat_template.h"

#include <algorithm>
#include <utility>

#include "gguf/gguf.h"
#include "template/json.h"

namespace kvs::tmpl {
namespace {

// Text of a message's content, whether a string, a list of parts or null.
constexpr std::string_view kTextOf = R"JINJA(
{%- macro text_of(content) -%}
  {%- if content is string -%}
    {{- content -}}
  {%- elif content is iterable -%}
    {%- for part in content -%}
      {%- if part is mapping and part.type == 'text' -%}{{- part.text -}}{%- endif -%}
    {%- endfor -%}
  {%- endif -%}
{%- endmacro -%}
)JINJA";

// <|im_start|>role\ncontent<|im_end|>\n per message.
constexpr std::string_view kChatml = R"JINJA(
{%- for message in messages -%}
  {{- '<|im_start|>' + message.role + '\n' + text_of(message.content) + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
{%- endif -%}
)JINJA";

// Llama 2 chat: the system prompt goes inside the first [INST] block.
constexpr std::string_view kLlama2 = R"JINJA(
{%- if messages and messages[0].role == 'system' -%}
  {%- set system = text_of(messages[0].content) | trim -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set system = '' -%}
  {%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
  {%- if message.role == 'user' -%}
    {{- bos_token + '[INST] ' -}}
    {%- if loop.first and system -%}
      {{- '<<SYS>>\n' + system + '\n<</SYS>>\n\n' -}}
    {%- endif -%}
    {{- text_of(message.content) | trim + ' [/INST]' -}}
  {%- elif message.role == 'assistant' -%}
    {{- ' ' + text_of(message.content) | trim + ' ' + eos_token -}}
  {%- endif -%}
{%- endfor -%}
)JINJA";

// Llama 3 / 3.1: header-delimited turns; tool results use the ipython role.
constexpr std::string_view kLlama3 = R"JINJA(
{{- bos_token -}}
{%- for message in messages -%}
  {%- set role = 'ipython' if message.role == 'tool' else message.role -%}
  {{- '<|start_header_id|>' + role + '<|end_header_id|>\n\n' + text_of(message.content) | trim + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}
)JINJA";

// The opening of the templates whose system prompt prefixes the first user
// turn (BuiltinTemplate::system_prefixed): sets `system` (the prompt and a
// blank line, or '') and `turns` (the other messages), then the BOS token.
constexpr std::string_view kSystemPrefix = R"JINJA(
{%- if messages and messages[0].role == 'system' -%}
  {%- set system = text_of(messages[0].content) | trim + '\n\n' -%}
  {%- set turns = messages[1:] -%}
{%- else -%}
  {%- set system = '' -%}
  {%- set turns = messages -%}
{%- endif -%}
{{- bos_token -}}
)JINJA";

// Mistral instruct: [INST] blocks; a system prompt prefixes the first user turn.
constexpr std::string_view kMistral = R"JINJA(
{%- for message in turns -%}
  {%- if message.role == 'user' -%}
    {{- '[INST] ' + (system if loop.first else '') + text_of(message.content) | trim + ' [/INST]' -}}
  {%- elif message.role == 'assistant' -%}
    {{- ' ' + text_of(message.content) | trim + eos_token -}}
  {%- endif -%}
{%- endfor -%}
)JINJA";

// Gemma: user/model turns; a system prompt prefixes the first user turn.
constexpr std::string_view kGemma = R"JINJA(
{%- for message in turns -%}
  {%- set role = 'model' if message.role == 'assistant' else 'user' -%}
  {{- '<start_of_turn>' + role + '\n' + (system if loop.first else '') + text_of(message.content) | trim + '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<start_of_turn>model\n' -}}
{%- endif -%}
)JINJA";

struct BuiltinTemplate {
  const char* name;
  std::string_view body;
  bool system_prefixed = false;  // body follows kSystemPrefix
};
constexpr BuiltinTemplate kBuiltins[] = {
    {"chatml", kChatml},   {"gemma", kGemma, true},         {"llama2", kLlama2},
    {"llama3", kLlama3},   {"mistral", kMistral, true},
};

}  // namespace

StatusOr<ChatTemplate> ChatTemplate::Parse(std::string source) {
  KVS_ASSIGN_OR_RETURN(Template t, Template::Parse(std::move(source)));
  return ChatTemplate(std::move(t));
}

const std::vector<std::string>& ChatTemplate::BuiltinNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& b : kBuiltins) v.emplace_back(b.name);
    return v;
  }();
  return names;
}

StatusOr<ChatTemplate> ChatTemplate::Builtin(std::string_view name) {
  for (const auto& b : kBuiltins) {
    if (name == b.name) {
      return Parse(std::string(kTextOf) + std::string(b.system_prefixed ? kSystemPrefix : "") + std::string(b.body));
    }
  }
  std::string known;
  for (const auto& n : BuiltinNames()) known += (known.empty() ? "" : ", ") + n;
  return NotFound("no built-in chat template named '{}' (known: {})", name, known);
}

StatusOr<ChatTemplate> ChatTemplate::FromGguf(const gguf::GgufFile& file, std::string_view name) {
  const std::string key = name.empty() ? "tokenizer.chat_template" : "tokenizer.chat_template." + std::string(name);
  if (file.Find(key) == nullptr) return NotFound("the model has no {}", key);
  KVS_ASSIGN_OR_RETURN(std::string source, file.GetString(key));
  auto t = Parse(std::move(source));
  if (!t.ok()) return t.status().WithContext(key);
  return t;
}

namespace {

StatusOr<std::string> TokenText(const gguf::GgufFile& file, std::string_view id_key) {
  if (file.Find(id_key) == nullptr) return std::string();
  KVS_ASSIGN_OR_RETURN(int64_t id, file.GetInt(id_key));
  KVS_ASSIGN_OR_RETURN(const gguf::Array* tokens, file.GetArray("tokenizer.ggml.tokens"));
  if (id < 0 || static_cast<uint64_t>(id) >= tokens->items.size()) {
    return DataLoss("{} = {} is outside the vocabulary of {} tokens", id_key, id, tokens->items.size());
  }
  const std::string* text = tokens->items[id].AsString();
  if (!text) return DataLoss("tokenizer.ggml.tokens[{}] is not a string", id);
  return *text;
}

}  // namespace

StatusOr<std::pair<std::string, std::string>> ChatTemplate::SpecialTokensFromGguf(const gguf::GgufFile& file) {
  KVS_ASSIGN_OR_RETURN(std::string bos, TokenText(file, "tokenizer.ggml.bos_token_id"));
  KVS_ASSIGN_OR_RETURN(std::string eos, TokenText(file, "tokenizer.ggml.eos_token_id"));
  return std::make_pair(std::move(bos), std::move(eos));
}

StatusOr<nlohmann::ordered_json> ChatTemplate::BuildContext(const ChatRequest& r) {
  if (!r.messages.is_array()) return InvalidArgument("messages must be a list");
  for (size_t i = 0; i < r.messages.size(); ++i) {
    const auto& m = r.messages[i];
    if (!m.is_object()) return InvalidArgument("messages[{}] must be an object", i);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) return InvalidArgument("messages[{}].role must be a string", i);
    auto content = m.find("content");
    if (content != m.end() && !content->is_string() && !content->is_array() && !content->is_null()) {
      return InvalidArgument("messages[{}].content must be a string, a list of parts or null", i);
    }
  }
  if (!r.tools.is_null() && !r.tools.is_array()) return InvalidArgument("tools must be a list or null");
  if (!r.extra.is_null() && !r.extra.is_object()) return InvalidArgument("extra template variables must be an object");
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = r.messages;
  ctx["tools"] = r.tools;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = r.add_generation_prompt;
  ctx["bos_token"] = r.bos_token;
  ctx["eos_token"] = r.eos_token;
  if (r.extra.is_object()) {
    for (auto it = r.extra.begin(); it != r.extra.end(); ++it) ctx[it.key()] = it.value();
  }
  return ctx;
}

StatusOr<std::string> ChatTemplate::RenderContext(const nlohmann::ordered_json& context,
                                                  std::optional<int64_t> now_unix, const RenderLimits& limits) const {
  RenderOptions options;
  options.limits = limits;
  if (now_unix) {
    options.has_fixed_now = true;
    options.fixed_now_unix = *now_unix;
  }
  return template_.Render(context, options);
}

StatusOr<std::string> ChatTemplate::Render(const ChatRequest& request, const RenderLimits& limits) const {
  KVS_ASSIGN_OR_RETURN(RenderedText r, RenderTracked(request, limits));
  return std::move(r.text);
}

const std::vector<std::string>& ChatTemplate::TrustedRoles() {
  static const std::vector<std::string> roles = {"system", "user", "assistant", "tool", "developer", "function",
                                                 "ipython"};
  return roles;
}

StatusOr<RenderedText> ChatTemplate::RenderTracked(const ChatRequest& r, const RenderLimits& limits) const {
  // BuildContext validates the request; its JSON is then converted variable
  // by variable, the caller's data as content.
  KVS_ASSIGN_OR_RETURN(nlohmann::ordered_json ctx, BuildContext(r));
  Template::Variables vars;
  for (auto it = ctx.begin(); it != ctx.end(); ++it) {
    // The model's own values; an `extra` variable of the same name replaces
    // them and is the caller's data like every extra.
    const bool trusted = (it.key() == "bos_token" || it.key() == "eos_token" || it.key() == "add_generation_prompt" ||
                          it.key() == "documents") &&
                         !(r.extra.is_object() && r.extra.contains(it.key()));
    auto v = FromJson(it.value(), /*content=*/!trusted, JsonLimits{limits.max_list_items, limits.max_total_bytes});
    if (!v.ok()) return v.status().WithContext(fmt::format("template variable '{}'", it.key()));
    if (it.key() == "messages" && !(r.extra.is_object() && r.extra.contains("messages"))) {
      for (const Value& m : v->list()) {
        const Value* role = m.dict().Find("role");
        const auto& known = TrustedRoles();
        if (role && std::find(known.begin(), known.end(), role->str()) != known.end()) {
          m.dict().Set("role", Value::String(role->str()));
        }
      }
    }
    vars.emplace_back(it.key(), std::move(v).value());
  }
  RenderOptions options;
  options.limits = limits;
  if (r.now_unix) {
    options.has_fixed_now = true;
    options.fixed_now_unix = *r.now_unix;
  }
  return template_.RenderValues(std::move(vars), options);
}

}  // namespace kvs::tmpl
