#include "template/json.h"

#include <algorithm>
#include <cmath>

#include "base/json_depth.h"

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

Value Str(std::string s, bool content) { return content ? Value::Content(std::move(s)) : Value::String(std::move(s)); }

struct Converter {
  bool content;
  JsonLimits limits;
  size_t bytes = 0;

  Status Charge(size_t n) {
    bytes = n > SIZE_MAX - bytes ? SIZE_MAX : bytes + n;
    if (bytes > limits.max_bytes) return ResourceExhausted("JSON input makes more than {} bytes of values", limits.max_bytes);
    return Status::Ok();
  }

  StatusOr<Value> Convert(const nlohmann::ordered_json& j, int depth);
};

StatusOr<Value> Converter::Convert(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth) return InvalidArgument("JSON input nested deeper than {} levels", kMaxJsonDepth);
  KVS_RETURN_IF_ERROR(Charge(sizeof(Value) + (j.is_string() ? j.get_ref<const std::string&>().size() : 0)));
  if ((j.is_array() || j.is_object()) && j.size() > limits.max_items) {
    return ResourceExhausted("a JSON {} of {} items exceeds the limit of {}", j.is_array() ? "array" : "object",
                             j.size(), limits.max_items);
  }
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
    case nlohmann::ordered_json::value_t::string: return Str(j.get<std::string>(), content);
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
      // Iterators, not keys: ordered_json's lookup by key is linear.
      std::vector<std::pair<uint64_t, nlohmann::ordered_json::const_iterator>> index_keys;
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (IsArrayIndex(it.key())) index_keys.emplace_back(std::stoull(it.key()), it);
      }
      std::stable_sort(index_keys.begin(), index_keys.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [n, it] : index_keys) {
        KVS_ASSIGN_OR_RETURN(Value v, Convert(it.value(), depth + 1));
        d.dict().Set(Str(it.key(), content), std::move(v));
      }
      for (auto it = j.begin(); it != j.end(); ++it) {
        if (IsArrayIndex(it.key())) continue;
        KVS_ASSIGN_OR_RETURN(Value v, Convert(it.value(), depth + 1));
        d.dict().Set(Str(it.key(), content), std::move(v));
      }
      return d;
    }
    case nlohmann::ordered_json::value_t::binary:
    case nlohmann::ordered_json::value_t::discarded: break;
  }
  return InvalidArgument("unsupported JSON value");
}

}  // namespace

StatusOr<Value> FromJson(const nlohmann::ordered_json& j, bool content, const JsonLimits& limits) {
  Converter c{content, limits};
  return c.Convert(j, 0);
}

StatusOr<Value> ParseJsonText(std::string_view text, bool content, const JsonLimits& limits) {
  // Reject deep nesting before nlohmann's recursive parser sees it.
  const size_t max_depth = JsonNestingDepth(text, kMaxJsonDepth);
  if (max_depth > static_cast<size_t>(kMaxJsonDepth)) return InvalidArgument("JSON nested deeper than {} levels", kMaxJsonDepth);
  const size_t max_members = std::min(limits.max_items, kMaxJsonObjectMembers);
  if (const JsonMembers m = CountJsonObjectMembers(text); m.largest > max_members) {
    return ResourceExhausted("from_json: an object of {} members (the limit is {})", m.largest, max_members);
  }
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("from_json: the string is not valid JSON");
  return FromJson(j, content, limits);
}

}  // namespace kvs::tmpl
