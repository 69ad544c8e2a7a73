// JSON Schema -> GBNF: object, array, string and number schemas, and the
// public functions of json_schema.h.
#include <algorithm>
#include <cmath>

#include "grammar/json_schema.h"
#include "grammar/json_schema_internal.h"
#include "grammar/regex.h"
#include "base/utf8.h"

namespace kvs::grammar {
namespace internal {

namespace {

using Json = nlohmann::ordered_json;

// Characters of object keys we generate beyond the declared names: anything
// a JSON string may hold unescaped (escapes are left out so that a key can
// never spell a declared name in another way).
std::vector<CharRange> KeyChars() { return ComplementRanges({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}); }

struct KeyTrie {
  std::map<uint32_t, KeyTrie> children;
  bool terminal = false;
};

std::string NotIn(const KeyTrie& node, const std::string& key_char) {
  std::vector<std::string> alts;
  if (!node.terminal) alts.push_back("\"\\\"\"");
  std::vector<CharRange> used = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  for (const auto& [cp, child] : node.children) {
    std::string lit;
    AppendUtf8(cp, &lit);
    alts.push_back(GbnfQuote(lit) + " " + NotIn(child, key_char));
    used.push_back({cp, cp});
  }
  const std::vector<CharRange> other = ComplementRanges(used);
  if (!other.empty()) alts.push_back(GbnfClass(other) + " " + key_char + "* \"\\\"\"");
  return JoinAlts(alts);
}

}  // namespace

std::string SchemaConverter::KeyNotIn(const std::vector<std::string>& names) {
  if (names.empty()) return Common("string");
  KeyTrie root;
  const std::vector<CharRange> allowed = KeyChars();
  for (const std::string& name : names) {
    KeyTrie* node = &root;
    bool representable = true;
    for (size_t i = 0; i < name.size() && representable;) {
      uint32_t cp = 0;
      const size_t n = Utf8Next(name, i, &cp);
      if (n == 0) {
        representable = false;
        break;
      }
      representable = cp >= 0x20 && cp != '"' && cp != '\\';
      node = &node->children[cp];
      i += n;
    }
    if (representable) node->terminal = true;
  }
  return "\"\\\"\" " + NotIn(root, GbnfClass(allowed));
}

StatusOr<std::string> SchemaConverter::VisitObject(const Json& s, const std::string& path, int depth) {
  const Json empty = Json::object();
  const Json& props = s.contains("properties") ? s["properties"] : empty;
  if (!props.is_object()) return Error(path, "'properties' must be an object");
  std::vector<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return Error(path, "'required' must be an array");
    for (const Json& r : s["required"]) {
      if (!r.is_string()) return Error(path, "'required' must list strings");
      required.push_back(r.get<std::string>());
    }
  }
  // Declared properties in schema order, then required names without a schema.
  std::vector<std::string> names;
  std::vector<std::string> values;
  std::vector<bool> optional;
  for (const auto& [name, sub] : props.items()) {
    KVS_ASSIGN_OR_RETURN(std::string v, Visit(sub, path + "/properties/" + name, depth + 1));
    names.push_back(name);
    values.push_back(v);
    optional.push_back(std::find(required.begin(), required.end(), name) == required.end());
  }
  for (const std::string& r : required) {
    if (std::find(names.begin(), names.end(), r) != names.end()) continue;
    names.push_back(r);
    values.push_back(Common("value"));
    optional.push_back(false);
  }
  // Extra properties: explicit, or implied when no properties are declared.
  std::string extra;
  const bool has_additional = s.contains("additionalProperties");
  if ((has_additional && s["additionalProperties"] != false) || (!has_additional && props.empty())) {
    std::string value = Common("value");
    if (has_additional && s["additionalProperties"].is_object()) {
      KVS_ASSIGN_OR_RETURN(value, Visit(s["additionalProperties"], path + "/additionalProperties", depth + 1));
    }
    extra = KeyNotIn(names) + " " + Colon() + " " + value;
  }
  const size_t n = names.size();
  const std::string base = RuleBase(path);
  std::vector<std::string> kv(n);
  for (size_t i = 0; i < n; ++i) kv[i] = JsonLiteral(Json(names[i])) + " " + Colon() + " " + values[i];
  // tail[i]: properties i.. after at least one was written (each with a
  // leading comma); first[i]: properties i.., none written yet, at least one
  // to come ("" when nothing can come).
  std::vector<std::string> tail(n + 1), first(n + 1);
  tail[n] = extra.empty() ? "" : "(" + Comma() + " " + extra + ")*";
  first[n] = extra.empty() ? "" : extra + (tail[n].empty() ? "" : " " + tail[n]);
  for (size_t i = n; i-- > 0;) {
    std::string t = Comma() + " " + kv[i];
    t = optional[i] ? "(" + t + ")?" : t;
    if (!tail[i + 1].empty()) t += " " + tail[i + 1];
    tail[i] = NewRule(base + "-tail" + std::to_string(i), t);
    std::string f = kv[i] + (tail[i + 1].empty() ? "" : " " + tail[i + 1]);
    if (optional[i] && !first[i + 1].empty()) f = "(" + f + " | " + first[i + 1] + ")";
    first[i] = NewRule(base + "-first" + std::to_string(i), f);
  }
  const bool allow_empty = std::all_of(optional.begin(), optional.end(), [](bool b) { return b; });
  if (first[0].empty()) return Braced("{", "}", "\"\"", /*allow_empty=*/true, /*repeat=*/false);
  return NewRule(base, Braced("{", "}", first[0], allow_empty, /*repeat=*/false));
}

StatusOr<std::string> SchemaConverter::VisitArray(const Json& s, const std::string& path, int depth) {
  std::vector<const Json*> prefix;
  const Json* items = nullptr;  // schema of the items after the prefix; null: any
  bool additional = true;
  if (s.contains("prefixItems")) {
    if (!s["prefixItems"].is_array()) return Error(path, "'prefixItems' must be an array");
    for (const Json& p : s["prefixItems"]) prefix.push_back(&p);
    if (s.contains("items")) items = &s["items"];
  } else if (s.contains("items") && s["items"].is_array()) {  // draft-07 tuple
    for (const Json& p : s["items"]) prefix.push_back(&p);
    if (s.contains("additionalItems")) items = &s["additionalItems"];
  } else if (s.contains("items")) {
    items = &s["items"];
  }
  if (items != nullptr && items->is_boolean() && !items->get<bool>()) additional = false;
  auto count = [&](const char* key, int64_t dflt) -> StatusOr<int64_t> {
    if (!s.contains(key)) return dflt;
    if (!s[key].is_number_unsigned() && !s[key].is_number_integer()) return Error(path, std::string(key) + " must be a whole number");
    const int64_t v = s[key].get<int64_t>();
    if (v < 0) return Error(path, std::string(key) + " must not be negative");
    return v;
  };
  KVS_ASSIGN_OR_RETURN(int64_t min, count("minItems", 0));
  KVS_ASSIGN_OR_RETURN(int64_t max, count("maxItems", -1));
  const auto k = static_cast<int64_t>(prefix.size());
  if (!additional) max = max < 0 ? k : std::min(max, k);
  if (max >= 0 && min > max) return Error(path, "minItems is larger than the items allowed");
  if (min > o_.max_items) return Error(path, "minItems above " + std::to_string(o_.max_items) + " is not supported");
  if (max > o_.max_items) max = std::max<int64_t>(min, o_.max_items);  // fewer items are still valid
  std::vector<std::string> elems;
  for (int64_t j = 0; j < k && (max < 0 || j < max); ++j) {
    KVS_ASSIGN_OR_RETURN(std::string e, Visit(*prefix[j], path + "/prefixItems/" + std::to_string(j), depth + 1));
    elems.push_back(e);
  }
  std::string item;
  if (additional && (max < 0 || max > k)) {
    if (items == nullptr || items->is_boolean()) {
      item = Common("value");
    } else {
      KVS_ASSIGN_OR_RETURN(item, Visit(*items, path + "/items", depth + 1));
    }
  }
  // chain(j): elements j.. with element j present.
  std::string chain;
  if (!item.empty()) {
    const int64_t lo = std::max<int64_t>(0, min - k - 1);
    const int64_t hi = max < 0 ? -1 : max - k - 1;
    chain = item + (hi == 0 ? "" : " " + RepeatGbnf(Comma() + " " + item, lo, hi));
  }
  for (int64_t j = static_cast<int64_t>(elems.size()) - 1; j >= 0; --j) {
    if (chain.empty()) {
      chain = elems[j];
    } else if (j + 1 < min) {
      chain = elems[j] + " " + Comma() + " " + chain;
    } else {
      chain = elems[j] + " (" + Comma() + " " + chain + ")?";
    }
  }
  if (chain.empty()) return Braced("[", "]", "\"\"", true, false);
  return NewRule(RuleBase(path) + (path.empty() ? "-array" : ""), Braced("[", "]", chain, min == 0, false));
}

StatusOr<std::string> SchemaConverter::VisitString(const Json& s, const std::string& path) {
  const bool has_len = s.contains("minLength") || s.contains("maxLength");
  const std::string quote = "\"\\\"\"";
  if (s.contains("format")) {
    if (!s["format"].is_string()) return Error(path, "'format' must be a string");
    if (has_len || s.contains("pattern")) return Error(path, "'format' combined with minLength/maxLength/pattern is not supported");
    auto f = FormatGbnf(s["format"].get<std::string>());
    if (!f.ok()) return Error(path, f.status().message());
    return quote + " " + *f + " " + quote;
  }
  if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) return Error(path, "'pattern' must be a string");
    if (has_len) return Error(path, "'pattern' combined with minLength/maxLength is not supported");
    RegexOptions ro;
    ro.ecmascript = true;
    ro.search = true;
    ro.json_string = true;
    auto re = RegexToGbnf(s["pattern"].get<std::string>(), ro);
    if (!re.ok()) return Error(path, "pattern: " + re.status().message());
    return NewRule(RuleBase(path) + "-pattern", quote + " " + *re + " " + quote);
  }
  auto length = [&](const char* key, int64_t dflt) -> StatusOr<int64_t> {
    if (!s.contains(key)) return dflt;
    if (!s[key].is_number_unsigned() && !s[key].is_number_integer()) return Error(path, std::string(key) + " must be a whole number");
    const int64_t v = s[key].get<int64_t>();
    if (v < 0) return Error(path, std::string(key) + " must not be negative");
    return v;
  };
  KVS_ASSIGN_OR_RETURN(int64_t min, length("minLength", 0));
  KVS_ASSIGN_OR_RETURN(int64_t max, length("maxLength", -1));
  if (max >= 0 && min > max) return Error(path, "minLength is larger than maxLength");
  if (min > o_.max_length) return Error(path, "minLength above " + std::to_string(o_.max_length) + " is not supported");
  if (max > o_.max_length) max = std::max<int64_t>(min, o_.max_length);  // shorter strings are still valid
  if (min == 0 && max < 0) return Common("string");
  return quote + " " + RepeatGbnf(Common("char"), min, max) + " " + quote;
}

StatusOr<std::string> SchemaConverter::VisitNumber(const Json& s, const std::string& path, bool integer) {
  std::optional<double> lo, hi;
  bool loex = false, hiex = false;
  auto bound = [&](const char* key) -> StatusOr<std::optional<double>> {
    if (!s.contains(key) || s[key].is_boolean()) return std::optional<double>();
    if (!s[key].is_number()) return Error(path, std::string(key) + " must be a number");
    return std::optional<double>(s[key].get<double>());
  };
  KVS_ASSIGN_OR_RETURN(auto minimum, bound("minimum"));
  KVS_ASSIGN_OR_RETURN(auto maximum, bound("maximum"));
  KVS_ASSIGN_OR_RETURN(auto ex_min, bound("exclusiveMinimum"));
  KVS_ASSIGN_OR_RETURN(auto ex_max, bound("exclusiveMaximum"));
  // Draft-04 spelling: exclusiveMinimum/Maximum true makes minimum/maximum exclusive.
  const bool d4_min = s.contains("exclusiveMinimum") && s["exclusiveMinimum"] == true;
  const bool d4_max = s.contains("exclusiveMaximum") && s["exclusiveMaximum"] == true;
  lo = minimum;
  loex = d4_min;
  if (ex_min && (!lo || *ex_min >= *lo)) {
    lo = ex_min;
    loex = true;
  }
  hi = maximum;
  hiex = d4_max;
  if (ex_max && (!hi || *ex_max <= *hi)) {
    hi = ex_max;
    hiex = true;
  }
  if (!lo && !hi) return Common(integer ? "integer" : "number");
  auto to_int = [](double v) -> std::optional<int64_t> {
    if (!std::isfinite(v) || std::fabs(v) > 9e15) return std::nullopt;  // beyond 15 digits: no bound
    return static_cast<int64_t>(v);
  };
  std::string expr;
  if (integer) {
    std::optional<int64_t> ilo, ihi;
    if (lo) ilo = to_int(loex ? std::floor(*lo) + 1 : std::ceil(*lo));
    if (hi) ihi = to_int(hiex ? std::ceil(*hi) - 1 : std::floor(*hi));
    if (lo && *lo > 9e15) return Error(path, "minimum is beyond the 15-digit integers this server writes");
    if (hi && *hi < -9e15) return Error(path, "maximum is beyond the 15-digit integers this server writes");
    if (ilo && ihi && *ilo > *ihi) return Error(path, "no integer lies between the bounds");
    expr = IntegerRangeGbnf(ilo, ihi);
  } else {
    for (const auto& b : {lo, hi}) {
      if (b && *b != std::floor(*b)) {
        return Error(path, "a fractional bound (" + Json(*b).dump() + ") on a number is not supported");
      }
    }
    if ((lo && *lo > 9e15) || (hi && *hi < -9e15)) return Error(path, "bounds beyond 15 digits are not supported");
    expr = NumberRangeGbnf(lo ? to_int(*lo) : std::nullopt, loex, hi ? to_int(*hi) : std::nullopt, hiex);
  }
  if (expr.empty()) return Error(path, "no number lies between the bounds");
  return NewRule(RuleBase(path) + (integer ? "-int" : "-num"), expr);
}

}  // namespace internal

StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options,
                                       std::string_view prefix) {
  internal::SchemaConverter c(schema, options, std::string(prefix));
  return c.Run();
}

StatusOr<Grammar> JsonSchemaToGrammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  KVS_ASSIGN_OR_RETURN(std::string text, JsonSchemaToGbnf(schema, options));
  auto g = ParseGbnf(text);
  if (!g.ok()) return g.status().WithContext("JSON schema");
  return g;
}

StatusOr<Grammar> JsonSchemaToGrammar(std::string_view schema_json, const JsonSchemaOptions& options) {
  const auto schema = nlohmann::ordered_json::parse(schema_json, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return InvalidArgument("the JSON schema is not valid JSON");
  return JsonSchemaToGrammar(schema, options);
}

Grammar JsonObjectGrammar(const JsonSchemaOptions& options) {
  auto g = JsonSchemaToGrammar(nlohmann::ordered_json{{"type", "object"}}, options);
  KVS_CHECK(g.ok());
  return std::move(*g);
}

Grammar AnyJsonGrammar(const JsonSchemaOptions& options) {
  auto g = JsonSchemaToGrammar(nlohmann::ordered_json(true), options);
  KVS_CHECK(g.ok());
  return std::move(*g);
}

}  // namespace kvs::grammar
