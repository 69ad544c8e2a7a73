// JSON Schema -> GBNF text -> Grammar (json_schema.h): schema dispatch,
// $ref, combinators. Object/array/string/number schemas are in
// json_schema_types.cc.
#include "grammar/json_schema.h"

#include <algorithm>
#include <tuple>

#include "grammar/json_schema_internal.h"

namespace kvs::grammar::internal {

namespace {

using Json = nlohmann::ordered_json;

// Keywords that only annotate: ignored.
const std::set<std::string>& AnnotationKeywords() {
  static const std::set<std::string> k = {
      "title", "description", "default", "examples", "example", "$schema", "$id", "$comment", "deprecated",
      "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "$defs", "definitions", "$anchor",
      "discriminator", "xml", "externalDocs", "strict", "name", "$dynamicAnchor"};
  return k;
}

// Keywords whose meaning we cannot guarantee: an error names them.
const std::set<std::string>& UnsupportedKeywords() {
  static const std::set<std::string> k = {
      "multipleOf", "uniqueItems", "contains", "minContains", "maxContains", "not", "if", "then", "else",
      "patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
      "dependentSchemas", "dependencies", "unevaluatedProperties", "unevaluatedItems", "$dynamicRef",
      "$recursiveRef"};
  return k;
}

std::string Sanitize(std::string_view s) {
  std::string out;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
    out += ok ? c : '-';
  }
  if (out.size() > 40) out.resize(40);
  return out.empty() ? "x" : out;
}

bool TypeAllows(const std::vector<std::string>& types, const Json& v) {
  for (const std::string& t : types) {
    const bool whole = v.is_number_integer() || v.is_number_unsigned() ||
                       (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())));
    if ((t == "string" && v.is_string()) || (t == "number" && v.is_number()) || (t == "integer" && whole) ||
        (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null()) || (t == "object" && v.is_object()) ||
        (t == "array" && v.is_array())) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string JoinAlts(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string s = "(";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + ")";
}

std::string RepeatGbnf(const std::string& x, int64_t min, int64_t max) {
  if (min == 0 && max == 1) return "(" + x + ")?";
  if (min == 0 && max < 0) return "(" + x + ")*";
  if (min == 1 && max < 0) return "(" + x + ")+";
  if (max < 0) return "(" + x + "){" + std::to_string(min) + ",}";
  if (min == max) return "(" + x + "){" + std::to_string(min) + "}";
  return "(" + x + "){" + std::to_string(min) + "," + std::to_string(max) + "}";
}

std::string RuleBase(const std::string& path) {
  std::string base = path;
  for (const char* drop : {"/properties", "/$defs", "/definitions"}) {
    for (size_t p; (p = base.find(drop)) != std::string::npos;) base.erase(p, std::string(drop).size());
  }
  while (!base.empty() && base[0] == '/') base.erase(0, 1);
  return base.empty() ? "root" : base;
}

std::string JsonLiteral(const Json& value) { return GbnfQuote(value.dump(-1, ' ', false)); }

StatusOr<std::string> SchemaConverter::Run() {
  const std::string root_name = prefix_ + "root";
  used_.insert(root_name);
  ref_rules_["#"] = root_name;
  KVS_ASSIGN_OR_RETURN(std::string body, Visit(root_, "", 0));
  rules_.insert(rules_.begin(), {root_name, body});
  std::string text;
  for (const auto& [name, rule_body] : rules_) text += name + " ::= " + rule_body + "\n";
  return text;
}

std::string SchemaConverter::Common(const std::string& what) {
  const std::string name = prefix_ + "json-" + what;
  if (common_.count(what)) return name;
  common_.insert(what);
  used_.insert(name);
  const size_t slot = rules_.size();
  rules_.push_back({name, ""});
  std::string body;
  if (what == "ws") {
    body = "(\" \" | \"\\n\" [ \\t]{0," + std::to_string(o_.max_indent) + "})?";
  } else if (what == "char") {
    body = "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] "
           "[0-9a-fA-F]{2}))";
  } else if (what == "string") {
    body = "\"\\\"\" " + Common("char") + "* \"\\\"\"";
  } else if (what == "number") {
    body = "\"-\"? (\"0\" | [1-9] [0-9]{0,14}) (\".\" [0-9]{1,15})? ([eE] [-+]? [0-9]{1,2})?";
  } else if (what == "integer") {
    body = "\"-\"? (\"0\" | [1-9] [0-9]{0,14})";
  } else if (what == "value") {
    body = Common("object") + " | " + Common("array") + " | " + Common("string") + " | " + Common("number") +
           " | \"true\" | \"false\" | \"null\"";
  } else if (what == "object") {
    body = Braced("{", "}", Common("string") + " " + Colon() + " " + Common("value"), true, true);
  } else if (what == "array") {
    body = Braced("[", "]", Common("value"), true, true);
  }
  rules_[slot].second = body;
  return name;
}

std::string SchemaConverter::Braced(const std::string& open, const std::string& close, const std::string& inner,
                                    bool allow_empty, bool repeat) {
  const std::string o = GbnfQuote(open), c = GbnfQuote(close);
  if (inner == "\"\"") return flexible() ? o + " " + Common("ws") + " " + c : o + " " + c;
  const std::string list = repeat ? inner + " (" + Comma() + " " + inner + ")*" : inner;
  if (!flexible()) return o + " " + (allow_empty ? "(" + list + ")?" : list) + " " + c;
  const std::string ws = Common("ws");
  return o + " " + ws + " " + (allow_empty ? "(" + list + " " + ws + ")?" : list + " " + ws) + " " + c;
}

std::string SchemaConverter::NewRule(const std::string& base, const std::string& body) {
  std::string name = prefix_ + Sanitize(base);
  for (int i = 1; used_.count(name); ++i) name = prefix_ + Sanitize(base) + "-" + std::to_string(i);
  used_.insert(name);
  rules_.push_back({name, body});
  return name;
}

Status SchemaConverter::Error(const std::string& path, const std::string& what) const {
  return InvalidArgument("JSON schema at '{}': {}", path.empty() ? "/" : path, what);
}

StatusOr<const Json*> SchemaConverter::Resolve(const std::string& ref, const std::string& path) const {
  if (ref.empty() || ref[0] != '#') return Error(path, "only local $ref (\"#...\") is supported, not '" + ref + "'");
  if (ref == "#") return &root_;
  try {
    const Json::json_pointer ptr(ref.substr(1));
    if (!root_.contains(ptr)) return Error(path, "$ref '" + ref + "' does not resolve");
    return &root_.at(ptr);
  } catch (const std::exception&) {
    return Error(path, "$ref '" + ref + "' is not a valid JSON pointer");
  }
}

StatusOr<Json> SchemaConverter::Merge(const Json& a, const Json& b, const std::string& path) {
  // Both schemas must hold. additionalProperties: false on one side forbids
  // the other side's extra properties (JSON Schema applies it against its
  // own `properties` only); a required property forbidden that way makes
  // the combination unsatisfiable (NotFound).
  const Json none = Json::object();
  const Json& pa = a.contains("properties") ? a["properties"] : none;
  const Json& pb = b.contains("properties") ? b["properties"] : none;
  const bool closed_a = a.contains("additionalProperties") && a["additionalProperties"] == false;
  const bool closed_b = b.contains("additionalProperties") && b["additionalProperties"] == false;
  for (const auto& [side, closed, other] : {std::tuple{&a, closed_b, &pb}, std::tuple{&b, closed_a, &pa}}) {
    const Json& own = side->contains("properties") ? (*side)["properties"] : none;
    const bool other_open_schema = (side == &a ? b : a).contains("additionalProperties") &&
                                   (side == &a ? b : a)["additionalProperties"].is_object();
    for (const auto& [k, v] : own.items()) {
      if (other->contains(k)) continue;
      if (other_open_schema) return Error(path, "combining properties with an additionalProperties schema is not supported");
      if (!closed) continue;
      const Json req = side->contains("required") ? (*side)["required"] : Json::array();
      if (std::find(req.begin(), req.end(), Json(k)) != req.end()) {
        return NotFound("property '{}' is required on one side and forbidden on the other", k);
      }
    }
  }
  Json out = a;
  for (const auto& [k, v] : b.items()) {
    if (!out.contains(k)) {
      out[k] = v;
    } else if (k == "properties" && v.is_object() && out[k].is_object()) {
      for (const auto& [pk, pv] : v.items()) {
        if (out[k].contains(pk) && out[k][pk] != pv) return Error(path, "property '" + pk + "' gets two schemas");
        out[k][pk] = pv;
      }
    } else if (k == "required" && v.is_array() && out[k].is_array()) {
      for (const auto& r : v) {
        if (std::find(out[k].begin(), out[k].end(), r) == out[k].end()) out[k].push_back(r);
      }
    } else if (k == "additionalProperties" && (v == false || out[k] == false)) {
      out[k] = false;
    } else if (AnnotationKeywords().count(k) == 0 && out[k] != v) {
      return Error(path, "combining two different '" + k + "' keywords is not supported");
    }
  }
  // Properties one closed side forbids are dropped (they are optional here).
  if (out.contains("properties") && (closed_a || closed_b)) {
    Json kept = Json::object();
    for (const auto& [k, v] : out["properties"].items()) {
      if ((closed_a && !pa.contains(k)) || (closed_b && !pb.contains(k))) continue;
      kept[k] = v;
    }
    out["properties"] = kept;
  }
  return out;
}

StatusOr<std::string> SchemaConverter::Visit(const Json& s, const std::string& path, int depth) {
  if (depth > o_.max_schema_depth) return Error(path, "schema nested deeper than " + std::to_string(o_.max_schema_depth));
  if (static_cast<int32_t>(rules_.size()) > o_.max_rules) {
    return ResourceExhausted("JSON schema needs more than {} grammar rules", o_.max_rules);
  }
  if (s.is_boolean()) {
    if (s.get<bool>()) return Common("value");
    return Error(path, "the schema 'false' admits no value");
  }
  if (!s.is_object()) return Error(path, "a schema must be an object or a boolean");
  for (const auto& [k, v] : s.items()) {
    if (UnsupportedKeywords().count(k)) return Error(path, "'" + k + "' is not supported");
  }
  if (s.contains("$ref")) return VisitRef(s, path, depth);
  if (s.contains("allOf")) {
    const Json& all = s["allOf"];
    if (!all.is_array() || all.empty()) return Error(path, "allOf must be a non-empty array");
    Json merged = s;
    merged.erase("allOf");
    for (size_t i = 0; i < all.size(); ++i) {
      const std::string p = path + "/allOf/" + std::to_string(i);
      const Json* part = &all[i];
      if (part->is_object() && part->contains("$ref") && (*part)["$ref"].is_string()) {
        KVS_ASSIGN_OR_RETURN(part, Resolve((*part)["$ref"].get<std::string>(), p));
      }
      if (!part->is_object()) return Error(p, "allOf parts must be objects");
      if (part->contains("allOf") || part->contains("anyOf") || part->contains("oneOf")) {
        return Error(p, "nested combinators inside allOf are not supported");
      }
      auto m = Merge(merged, *part, p);
      if (!m.ok() && m.status().code() == StatusCode::kNotFound) {
        return Error(p, "allOf can never be satisfied: " + m.status().message());
      }
      KVS_ASSIGN_OR_RETURN(merged, std::move(m));
    }
    return Visit(merged, path, depth + 1);
  }
  for (const char* key : {"anyOf", "oneOf"}) {
    if (!s.contains(key)) continue;
    const Json& alts = s[key];
    if (!alts.is_array() || alts.empty()) return Error(path, std::string(key) + " must be a non-empty array");
    Json rest = s;
    rest.erase(key);
    bool has_constraints = false;
    for (const auto& [k, v] : rest.items()) has_constraints |= AnnotationKeywords().count(k) == 0 && k != "nullable";
    std::vector<std::string> out;
    for (size_t i = 0; i < alts.size(); ++i) {
      const std::string p = path + "/" + key + "/" + std::to_string(i);
      std::string expr;
      if (has_constraints) {
        // The branch must also satisfy its siblings: merge them in.
        const Json* part = &alts[i];
        if (part->is_object() && part->contains("$ref") && (*part)["$ref"].is_string()) {
          KVS_ASSIGN_OR_RETURN(part, Resolve((*part)["$ref"].get<std::string>(), p));
        }
        if (!part->is_object()) return Error(p, "branches combined with sibling keywords must be objects");
        auto merged = Merge(rest, *part, p);
        if (!merged.ok() && merged.status().code() == StatusCode::kNotFound) continue;  // branch never holds
        if (!merged.ok()) return merged.status();
        KVS_ASSIGN_OR_RETURN(expr, Visit(*merged, p, depth + 1));
      } else {
        KVS_ASSIGN_OR_RETURN(expr, Visit(alts[i], p, depth + 1));
      }
      out.push_back(expr);
    }
    if (s.contains("nullable") && s["nullable"] == true) out.push_back("\"null\"");
    if (out.empty()) return Error(path, std::string("no branch of ") + key + " can hold together with its siblings");
    return NewRule(RuleBase(path) + "-alt", JoinAlts(out));
  }
  KVS_ASSIGN_OR_RETURN(std::string expr, VisitTyped(s, path, depth));
  if (s.contains("nullable") && s["nullable"] == true) expr = "(" + expr + " | \"null\")";
  return expr;
}

StatusOr<std::string> SchemaConverter::VisitRef(const Json& s, const std::string& path, int depth) {
  if (!s["$ref"].is_string()) return Error(path, "$ref must be a string");
  for (const auto& [k, v] : s.items()) {
    if (k != "$ref" && AnnotationKeywords().count(k) == 0) {
      return Error(path, "'$ref' with the sibling keyword '" + k + "' is not supported");
    }
  }
  const std::string ref = s["$ref"].get<std::string>();
  if (auto it = ref_rules_.find(ref); it != ref_rules_.end()) return it->second;
  KVS_ASSIGN_OR_RETURN(const Json* target, Resolve(ref, path));
  // Reserve the rule first so that recursive references find it.
  const size_t slash = ref.rfind('/');
  const std::string base = "ref-" + ref.substr(slash == std::string::npos ? 1 : slash + 1);
  std::string name = prefix_ + Sanitize(base);
  for (int i = 1; used_.count(name); ++i) name = prefix_ + Sanitize(base) + "-" + std::to_string(i);
  used_.insert(name);
  ref_rules_[ref] = name;
  const size_t slot = rules_.size();
  rules_.push_back({name, ""});
  KVS_ASSIGN_OR_RETURN(std::string body, Visit(*target, ref.substr(1), depth + 1));
  rules_[slot].second = body;
  return name;
}

StatusOr<std::string> SchemaConverter::VisitTyped(const Json& s, const std::string& path, int depth) {
  if (s.contains("const")) return JsonLiteral(s["const"]);
  std::vector<std::string> types;
  if (s.contains("type")) {
    const Json& t = s["type"];
    if (t.is_string()) {
      types.push_back(t.get<std::string>());
    } else if (t.is_array() && !t.empty()) {
      for (const Json& x : t) {
        if (!x.is_string()) return Error(path, "'type' must be a string or a list of strings");
        types.push_back(x.get<std::string>());
      }
    } else {
      return Error(path, "'type' must be a string or a non-empty list of strings");
    }
  }
  if (s.contains("enum")) {
    if (!s["enum"].is_array() || s["enum"].empty()) return Error(path, "'enum' must be a non-empty array");
    std::vector<std::string> alts;
    for (const Json& v : s["enum"]) {
      if (types.empty() || TypeAllows(types, v)) alts.push_back(JsonLiteral(v));
    }
    if (alts.empty()) return Error(path, "no 'enum' value has the schema's type");
    return JoinAlts(alts);
  }
  if (types.empty()) {
    // Infer the type from the keywords present; none: any value.
    if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties")) {
      types = {"object"};
    } else if (s.contains("items") || s.contains("prefixItems") || s.contains("minItems") || s.contains("maxItems")) {
      types = {"array"};
    } else if (s.contains("minLength") || s.contains("maxLength") || s.contains("pattern") || s.contains("format")) {
      types = {"string"};
    } else if (s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
               s.contains("exclusiveMaximum")) {
      types = {"number"};
    } else {
      return Common("value");
    }
  }
  std::vector<std::string> alts;
  for (const std::string& t : types) {
    std::string e;
    if (t == "object") {
      KVS_ASSIGN_OR_RETURN(e, VisitObject(s, path, depth));
    } else if (t == "array") {
      KVS_ASSIGN_OR_RETURN(e, VisitArray(s, path, depth));
    } else if (t == "string") {
      KVS_ASSIGN_OR_RETURN(e, VisitString(s, path));
    } else if (t == "integer" || t == "number") {
      KVS_ASSIGN_OR_RETURN(e, VisitNumber(s, path, t == "integer"));
    } else if (t == "boolean") {
      e = "(\"true\" | \"false\")";
    } else if (t == "null") {
      e = "\"null\"";
    } else {
      return Error(path, "unknown type '" + t + "'");
    }
    alts.push_back(e);
  }
  return JoinAlts(alts);
}

}  // namespace kvs::grammar::internal
