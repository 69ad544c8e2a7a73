// ToolCallGrammar (tool_calls.h): the reply of tool_choice "required" or a
// named function, in the model's own tool-call syntax, with arguments
// constrained by each function's JSON schema.
#include <algorithm>

#include "grammar/json_schema.h"
#include "grammar/tool_call_grammar_internal.h"
#include "grammar/tool_call_syntax.h"
#include "grammar/tool_calls.h"

namespace kvs::grammar {

namespace {

using Json = nlohmann::ordered_json;
using internal::ToolFunction;

std::string Q(const std::string& s) { return GbnfQuote(s); }

}  // namespace

namespace internal {

// The rule of one string parameter written raw (Qwen3-Coder's, GLM's, ...):
// an enum's values, or characters of `chars` within the length bounds.
StatusOr<std::string> RawStringRule(const ToolFunction& f, const std::string& name, const Json& schema,
                                    const std::string& chars) {
  if (schema.contains("enum") && schema["enum"].is_array()) {
    std::vector<std::string> alts;
    for (const Json& e : schema["enum"]) {
      if (e.is_string()) alts.push_back(Q(e.get<std::string>()));
    }
    if (alts.empty()) return InvalidArgument("parameter '{}' of '{}' has no string enum value", name, f.name);
    std::string value = "(";
    for (size_t i = 0; i < alts.size(); ++i) value += (i ? " | " : "") + alts[i];
    return value + ")";
  }
  for (const char* key : {"pattern", "format", "const"}) {
    if (schema.contains(key)) {
      return Unimplemented("parameter '{}' of '{}': '{}' on a string written raw is not supported", name, f.name,
                           key);
    }
  }
  // Raw text up to the closing tag; lengths count characters.
  const int64_t min = schema.value("minLength", int64_t{0});
  const int64_t max = schema.value("maxLength", int64_t{-1});
  if (min < 0 || (max >= 0 && max < min) || min > 1000) {
    return InvalidArgument("parameter '{}' of '{}': bad minLength/maxLength", name, f.name);
  }
  return chars + "{" + std::to_string(min) + "," + (max >= 0 ? std::to_string(std::min<int64_t>(max, 1000)) : "") +
         "}";
}

StatusOr<std::string> ParamSequence(const ToolFunction& f, const std::string& prefix, const ParamStyle& style,
                                    std::string* rules) {
  const Json& p = f.parameters;
  if (!p.is_object() || !p.contains("properties") || !p["properties"].is_object()) return std::string("\"\"");
  std::vector<std::string> required;
  if (p.contains("required") && p["required"].is_array()) {
    for (const Json& r : p["required"]) {
      if (r.is_string()) required.push_back(r.get<std::string>());
    }
  }
  std::vector<std::pair<std::string, Json>> props;
  for (const auto& [name, schema] : p["properties"].items()) props.emplace_back(name, schema);
  if (style.sorted) {
    std::sort(props.begin(), props.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  std::vector<std::string> items;
  std::vector<bool> optional;
  int k = 0;
  for (const auto& [name, schema] : props) {
    std::string value;
    const bool is_string = schema.is_object() && schema.contains("type") && schema["type"] == "string";
    // The parameters' definitions travel along for $ref.
    Json sub = schema;
    if (sub.is_object()) {
      for (const char* defs : {"$defs", "definitions"}) {
        if (p.contains(defs) && !sub.contains(defs)) sub[defs] = p[defs];
      }
    }
    const std::string sub_prefix = prefix + "p" + std::to_string(k) + "-";
    if (style.value) {
      KVS_ASSIGN_OR_RETURN(value, style.value(f, name, sub, sub_prefix, rules));
    } else if (is_string) {
      KVS_ASSIGN_OR_RETURN(value, RawStringRule(f, name, schema, style.raw_chars));
    } else {
      auto text = JsonSchemaToGbnf(sub, {}, sub_prefix);
      if (!text.ok()) return text.status().WithContext("parameter '" + name + "' of function '" + f.name + "'");
      *rules += *text;
      value = sub_prefix + "root";
    }
    items.push_back(style.item(name, value, is_string));
    optional.push_back(std::find(required.begin(), required.end(), name) == required.end());
    ++k;
  }
  if (items.empty()) return std::string("\"\"");
  if (style.sep.empty()) {
    std::string seq;
    for (size_t i = 0; i < items.size(); ++i) seq += (i ? " " : "") + (optional[i] ? "(" + items[i] + ")?" : items[i]);
    return seq;
  }
  // With a separator between written items, as a chain of rules:
  // first-i: the items from i on, none written yet; rest-i: some were.
  const std::string sep = Q(style.sep);
  for (size_t i = items.size(); i-- > 0;) {
    const std::string first = prefix + "first" + std::to_string(i), rest = prefix + "rest" + std::to_string(i);
    const std::string next_first = i + 1 < items.size() ? prefix + "first" + std::to_string(i + 1) : "\"\"";
    const std::string next_rest = i + 1 < items.size() ? prefix + "rest" + std::to_string(i + 1) : "\"\"";
    *rules += first + " ::= " + items[i] + " " + next_rest + (optional[i] ? " | " + next_first : "") + "\n";
    *rules += rest + " ::= " + sep + " " + items[i] + " " + next_rest + (optional[i] ? " | " + next_rest : "") + "\n";
  }
  return prefix + "first0";
}

}  // namespace internal

StatusOr<Grammar> ToolCallGrammar(ToolCallFormat format, const Json& tools, const ToolChoice& choice,
                                  bool parallel_tool_calls) {
  if (format == ToolCallFormat::kNone) {
    return InvalidArgument("tool_choice needs a model whose chat template has a known tool-call syntax");
  }
  if (!tools.is_array() || tools.empty()) return InvalidArgument("tool_choice '{}' needs tools",
                                                                 choice.mode == ToolChoice::Mode::kNamed ? choice.name
                                                                                                         : "required");
  std::vector<ToolFunction> fns;
  for (const Json& t : tools) {
    const Json& f = t.is_object() && t.contains("function") ? t["function"] : t;
    if (!f.is_object() || !f.contains("name") || !f["name"].is_string()) {
      return InvalidArgument("every tool needs a function with a string name");
    }
    ToolFunction fn{f["name"].get<std::string>(), f.contains("parameters") ? f["parameters"] : Json{{"type", "object"}}};
    if (choice.mode == ToolChoice::Mode::kNamed && fn.name != choice.name) continue;
    fns.push_back(std::move(fn));
  }
  if (fns.empty()) return InvalidArgument("tool_choice names function '{}', which is not among the tools", choice.name);
  if (internal::TaggedSyntaxOf(format) != nullptr) {
    KVS_ASSIGN_OR_RETURN(std::string gbnf, internal::TaggedToolCallGbnf(format, fns, parallel_tool_calls));
    return ParseGbnf(gbnf);
  }

  std::string rules;
  std::vector<std::string> calls;
  for (size_t i = 0; i < fns.size(); ++i) {
    const ToolFunction& f = fns[i];
    const std::string prefix = "fn" + std::to_string(i) + "-";
    const std::string name_json = Json(f.name).dump();
    std::string call;
    if (format == ToolCallFormat::kQwen3Coder) {
      internal::ParamStyle style;
      style.item = [](const std::string& name, const std::string& value, bool) {
        return Q("<parameter=" + name + ">\n") + " " + value + " " + Q("\n</parameter>\n");
      };
      KVS_ASSIGN_OR_RETURN(std::string params, internal::ParamSequence(f, prefix, style, &rules));
      call = Q("<tool_call>\n<function=" + f.name + ">\n") + " " + params + " " + Q("</function>\n</tool_call>");
    } else {
      auto args_text = JsonSchemaToGbnf(f.parameters, {}, prefix);
      if (!args_text.ok()) return args_text.status().WithContext("parameters of function '" + f.name + "'");
      rules += *args_text;
      const std::string args = prefix + "root";
      switch (format) {
        case ToolCallFormat::kHermes:
          call = Q("<tool_call>\n{\"name\": " + name_json + ", \"arguments\": ") + " " + args + " " +
                 Q("}\n</tool_call>");
          break;
        case ToolCallFormat::kLlama3:
          call = Q("{\"name\": " + name_json + ", \"parameters\": ") + " " + args + " " + Q("}");
          break;
        case ToolCallFormat::kMistral: call = Q("[TOOL_CALLS]" + f.name + "[ARGS]") + " " + args; break;
        case ToolCallFormat::kDeepSeekV3:
          call = Q("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + f.name + "\n```json\n") + " " + args + " " +
                 Q("\n```<｜tool▁call▁end｜>");
          break;
        case ToolCallFormat::kDeepSeekV31:
          call = Q("<｜tool▁call▁begin｜>" + f.name + "<｜tool▁sep｜>") + " " + args + " " + Q("<｜tool▁call▁end｜>");
          break;
        case ToolCallFormat::kFunctionary: call = Q("<function=" + f.name + ">") + " " + args + " " + Q("</function>"); break;
        case ToolCallFormat::kHarmony:
          call = Q("<|channel|>commentary to=functions." + f.name + " <|constrain|>json<|message|>") + " " + args +
                 " " + Q("<|call|>");
          break;
        default: return Internal("unhandled tool-call format");
      }
    }
    rules += prefix + "call ::= " + call + "\n";
    calls.push_back(prefix + "call");
  }
  std::string any = calls.size() == 1 ? calls[0] : "(";
  if (calls.size() > 1) {
    for (size_t i = 0; i < calls.size(); ++i) any += (i ? " | " : "") + calls[i];
    any += ")";
  }
  // Several calls where the format has a way to write them.
  std::string sep;
  bool multi = parallel_tool_calls && format != ToolCallFormat::kHarmony;
  switch (format) {
    case ToolCallFormat::kHermes:
    case ToolCallFormat::kQwen3Coder:
    case ToolCallFormat::kDeepSeekV3:
    case ToolCallFormat::kDeepSeekV31: sep = Q("\n") + "? "; break;  // templates differ (StepFun, DeepSeek: none)
    case ToolCallFormat::kLlama3: sep = Q("; ") + " "; break;
    default: break;
  }
  std::string body = multi ? any + " (" + sep + any + ")*" : any;
  if (format == ToolCallFormat::kDeepSeekV3 || format == ToolCallFormat::kDeepSeekV31) {
    body = Q("<｜tool▁calls▁begin｜>") + " " + body + " " + Q("<｜tool▁calls▁end｜>");
  }
  return ParseGbnf("root ::= " + body + "\n" + rules);
}

}  // namespace kvs::grammar
