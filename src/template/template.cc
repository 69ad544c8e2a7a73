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
  Interpreter in(impl_->map, options);
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) {
      auto v = FromJson(it.value());
      if (!v.ok()) return v.status().WithContext(fmt::format("context variable '{}'", it.key()));
      in.globals()->Set(it.key(), std::move(v).value());
    }
  }
  std::string out;
  KVS_RETURN_IF_ERROR(in.Render(*impl_->program, &out));
  return out;
}

}  // namespace kvs::tmpl
