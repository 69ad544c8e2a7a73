#include "template/json.h"

#include <algorithm>
#include <cmath>

namespace kvs::tmpl {
namespace {

// A canonical array index as JavaScript orders object keys: "0" or digits
// without a leading zero, below 2^32 - 1.
bool IsArrayIndex(const std::string& k) {
  if (k.empty() || k.size() > 10) return false;
  if (k.size() > 1 && k[0] == '0') return false;
  uint64_t n = 0;
  for (char c : k) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n < 4294967295ull;
}

StatusOr<Value> Convert(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth) return InvalidArgument("JSON input nested deeper than {} levels", kMaxJsonDepth);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::None();
    case nlohmann::ordered_json::value_t::boolean: return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u <= static_cast<uint64_t>(INT64_MAX)) return Value::Int(static_cast<int64_t>(u));
      return Value::Float(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: {
      const double d = j.get<double>();
      if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return Value::Int(static_cast<int64_t>(d));
      return Value::Float(d);
    }
    case nlohmann::ordered_json::value_t::string: return Value::String(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      ListObj items;
      items.reserve(j.size());
      for (const auto& e : j) {
        KVS_ASSIGN_OR_RETURN(Value v, Convert(e, depth + 1));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Value::Dict();
      std::vector<std::pair<uint64_t, const std::string*>> index_keys;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (IsArrayIndex(it.key())) index_keys.emplace_back(std::stoull(it.key()), &it.key());
      }
      std::sort(index_keys.begin(), index_keys.end());
      for (const auto& [n, key] : index_keys) {
        KVS_ASSIGN_OR_RETURN(Value v, Convert(j.at(*key), depth + 1));
        d.dict().Set(*key, std::move(v));
      }
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (IsArrayIndex(it.key())) continue;
        KVS_ASSIGN_OR_RETURN(Value v, Convert(it.value(), depth + 1));
        d.dict().Set(it.key(), std::move(v));
      }
      return d;
    }
    case nlohmann::ordered_json::value_t::binary:
    case nlohmann::ordered_json::value_t::discarded: break;
  }
  return InvalidArgument("unsupported JSON value");
}

}  // namespace

StatusOr<Value> FromJson(const nlohmann::ordered_json& j) { return Convert(j, 0); }

StatusOr<Value> ParseJsonText(std::string_view text) {
  // Reject deep nesting before nlohmann's recursive parser sees it.
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    if (c == '[' || c == '{') max_depth = std::max(max_depth, ++depth);
    if (c == ']' || c == '}') --depth;
  }
  if (max_depth > kMaxJsonDepth) return InvalidArgument("JSON nested deeper than {} levels", kMaxJsonDepth);
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("from_json: the string is not valid JSON");
  return FromJson(j);
}

}  // namespace kvs::tmpl
