// Metadata values: type names, typed accessors, display strings.
#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "gguf/gguf.h"

namespace kvs::gguf {

const char* ValueTypeName(ValueType t) {
  switch (t) {
    case ValueType::kUint8: return "uint8";
    case ValueType::kInt8: return "int8";
    case ValueType::kUint16: return "uint16";
    case ValueType::kInt16: return "int16";
    case ValueType::kUint32: return "uint32";
    case ValueType::kInt32: return "int32";
    case ValueType::kFloat32: return "float32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kUint64: return "uint64";
    case ValueType::kInt64: return "int64";
    case ValueType::kFloat64: return "float64";
  }
  return "?";
}

std::optional<int64_t> Value::AsInt() const {
  if (const auto* u = std::get_if<uint64_t>(&v)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(*u);
  }
  if (const auto* i = std::get_if<int64_t>(&v)) return *i;
  return std::nullopt;
}

std::optional<uint64_t> Value::AsUint() const {
  if (const auto* u = std::get_if<uint64_t>(&v)) return *u;
  if (const auto* i = std::get_if<int64_t>(&v)) {
    if (*i < 0) return std::nullopt;
    return static_cast<uint64_t>(*i);
  }
  return std::nullopt;
}

std::optional<double> Value::AsFloat() const {
  if (const auto* d = std::get_if<double>(&v)) return *d;
  if (const auto* u = std::get_if<uint64_t>(&v)) return static_cast<double>(*u);
  if (const auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> Value::AsBool() const {
  if (const auto* b = std::get_if<bool>(&v)) return *b;
  return std::nullopt;
}

const std::string* Value::AsString() const { return std::get_if<std::string>(&v); }
const Array* Value::AsArray() const { return std::get_if<Array>(&v); }

std::string QuoteString(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x80) {
      // Copy a whole valid sequence; escape a byte that does not start one.
      uint32_t cp;
      if (const size_t len = Utf8Next(s, i, &cp); len != 0) {
        out.append(s.substr(i, len));
        i += len;
      } else {
        out += fmt::format("\\x{:02x}", b);
        ++i;
      }
      continue;
    }
    switch (b) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (b < 0x20 || b == 0x7f) {
          out += fmt::format("\\x{:02x}", b);
        } else {
          out.push_back(static_cast<char>(b));
        }
    }
    ++i;
  }
  out.push_back('"');
  return out;
}

std::string TypeString(const Value& v) {
  if (v.type != ValueType::kArray) return ValueTypeName(v.type);
  const Array* a = v.AsArray();
  return fmt::format("array[{}]", a ? ValueTypeName(a->elem_type) : "?");
}

std::string Value::ToString(size_t max_items) const {
  switch (v.index()) {
    case 0: return fmt::format("{}", std::get<uint64_t>(v));
    case 1: return fmt::format("{}", std::get<int64_t>(v));
    case 2: {
      const double d = std::get<double>(v);
      // Shortest form of the stored width: a float32 0.1 prints as 0.1.
      if (type == ValueType::kFloat32) return fmt::format("{}", static_cast<float>(d));
      return fmt::format("{}", d);
    }
    case 3: return std::get<bool>(v) ? "true" : "false";
    case 4: return QuoteString(std::get<std::string>(v));
    case 5: {
      const Array& a = std::get<Array>(v);
      std::string out = "[";
      const size_t shown = std::min(max_items, a.items.size());
      for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        out += a.items[i].ToString(max_items);
      }
      if (shown < a.items.size()) out += fmt::format("{}... ({} items)", shown ? ", " : "", a.items.size());
      out += "]";
      return out;
    }
  }
  return "?";
}

}  // namespace kvs::gguf
