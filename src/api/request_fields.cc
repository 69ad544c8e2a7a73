#include "api/request_fields.h"

#include <fmt/format.h>

namespace kvs::api {

const char* JsonTypeName(const Json& j) {
  switch (j.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "a boolean";
    case Json::value_t::string: return "a string";
    case Json::value_t::array: return "an array";
    case Json::value_t::object: return "an object";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float: return "a number";
    default: return "an unsupported value";
  }
}


std::string Clip(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return std::string(s);
  // Cut on a UTF-8 character boundary.
  size_t n = max_bytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n)) + "...";
}

}  // namespace kvs::api

namespace kvs::api::dialect {

const Json* Field(const Json& obj, const char* name) {
  auto it = obj.find(name);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<ApiError> WrongType(const std::string& param, const char* want, const Json& got) {
  return BadRequest(fmt::format("'{}' must be {}, got {}", param, want, JsonTypeName(got)), param, "invalid_type");
}

std::optional<ApiError> NotSupported(const std::string& param, const std::string& why) {
  return BadRequest(fmt::format("'{}' is not supported: {}", param, why), param, "unsupported_parameter");
}

std::optional<ApiError> RequiredString(const Json& obj, const char* name, const std::string& p, std::string* out) {
  const Json* f = nullptr;
  if (auto e = Required(obj, name, p, &f)) return e;
  if (!f->is_string()) return WrongType(p + "." + name, "a string", *f);
  *out = f->get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> Required(const Json& obj, const char* name, const std::string& p, const Json** out) {
  *out = Field(obj, name);
  if (!*out) return BadRequest(fmt::format("'{}.{}' is required", p, name), p + "." + name, "missing_required_parameter");
  return std::nullopt;
}

std::optional<ApiError> JoinedText(const Json& content, const std::string& param, const char* parts, const char* part,
                                   const PartText& part_text, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array()) return WrongType(param, fmt::format("a string or an array of {}", parts).c_str(), content);
  std::string joined;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& item = content[i];
    const std::string p = fmt::format("{}[{}]", param, i);
    if (!item.is_object()) return WrongType(p, part, item);
    std::string text;
    if (auto e = part_text(item, p, &text)) return e;
    if (i) joined += "\n";
    joined += text;
  }
  *out = std::move(joined);
  return std::nullopt;
}

ApiError RenameParam(ApiError e, const std::vector<std::pair<std::string, std::string>>& prefixes) {
  if (!e.param) return e;
  for (const auto& [from, to] : prefixes) {
    if (e.param->compare(0, from.size(), from) != 0) continue;
    std::string msg;
    // Replace whole mentions of the field ('from' followed by a quote, '.' or '[').
    for (size_t i = 0; i < e.message.size();) {
      if (e.message.compare(i, from.size(), from) == 0 && (i == 0 || e.message[i - 1] == '\'')) {
        msg += to;
        i += from.size();
      } else {
        msg += e.message[i++];
      }
    }
    e.message = std::move(msg);
    *e.param = to + e.param->substr(from.size());
    break;
  }
  return e;
}

}  // namespace kvs::api::dialect
