#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "template/text.h"

namespace kvs::tmpl {

// Containers nest at most this deep when printed or serialized; it also stops
// a namespace that contains itself.
constexpr int kMaxValueDepth = 200;

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kUndefined: return "UndefinedValue";
    case Kind::kNone: return "NullValue";
    case Kind::kBool: return "BooleanValue";
    case Kind::kInt: return "IntegerValue";
    case Kind::kFloat: return "FloatValue";
    case Kind::kString: return "StringValue";
    case Kind::kList: return "ArrayValue";
    case Kind::kDict: return "ObjectValue";
    case Kind::kNamespace: return "NamespaceValue";
    case Kind::kCallable: return "FunctionValue";
  }
  return "?";
}

Value Value::String(std::string s) {
  Value v(Kind::kString);
  v.ptr_ = std::make_shared<std::string>(std::move(s));
  return v;
}

Value Value::String(std::shared_ptr<const std::string> s) {
  Value v(Kind::kString);
  // Stored without const like every payload; strings are never modified.
  v.ptr_ = std::const_pointer_cast<std::string>(std::move(s));
  return v;
}

Value Value::List(ListObj items) {
  Value v(Kind::kList);
  v.ptr_ = std::make_shared<ListObj>(std::move(items));
  return v;
}

Value Value::Dict() {
  Value v(Kind::kDict);
  v.ptr_ = std::make_shared<DictObj>();
  return v;
}

Value Value::Namespace() {
  Value v(Kind::kNamespace);
  v.ptr_ = std::make_shared<DictObj>();
  return v;
}

Value Value::Function(std::shared_ptr<Callable> fn) {
  Value v(Kind::kCallable);
  v.ptr_ = std::move(fn);
  return v;
}

bool Value::Truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b_;
    case Kind::kInt: return i_ != 0;
    case Kind::kFloat: return f_ != 0 && !std::isnan(f_);
    case Kind::kString: return !str().empty();
    case Kind::kList: return !list().empty();
    case Kind::kDict: return !dict().empty();
    case Kind::kNamespace:  // the oracle tests the JS Map object itself
    case Kind::kCallable: return true;
  }
  return false;
}

// ---- DictObj ----

static bool SameKey(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_string()) return a.str() == b.str();
  return a.is_int() && a.int_value() == b.int_value();
}

long DictObj::IndexOf(const Value& key) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (SameKey(entries_[i].first, key)) return static_cast<long>(i);
  }
  return -1;
}

long DictObj::IndexOf(std::string_view key) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Value& k = entries_[i].first;
    if (k.is_string() && k.str() == key) return static_cast<long>(i);
  }
  return -1;
}

const Value* DictObj::Find(const Value& key) const {
  const long i = IndexOf(key);
  return i < 0 ? nullptr : &entries_[i].second;
}

const Value* DictObj::Find(std::string_view key) const {
  const long i = IndexOf(key);
  return i < 0 ? nullptr : &entries_[i].second;
}

void DictObj::Set(const Value& key, Value v) {
  const long i = IndexOf(key);
  if (i >= 0) {
    entries_[i].second = std::move(v);
  } else {
    entries_.emplace_back(key, std::move(v));
  }
}

bool DictObj::Erase(const Value& key) {
  const long i = IndexOf(key);
  if (i < 0) return false;
  entries_.erase(entries_.begin() + i);
  return true;
}

// ---- Numbers ----

std::string JsNumberToString(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  if (d == 0) return "0";
  std::string out;
  if (d < 0) {
    out.push_back('-');
    d = -d;
  }
  // Shortest round-trip digits, as ECMAScript's Number::toString chooses.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i) {
    if (sci[i] != '.') digits.push_back(sci[i]);
  }
  const int exp10 = std::atoi(sci.c_str() + e_pos + 1);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // position of the decimal point
  if (k <= n && n <= 21) {
    out += digits;
    out.append(n - k, '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, n);
    out.push_back('.');
    out += digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(-n, '0');
    out += digits;
  } else {
    out.push_back(digits[0]);
    if (k > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out.push_back('e');
    out.push_back(n - 1 >= 0 ? '+' : '-');
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

static std::string FloatDisplay(double f) {
  if (f == 0 && std::signbit(f)) return "-0.0";
  if (std::isfinite(f) && f == std::floor(f)) {
    // toFixed(1): fixed notation below 1e21, else the plain conversion.
    if (std::fabs(f) < 1e21) {
      char buf[400];
      std::snprintf(buf, sizeof(buf), "%.1f", f);
      return buf;
    }
    return JsNumberToString(f);
  }
  return JsNumberToString(f);
}

// ---- Printing ----

static Status PrintError(const Value& v) {
  return Unimplemented("cannot convert a {} to a string", v.kind_name());
}

StatusOr<std::string> Display(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return std::string();
    case Kind::kBool: return std::string(v.bool_value() ? "true" : "false");
    case Kind::kInt: return std::to_string(v.int_value());
    case Kind::kFloat: return FloatDisplay(v.float_value());
    case Kind::kString: return v.str();
    case Kind::kList:
    case Kind::kDict:
    case Kind::kNamespace: {
      JsonOptions opt;
      opt.undefined_as_null = false;
      return ToJson(v, opt);
    }
    case Kind::kCallable: return PrintError(v);
  }
  return std::string();
}

StatusOr<std::string> RawString(const Value& v) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return std::string();
    case Kind::kFloat: return JsNumberToString(v.float_value());
    case Kind::kDict:
    case Kind::kNamespace: return std::string("[object Map]");
    case Kind::kList: {
      std::string out;
      bool first = true;
      for (const Value& item : v.list()) {
        if (!first) out.push_back(',');
        first = false;
        if (item.is_none()) {
          out += "null";
        } else if (item.is_undefined()) {
          out += "undefined";
        } else {
          KVS_ASSIGN_OR_RETURN(std::string s, Display(item));
          out += s;
        }
      }
      return out;
    }
    case Kind::kCallable: return PrintError(v);
    default: return Display(v);
  }
}

// ---- JSON ----

void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out) {
  static const char kHex[] = "0123456789abcdef";
  auto u_escape = [&](uint32_t unit) {
    *out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out->push_back(kHex[(unit >> shift) & 0xF]);
  };
  out->push_back('"');
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const uint32_t cp = text::NextCodePoint(s, &i);
    switch (cp) {
      case '"': *out += "\\\""; continue;
      case '\\': *out += "\\\\"; continue;
      case '\b': *out += "\\b"; continue;
      case '\f': *out += "\\f"; continue;
      case '\n': *out += "\\n"; continue;
      case '\r': *out += "\\r"; continue;
      case '\t': *out += "\\t"; continue;
      default: break;
    }
    if (cp < 0x20) {
      u_escape(cp);
    } else if (ensure_ascii && cp >= 0x7F) {
      if (cp >= 0x10000) {
        const uint32_t c = cp - 0x10000;
        u_escape(0xD800 | (c >> 10));
        u_escape(0xDC00 | (c & 0x3FF));
      } else {
        u_escape(cp);
      }
    } else {
      out->append(s.substr(start, i - start));
    }
  }
  out->push_back('"');
}

// Approximates String.prototype.localeCompare for sort_keys: letters
// compare case-insensitively, lower case first on ties.
static bool LocaleLess(const std::string& a, const std::string& b) {
  const std::string la = text::Lower(a), lb = text::Lower(b);
  if (la != lb) return la < lb;
  return a > b;
}

static Status AppendJson(const Value& v, const JsonOptions& opt, int depth, std::string* out) {
  if (depth > kMaxValueDepth) return OutOfRange("value nested deeper than {} levels", kMaxValueDepth);
  std::string item_sep = opt.has_separators ? opt.item_separator : (opt.indent > 0 ? "," : ", ");
  std::string key_sep = opt.has_separators ? opt.key_separator : ": ";
  switch (v.kind()) {
    case Kind::kUndefined: *out += opt.undefined_as_null ? "null" : "undefined"; return Status::Ok();
    case Kind::kNone: *out += "null"; return Status::Ok();
    case Kind::kBool: *out += v.bool_value() ? "true" : "false"; return Status::Ok();
    case Kind::kInt: *out += std::to_string(v.int_value()); return Status::Ok();
    case Kind::kFloat:
      *out += std::isfinite(v.float_value()) ? JsNumberToString(v.float_value()) : "null";
      return Status::Ok();
    case Kind::kString: AppendJsonString(v.str(), opt.ensure_ascii, out); return Status::Ok();
    case Kind::kCallable: return InvalidArgument("Cannot convert to JSON: {}", v.kind_name());
    case Kind::kList:
    case Kind::kDict:
    case Kind::kNamespace: break;
  }
  const std::string indent_unit(opt.indent > 0 ? opt.indent : 0, ' ');
  std::string base_pad = "\n";
  for (int i = 0; i < depth; ++i) base_pad += indent_unit;
  const std::string child_pad = base_pad + indent_unit;
  const bool pretty = opt.indent > 0;
  if (v.is_list()) {
    const ListObj& items = v.list();
    out->push_back('[');
    if (pretty && !items.empty()) *out += child_pad;
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) {
        *out += item_sep;
        if (pretty) *out += child_pad;
      }
      KVS_RETURN_IF_ERROR(AppendJson(items[i], opt, depth + 1, out));
    }
    if (pretty && !items.empty()) *out += base_pad;
    out->push_back(']');
    return Status::Ok();
  }
  std::vector<const std::pair<Value, Value>*> entries;
  for (const auto& e : v.dict().entries()) entries.push_back(&e);
  auto key_text = [](const Value& k) { return k.is_string() ? k.str() : std::to_string(k.int_value()); };
  if (opt.sort_keys) {
    std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
      return LocaleLess(key_text(a->first), key_text(b->first));
    });
  }
  out->push_back('{');
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) *out += item_sep;
    if (pretty) *out += child_pad;
    AppendJsonString(key_text(entries[i]->first), opt.ensure_ascii, out);
    *out += key_sep;
    KVS_RETURN_IF_ERROR(AppendJson(entries[i]->second, opt, depth + 1, out));
  }
  if (pretty && !entries.empty()) *out += base_pad;
  out->push_back('}');
  return Status::Ok();
}

StatusOr<std::string> ToJson(const Value& v, const JsonOptions& opt) {
  std::string out;
  KVS_RETURN_IF_ERROR(AppendJson(v, opt, 0, &out));
  return out;
}

// ---- Equality and ordering ----

// JavaScript's ToNumber for a string: NaN when it is not a number literal.
static double JsStringToNumber(std::string_view s) {
  s = text::Trim(s);
  if (s.empty()) return 0;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X' || s[1] == 'o' || s[1] == 'O' || s[1] == 'b' ||
                                      s[1] == 'B')) {
    const int base = (s[1] == 'x' || s[1] == 'X') ? 16 : (s[1] == 'o' || s[1] == 'O') ? 8 : 2;
    uint64_t n = 0;
    auto r = std::from_chars(s.data() + 2, s.data() + s.size(), n, base);
    return (r.ec == std::errc() && r.ptr == s.data() + s.size()) ? double(n) : NAN;
  }
  double sign = 1;
  std::string_view body = s;
  if (body[0] == '+' || body[0] == '-') {
    if (body[0] == '-') sign = -1;
    body.remove_prefix(1);
  }
  if (body == "Infinity") return sign * INFINITY;
  if (body.empty() || !(std::isdigit(static_cast<unsigned char>(body[0])) || body[0] == '.')) return NAN;
  double d = 0;
  auto r = std::from_chars(body.data(), body.data() + body.size(), d, std::chars_format::general);
  if (r.ec != std::errc() || r.ptr != body.data() + body.size()) return NAN;
  return sign * d;
}

static bool NumberLike(const Value& v) { return v.is_number() || v.is_bool(); }

bool LooseEquals(const Value& a, const Value& b) {
  const bool a_nil = a.is_none() || a.is_undefined();
  const bool b_nil = b.is_none() || b.is_undefined();
  if (a_nil || b_nil) return a_nil && b_nil;
  if (NumberLike(a) && NumberLike(b)) {
    if (a.is_int() && b.is_int()) return a.int_value() == b.int_value();
    return a.number() == b.number();
  }
  if (a.is_string() && b.is_string()) return a.str() == b.str();
  if (a.is_string() && NumberLike(b)) return JsStringToNumber(a.str()) == b.number();
  if (NumberLike(a) && b.is_string()) return a.number() == JsStringToNumber(b.str());
  if (a.kind() == b.kind() && (a.is_list() || a.is_object() || a.is_callable())) {
    return a.identity() == b.identity();
  }
  return false;
}

bool StrictEquals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.int_value() == b.int_value();
    return a.number() == b.number();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kBool: return a.bool_value() == b.bool_value();
    case Kind::kString: return a.str() == b.str();
    default: return a.identity() == b.identity();
  }
}

StatusOr<int> Compare(const Value& a, const Value& b, bool case_sensitive) {
  if (a.is_none() && b.is_none()) return 0;
  if (a.is_undefined() && b.is_undefined()) return 0;
  if (a.is_none() || b.is_none() || a.is_undefined() || b.is_undefined()) {
    return InvalidArgument("Cannot compare {} with {}", a.kind_name(), b.kind_name());
  }
  if (NumberLike(a) && NumberLike(b)) {
    if (a.is_int() && b.is_int()) return a.int_value() < b.int_value() ? -1 : a.int_value() > b.int_value() ? 1 : 0;
    const double x = a.number(), y = b.number();
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.kind() != b.kind()) {
    return InvalidArgument("Cannot compare different types: {} and {}", a.kind_name(), b.kind_name());
  }
  if (a.is_string()) {
    if (case_sensitive) return a.str() < b.str() ? -1 : a.str() > b.str() ? 1 : 0;
    const std::string x = text::Lower(a.str()), y = text::Lower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  return InvalidArgument("Cannot compare type: {}", a.kind_name());
}

}  // namespace kvs::tmpl
