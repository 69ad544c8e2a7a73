#include "template/text_out.h"

#include <algorithm>
#include <cmath>

#include "template/text.h"

namespace kvs::tmpl {

// Containers nest at most this deep when printed or serialized; it also stops
// a namespace that contains itself.
constexpr int kMaxValueDepth = 200;

// ---- Budget / TextOut ----

Status Budget::CheckString(size_t n) const {
  if (n > max_string_) {
    return ResourceExhausted("rendered text exceeds the limit of {} bytes for one string or output", max_string_);
  }
  return Status::Ok();
}

Status Budget::Charge(size_t n) {
  total_ = n > SIZE_MAX - total_ ? SIZE_MAX : total_ + n;
  if (total_ > max_total_) {
    return ResourceExhausted("the render created more than {} bytes of text and lists in total", max_total_);
  }
  if (total_ >= next_clock_check_) {
    next_clock_check_ = total_ + (size_t{1} << 20);
    return CheckDeadline();
  }
  return Status::Ok();
}

Status Budget::CheckDeadline() const {
  if (has_deadline_ && Clock::now() > deadline_) {
    return DeadlineExceeded("the render ran longer than its time budget of {} s", max_seconds_);
  }
  return Status::Ok();
}

Status TextOut::Append(std::string_view text, bool content) {
  if (text.empty()) return Status::Ok();
  KVS_RETURN_IF_ERROR(budget_->CheckString(text_.size() + text.size()));
  KVS_RETURN_IF_ERROR(budget_->Charge(text.size()));
  const size_t at = text_.size();
  text_.append(text);
  if (content) AddSpan(&spans_, at, text_.size());
  return Status::Ok();
}

Status TextOut::AppendRange(const StrData& s, size_t b, size_t e) {
  if (b >= e) return Status::Ok();
  const size_t at = text_.size();
  KVS_RETURN_IF_ERROR(Append(std::string_view(s.text).substr(b, e - b)));
  if (!s.content.empty()) AppendSpans(&spans_, SliceSpans(s.content, b, e), at);
  return Status::Ok();
}

Value TextOut::Take() {
  Value v = Value::String(std::move(text_), std::move(spans_));
  text_.clear();
  spans_.clear();
  return v;
}

StatusOr<Value> NewString(Budget* budget, std::string text, Spans spans) {
  KVS_RETURN_IF_ERROR(budget->NewString(text.size()));
  return Value::String(std::move(text), std::move(spans));
}

StatusOr<Value> Substring(const Value& v, size_t b, size_t e, Budget* budget) {
  if (b == 0 && e == v.str().size()) return v;
  TextOut out(budget);
  KVS_RETURN_IF_ERROR(out.AppendRange(v.str_data(), b, e));
  return out.Take();
}

StatusOr<Value> Rewritten(const Value& v, std::string text, Budget* budget) {
  Spans spans = ConservativeSpans(v.spans(), text.size());
  return NewString(budget, std::move(text), std::move(spans));
}

// ---- Printing ----

namespace {

std::string FloatDisplay(double f) {
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

Status PrintError(const Value& v) { return Unimplemented("cannot convert a {} to a string", v.kind_name()); }

// Approximates String.prototype.localeCompare for sort_keys: letters
// compare case-insensitively, lower case first on ties.
bool LocaleLess(const std::string& a, const std::string& b) {
  const std::string la = text::Lower(a), lb = text::Lower(b);
  if (la != lb) return la < lb;
  return a > b;
}

struct JsonWriter {
  const JsonOptions& opt;
  std::string item_sep, key_sep;
  bool pretty;

  explicit JsonWriter(const JsonOptions& o)
      : opt(o),
        item_sep(o.has_separators ? o.item_separator : (o.indent > 0 ? "," : ", ")),
        key_sep(o.has_separators ? o.key_separator : ": "),
        pretty(o.indent > 0) {}

  Status NewLine(int depth, TextOut* out) const {
    std::string pad = "\n";
    pad.append(static_cast<size_t>(opt.indent) * static_cast<size_t>(depth), ' ');
    return out->Append(pad);
  }

  Status String(std::string_view s, bool content, TextOut* out) const {
    std::string quoted;
    AppendJsonString(s, opt.ensure_ascii, &quoted);
    return out->Append(quoted, content);
  }

  Status Write(const Value& v, int depth, TextOut* out) const {
    if (depth > kMaxValueDepth) return OutOfRange("value nested deeper than {} levels", kMaxValueDepth);
    switch (v.kind()) {
      case Kind::kUndefined: return out->Append(opt.undefined_as_null ? "null" : "undefined");
      case Kind::kNone: return out->Append("null");
      case Kind::kBool: return out->Append(v.bool_value() ? "true" : "false");
      case Kind::kInt: return out->Append(std::to_string(v.int_value()));
      case Kind::kFloat: return out->Append(std::isfinite(v.float_value()) ? JsNumberToString(v.float_value()) : "null");
      case Kind::kString: return String(v.str(), !v.spans().empty(), out);
      case Kind::kCallable: return InvalidArgument("Cannot convert to JSON: {}", v.kind_name());
      case Kind::kList:
      case Kind::kDict:
      case Kind::kNamespace: break;
    }
    if (v.is_list()) {
      const ListObj& items = v.list();
      KVS_RETURN_IF_ERROR(out->Append("["));
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) KVS_RETURN_IF_ERROR(out->Append(item_sep));
        if (pretty) KVS_RETURN_IF_ERROR(NewLine(depth + 1, out));
        KVS_RETURN_IF_ERROR(Write(items[i], depth + 1, out));
      }
      if (pretty && !items.empty()) KVS_RETURN_IF_ERROR(NewLine(depth, out));
      return out->Append("]");
    }
    std::vector<const std::pair<Value, Value>*> entries;
    entries.reserve(v.dict().size());
    for (const auto& e : v.dict().entries()) entries.push_back(&e);
    auto key_text = [](const Value& k) { return k.is_string() ? k.str() : std::to_string(k.int_value()); };
    if (opt.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [&](const auto* a, const auto* b) {
        return LocaleLess(key_text(a->first), key_text(b->first));
      });
    }
    KVS_RETURN_IF_ERROR(out->Append("{"));
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) KVS_RETURN_IF_ERROR(out->Append(item_sep));
      if (pretty) KVS_RETURN_IF_ERROR(NewLine(depth + 1, out));
      const Value& key = entries[i]->first;
      KVS_RETURN_IF_ERROR(String(key_text(key), key.is_string() && !key.spans().empty(), out));
      KVS_RETURN_IF_ERROR(out->Append(key_sep));
      KVS_RETURN_IF_ERROR(Write(entries[i]->second, depth + 1, out));
    }
    if (pretty && !entries.empty()) KVS_RETURN_IF_ERROR(NewLine(depth, out));
    return out->Append("}");
  }
};

}  // namespace

Status AppendDisplay(const Value& v, TextOut* out) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return Status::Ok();
    case Kind::kBool: return out->Append(v.bool_value() ? "true" : "false");
    case Kind::kInt: return out->Append(std::to_string(v.int_value()));
    case Kind::kFloat: return out->Append(FloatDisplay(v.float_value()));
    case Kind::kString: return out->Append(v.str_data());
    case Kind::kList:
    case Kind::kDict:
    case Kind::kNamespace: {
      JsonOptions opt;
      opt.undefined_as_null = false;
      return AppendJson(v, opt, out);
    }
    case Kind::kCallable: return PrintError(v);
  }
  return Status::Ok();
}

Status AppendRaw(const Value& v, TextOut* out) {
  switch (v.kind()) {
    case Kind::kUndefined:
    case Kind::kNone: return Status::Ok();
    case Kind::kFloat: return out->Append(JsNumberToString(v.float_value()));
    case Kind::kDict:
    case Kind::kNamespace: return out->Append("[object Map]");
    case Kind::kList: {
      bool first = true;
      for (const Value& item : v.list()) {
        if (!first) KVS_RETURN_IF_ERROR(out->Append(","));
        first = false;
        if (item.is_none()) {
          KVS_RETURN_IF_ERROR(out->Append("null"));
        } else if (item.is_undefined()) {
          KVS_RETURN_IF_ERROR(out->Append("undefined"));
        } else {
          KVS_RETURN_IF_ERROR(AppendDisplay(item, out));
        }
      }
      return Status::Ok();
    }
    case Kind::kCallable: return PrintError(v);
    default: return AppendDisplay(v, out);
  }
}

Status AppendJson(const Value& v, const JsonOptions& opt, TextOut* out) { return JsonWriter(opt).Write(v, 0, out); }

StatusOr<Value> DisplayString(const Value& v, Budget* budget) {
  if (v.is_string()) return v;
  TextOut out(budget);
  KVS_RETURN_IF_ERROR(AppendDisplay(v, &out));
  return out.Take();
}

StatusOr<Value> RawStringValue(const Value& v, Budget* budget) {
  if (v.is_string()) return v;
  TextOut out(budget);
  KVS_RETURN_IF_ERROR(AppendRaw(v, &out));
  return out.Take();
}

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

}  // namespace kvs::tmpl
