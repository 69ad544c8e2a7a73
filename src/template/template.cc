#include "template/template.h"

#include "template/ast.h"
#include "template/json.h"
#include "template/parser.h"

namespace kvs::tmpl {

struct Template::Impl {
  SourceMap map;
  std::unique_ptr<Program> program;
};

StatusOr<Template> Template::Parse(std::string source, const LexOptions& options) {
  auto impl = std::make_shared<Impl>();
  impl->map = SourceMap(std::move(source));
  KVS_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(impl->map.source(), options, impl->map));
  KVS_ASSIGN_OR_RETURN(impl->program, tmpl::Parse(std::move(tokens), impl->map));
  return Template(std::move(impl));
}

const std::string& Template::source() const { return impl_->map.source(); }

StatusOr<std::string> Template::Render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_null() && !context.is_object()) return InvalidArgument("template context must be a JSON object");
  Variables vars;
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      auto v = FromJson(it.value());
      if (!v.ok()) return v.status().WithContext(fmt::format("context variable '{}'", it.key()));
      vars.emplace_back(it.key(), std::move(v).value());
    }
  }
  KVS_ASSIGN_OR_RETURN(RenderedText r, RenderValues(std::move(vars), options));
  return std::move(r.text);
}

StatusOr<RenderedText> Template::RenderValues(Variables variables, const RenderOptions& options) const {
  RenderedText r;
  {
    Interpreter in(impl_->map, options);
    for (auto& [name, v] : variables) in.globals()->Set(name, std::move(v));
    variables.clear();
    TextOut out = in.NewText();
    KVS_RETURN_IF_ERROR(in.Render(*impl_->program, &out));
    r.text = out.TakeText();
    r.content = out.TakeSpans();
  }
  return r;
}

}  // namespace kvs::tmpl
