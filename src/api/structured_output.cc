#include "api/structured_output.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/sampling_params.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"

namespace kvs::api {

namespace {

using Err = std::optional<ApiError>;

using dialect::Field;

Err Bad(const std::string& param, const std::string& message) { return BadRequest(message, param); }

// A converter's error as the client's 400: which field, and the converter's
// message (which names the construct and where it is).
Err Refused(const std::string& param, const Status& st) {
  return BadRequest(fmt::format("'{}' cannot be served: {}", param, st.message()), param,
                    st.code() == StatusCode::kInvalidArgument ? "invalid_value" : "unsupported_value");
}

Err Set(OutputConstraint* r, const std::string& param, StatusOr<grammar::Grammar> g) {
  if (!g.ok()) return Refused(param, g.status());
  r->grammar = std::make_shared<const grammar::Grammar>(std::move(g).value());
  r->param = param;
  return std::nullopt;
}

Err CheckSize(const std::string& param, size_t bytes) {
  if (bytes > kMaxConstraintBytes) {
    return Bad(param, fmt::format("'{}' may be at most {} bytes, got {}", param, kMaxConstraintBytes, bytes));
  }
  return std::nullopt;
}

// A JSON schema given as an object, a boolean, or (vLLM) JSON text.
Err FromSchema(const std::string& param, const Json& schema, OutputConstraint* r) {
  if (schema.is_string()) {
    const auto& text = schema.get_ref<const std::string&>();
    if (auto e = CheckSize(param, text.size())) return e;
    return Set(r, param, grammar::JsonSchemaToGrammar(std::string_view(text)));
  }
  if (!schema.is_object() && !schema.is_boolean()) {
    return BadRequest(fmt::format("'{}' must be a JSON schema (an object)", param), param, "invalid_type");
  }
  if (auto e = CheckSize(param, schema.dump().size())) return e;
  return Set(r, param, grammar::JsonSchemaToGrammar(schema));
}

Err FromRegex(const std::string& param, const Json& v, OutputConstraint* r) {
  if (!v.is_string()) return BadRequest(fmt::format("'{}' must be a string", param), param, "invalid_type");
  const auto& text = v.get_ref<const std::string&>();
  if (auto e = CheckSize(param, text.size())) return e;
  return Set(r, param, grammar::RegexToGrammar(text));
}

Err FromChoice(const std::string& param, const Json& v, OutputConstraint* r) {
  if (!v.is_array() || v.empty()) {
    return BadRequest(fmt::format("'{}' must be a non-empty array of strings", param), param, "invalid_type");
  }
  if (v.size() > kMaxChoices) return Bad(param, fmt::format("'{}' may hold at most {} strings", param, kMaxChoices));
  std::vector<std::string> choices;
  size_t bytes = 0;
  for (const Json& c : v) {
    if (!c.is_string()) {
      return BadRequest(fmt::format("'{}' must be a non-empty array of strings", param), param, "invalid_type");
    }
    choices.push_back(c.get<std::string>());
    bytes += choices.back().size();
  }
  if (auto e = CheckSize(param, bytes)) return e;
  return Set(r, param, grammar::ChoiceToGrammar(choices));
}

Err FromGbnf(const std::string& param, const Json& v, OutputConstraint* r) {
  if (!v.is_string()) return BadRequest(fmt::format("'{}' must be a string (GBNF)", param), param, "invalid_type");
  const auto& text = v.get_ref<const std::string&>();
  if (auto e = CheckSize(param, text.size())) return e;
  return Set(r, param, grammar::ParseGbnf(text));
}

Err FromResponseFormat(const Json& rf, OutputConstraint* r) {
  const std::string param = "response_format";
  if (!rf.is_object()) return BadRequest("'response_format' must be an object", param, "invalid_type");
  const Json* type = Field(rf, "type");
  if (!type || !type->is_string()) {
    return Bad(param, "'response_format.type' must be one of \"text\", \"json_object\", \"json_schema\"");
  }
  const auto& t = type->get_ref<const std::string&>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") return Set(r, param, grammar::JsonObjectGrammar());
  if (t == "json_schema") {
    const Json* js = Field(rf, "json_schema");
    if (!js || !js->is_object()) {
      return Bad(param, "'response_format.json_schema' must be an object with a 'schema' (and a 'name')");
    }
    const Json* schema = Field(*js, "schema");
    // OpenAI requires a schema in practice; an absent one means any JSON
    // value (the schema {}), as vLLM serves it.
    if (!schema) return Set(r, param, grammar::JsonSchemaToGrammar(Json::object()));
    return FromSchema("response_format.json_schema.schema", *schema, r);
  }
  return Bad(param, fmt::format("'response_format.type' must be one of \"text\", \"json_object\", \"json_schema\", got "
                                "\"{}\"",
                                Clip(t, 40)));
}

}  // namespace

Err ParseConstraint(const Json& body, OutputConstraint* r) {
  struct Source {
    const char* param;
    const Json* value;
    Err (*parse)(const std::string&, const Json&, OutputConstraint*);
  };
  std::vector<Source> given;
  const Json* rf = Field(body, "response_format");
  if (rf && !(rf->is_object() && rf->value("type", Json()) == "text")) given.push_back({"response_format", rf, nullptr});
  static constexpr struct {
    const char* name;
    Err (*parse)(const std::string&, const Json&, OutputConstraint*);
  } kGuided[] = {{"guided_json", FromSchema},
                 {"guided_regex", FromRegex},
                 {"guided_choice", FromChoice},
                 {"guided_grammar", FromGbnf}};
  for (const auto& g : kGuided) {
    if (const Json* v = Field(body, g.name)) given.push_back({g.name, v, g.parse});
  }
  static constexpr struct {
    const char* name;
    Err (*parse)(const std::string&, const Json&, OutputConstraint*);
  } kStructured[] = {{"json", FromSchema}, {"regex", FromRegex}, {"choice", FromChoice}, {"grammar", FromGbnf}};
  std::vector<std::string> structured_names;
  if (const Json* so = Field(body, "structured_outputs")) {
    if (!so->is_object()) return BadRequest("'structured_outputs' must be an object", "structured_outputs", "invalid_type");
    for (const auto& s : kStructured) {
      if (const Json* v = Field(*so, s.name)) {
        structured_names.push_back(std::string("structured_outputs.") + s.name);
        given.push_back({nullptr, v, s.parse});
      }
    }
  }
  if (given.empty()) return std::nullopt;
  if (given.size() > 1) {
    std::vector<std::string> names;
    size_t k = 0;
    for (const Source& s : given) names.push_back(s.param ? s.param : structured_names[k++]);
    return Bad(names[1], fmt::format("give at most one output constraint; got '{}'", fmt::join(names, "', '")));
  }
  const Source& s = given[0];
  if (!s.parse) return FromResponseFormat(*s.value, r);
  return s.parse(s.param ? s.param : structured_names[0], *s.value, r);
}

Err ParseLogitBias(const Json& body, std::vector<std::pair<int32_t, float>>* out) {
  const Json* lb = Field(body, "logit_bias");
  if (!lb) return std::nullopt;
  const std::string param = "logit_bias";
  if (!lb->is_object()) return BadRequest("'logit_bias' must be an object (token id -> bias)", param, "invalid_type");
  if (lb->size() > engine::SamplingParams::kMaxLogitBias) {
    return Bad(param, fmt::format("'logit_bias' may hold at most {} entries, got {}", engine::SamplingParams::kMaxLogitBias,
                                  lb->size()));
  }
  out->clear();
  for (const auto& [key, value] : lb->items()) {
    int64_t id = -1;
    bool ok = !key.empty() && key.size() <= 10;
    for (char c : key) ok = ok && c >= '0' && c <= '9';
    if (ok) id = std::stoll(key);
    if (!ok || id > INT32_MAX) {
      return Bad(param, fmt::format("'logit_bias' keys must be token ids (decimal strings), got \"{}\"", Clip(key, 20)));
    }
    if (!value.is_number()) {
      return BadRequest(fmt::format("'logit_bias[\"{}\"]' must be a number in [-100, 100]", key), param, "invalid_type");
    }
    const double b = value.get<double>();
    if (!(b >= -100.0 && b <= 100.0)) {
      return Bad(param, fmt::format("'logit_bias[\"{}\"]' must be in [-100, 100], got {}", key, b));
    }
    out->emplace_back(static_cast<int32_t>(id), static_cast<float>(b));
  }
  return std::nullopt;
}

}  // namespace kvs::api
