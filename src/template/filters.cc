// Filters and tests. Those @huggingface/jinja has behave as it does; the
// rest are Jinja2's (min, max, sum, batch, select, reject, map with a filter
// name, round, wordcount, escape, from_json, ...).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <unordered_set>

#include "template/interpreter.h"
#include "template/json.h"
#include "template/text.h"

namespace kvs::tmpl {
namespace {

Status Unknown(const char* family, std::string_view name) {
  return InvalidArgument("Unknown {} filter: {}", family, name);
}

StatusOr<bool> BoolArg(const CallArgs& args, size_t i, std::string_view name, bool def) {
  const Value* v = args.Get(i, name);
  if (!v || v->is_undefined()) return def;
  if (!v->is_bool()) return InvalidArgument("{} must be a boolean", name);
  return v->bool_value();
}

// `a.b.0` style attribute paths (map, sort, sum, min, max, join).
Value AttributePath(const Value& item, std::string_view path) {
  Value v = item;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t dot = path.find('.', start);
    const std::string_view part = path.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (v.is_object()) {
      const Value* f = v.dict().Find(part);
      if (!f) return Value();
      v = *f;
    } else if (v.is_list()) {
      char* end = nullptr;
      const std::string p(part);
      const long idx = std::strtol(p.c_str(), &end, 10);
      if (p.empty() || *end != '\0' || idx < 0 || static_cast<size_t>(idx) >= v.list().size()) return Value();
      v = v.list()[idx];
    } else {
      return Value();
    }
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  return v;
}

StatusOr<Value> ToJsonFilter(Interpreter& in, const Value& v, const CallArgs& args) {
  JsonOptions opt;
  if (const Value* indent = args.Get(0, "indent"); indent && !indent->is_none() && !indent->is_undefined()) {
    if (!indent->is_int()) return InvalidArgument("If set, indent must be a number");
    opt.indent = static_cast<int>(std::clamp<int64_t>(indent->int_value(), 0, 64));
  }
  KVS_ASSIGN_OR_RETURN(opt.ensure_ascii, BoolArg(args, SIZE_MAX, "ensure_ascii", false));
  KVS_ASSIGN_OR_RETURN(opt.sort_keys, BoolArg(args, SIZE_MAX, "sort_keys", false));
  if (const Value* sep = args.Keyword("separators"); sep && !sep->is_none()) {
    if (!sep->is_list() || sep->list().size() != 2 || !sep->list()[0].is_string() || !sep->list()[1].is_string()) {
      return InvalidArgument("separators must be a tuple of two strings");
    }
    opt.has_separators = true;
    opt.item_separator = sep->list()[0].str();
    opt.key_separator = sep->list()[1].str();
  }
  TextOut out = in.NewText();
  KVS_RETURN_IF_ERROR(AppendJson(v, opt, &out));
  return out.Take();
}

// JavaScript's parseInt(s, 10) / parseFloat(s): the longest numeric prefix
// after leading whitespace; false when there is none (NaN).
bool ParseNumberPrefix(const std::string& s, bool integer, double* out) {
  const std::string_view t = text::TrimStart(s);
  size_t i = 0;
  std::string num;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) num.push_back(t[i++]);
  if (!integer) {
    const std::string_view rest = t.substr(i);
    if (rest.substr(0, 8) == "Infinity") {
      *out = num == "-" ? -INFINITY : INFINITY;
      return true;
    }
  }
  auto digits = [&] {
    size_t n = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') num.push_back(t[i++]), ++n;
    return n;
  };
  size_t n = digits();
  if (!integer && i < t.size() && t[i] == '.') {
    num.push_back(t[i++]);
    n += digits();
  }
  if (n == 0) return false;
  if (!integer && i < t.size() && (t[i] == 'e' || t[i] == 'E')) {
    size_t j = i + 1;
    if (j < t.size() && (t[j] == '+' || t[j] == '-')) ++j;
    if (j < t.size() && t[j] >= '0' && t[j] <= '9') {
      num.append(t.substr(i, j - i));
      i = j;
      digits();
    }
  }
  *out = std::strtod(num.c_str(), nullptr);
  return true;
}

StatusOr<Value> NumberFilter(std::string_view name, const Value& v, const CallArgs& args) {
  const bool to_int = name == "int";
  const Value* def = args.Get(0, "default");
  const Value fallback = def ? *def : (to_int ? Value::Int(0) : Value::Float(0));
  if (v.is_string()) {
    double d = 0;
    if (!ParseNumberPrefix(v.str(), to_int, &d)) return fallback;
    if (to_int) {
      if (!(std::fabs(d) < 9.2e18)) return OutOfRange("integer overflow in int filter");
      return Value::Int(static_cast<int64_t>(d));
    }
    return Value::Float(d);
  }
  if (v.is_number()) {
    if (!to_int) return Value::Float(v.number());
    if (v.is_int()) return v;
    const double t = std::trunc(v.float_value());
    if (!(std::fabs(t) < 9.2e18)) return OutOfRange("integer overflow in int filter");
    return Value::Int(static_cast<int64_t>(t));
  }
  if (v.is_bool()) return to_int ? Value::Int(v.bool_value()) : Value::Float(v.bool_value());
  return InvalidArgument("Cannot apply filter \"{}\" to type: {}", name, v.kind_name());
}

StatusOr<Value> JoinFilter(Interpreter& in, const Value& v, const CallArgs& args) {
  const Value* sep = args.Get(0, "separator");
  if (sep && !sep->is_string()) return InvalidArgument("separator must be a string");
  TextOut out = in.NewText();
  if (v.is_string()) {
    // The code points of the string, separated.
    const StrData& s = v.str_data();
    for (size_t i = 0; i < s.text.size();) {
      if (i > 0 && sep) KVS_RETURN_IF_ERROR(out.Append(sep->str_data()));
      const size_t start = i;
      text::NextCodePoint(s.text, &i);
      KVS_RETURN_IF_ERROR(out.AppendRange(s, start, i));
    }
    return out.Take();
  }
  if (!v.is_list()) return InvalidArgument("Cannot apply filter \"join\" to type: {}", v.kind_name());
  const Value* attribute = args.Keyword("attribute");
  const ListObj& items = v.list();
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0 && sep) KVS_RETURN_IF_ERROR(out.Append(sep->str_data()));
    if (attribute && attribute->is_string()) {
      KVS_RETURN_IF_ERROR(AppendRaw(AttributePath(items[i], attribute->str()), &out));
    } else {
      KVS_RETURN_IF_ERROR(AppendRaw(items[i], &out));
    }
  }
  return out.Take();
}

StatusOr<Value> SortFilter(Interpreter& in, const Value& v, const CallArgs& args) {
  KVS_ASSIGN_OR_RETURN(bool reverse, BoolArg(args, 0, "reverse", false));
  KVS_ASSIGN_OR_RETURN(bool case_sensitive, BoolArg(args, 1, "case_sensitive", false));
  const Value* attr = args.Get(2, "attribute");
  std::string path;
  if (attr && !attr->is_none() && !attr->is_undefined()) {
    if (attr->is_string()) {
      path = attr->str();
    } else if (attr->is_int()) {
      path = std::to_string(attr->int_value());
    } else {
      return InvalidArgument("attribute must be a string, integer, or null");
    }
  }
  KVS_RETURN_IF_ERROR(in.CheckListSize(v.list().size()));
  ListObj items = v.list();
  KVS_RETURN_IF_ERROR(SortValues(in, &items, reverse, case_sensitive,
                                 [&path](const Value& x) { return path.empty() ? x : AttributePath(x, path); }));
  return Value::List(std::move(items));
}

StatusOr<Value> MinMax(Interpreter& in, const Value& v, const CallArgs& args, bool want_max) {
  KVS_ASSIGN_OR_RETURN(bool case_sensitive, BoolArg(args, 0, "case_sensitive", false));
  const Value* attr = args.Get(1, "attribute");
  const ListObj& items = v.list();
  if (items.empty()) return Value();
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    KVS_RETURN_IF_ERROR(in.Tick());
    const Value x = attr && attr->is_string() ? AttributePath(items[i], attr->str()) : items[i];
    const Value y = attr && attr->is_string() ? AttributePath(items[best], attr->str()) : items[best];
    KVS_ASSIGN_OR_RETURN(int c, Compare(x, y, case_sensitive));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

StatusOr<Value> SumFilter(const Value& v, const CallArgs& args) {
  const Value* attr = args.Get(0, "attribute");
  const Value* start = args.Get(1, "start");
  Value acc = start ? *start : Value::Int(0);
  for (const Value& item : v.list()) {
    const Value x = attr && attr->is_string() ? AttributePath(item, attr->str()) : item;
    if (!(x.is_number() || x.is_bool()) || !(acc.is_number() || acc.is_bool())) {
      return InvalidArgument("sum: cannot add {} to {}", x.kind_name(), acc.kind_name());
    }
    if (acc.is_float() || x.is_float()) {
      acc = Value::Float(acc.number() + x.number());
    } else {
      int64_t r = 0;
      const int64_t a = acc.is_int() ? acc.int_value() : acc.bool_value();
      const int64_t b = x.is_int() ? x.int_value() : x.bool_value();
      if (__builtin_add_overflow(a, b, &r)) return OutOfRange("integer overflow in sum");
      acc = Value::Int(r);
    }
  }
  return acc;
}

// select/reject/selectattr/rejectattr.
StatusOr<Value> SelectFilter(Interpreter& in, std::string_view name, const Value& v, const CallArgs& args) {
  const bool by_attr = name == "selectattr" || name == "rejectattr";
  const bool select = name == "select" || name == "selectattr";
  size_t next = 0;
  std::string attr;
  if (by_attr) {
    if (args.positional.empty() || !args.positional[0].is_string()) {
      return InvalidArgument("arguments of `{}` must be strings", name);
    }
    attr = args.positional[0].str();
    next = 1;
  }
  const Value* test = next < args.positional.size() ? &args.positional[next] : nullptr;
  if (test && !test->is_string()) return InvalidArgument("arguments of `{}` must be strings", name);
  CallArgs test_args;
  for (size_t i = next + 1; i < args.positional.size(); ++i) test_args.positional.push_back(args.positional[i]);
  ListObj out;
  for (const Value& item : v.list()) {
    KVS_RETURN_IF_ERROR(in.Tick());
    Value subject = item;
    bool result = false;
    if (by_attr) {
      if (!item.is_object()) return InvalidArgument("`{}` can only be applied to array of objects", name);
      const Value* a = item.dict().Find(attr);
      if (!a) {
        // The oracle treats a missing attribute as failing any test.
        if (!select) out.push_back(item);
        continue;
      }
      subject = *a;
    }
    if (test) {
      KVS_ASSIGN_OR_RETURN(result, in.ApplyTest(test->str(), subject, test_args));
    } else {
      result = subject.Truthy();
    }
    if (result == select) out.push_back(item);
  }
  return Value::List(std::move(out));
}

StatusOr<Value> MapFilter(Interpreter& in, const Value& v, const CallArgs& args) {
  KVS_RETURN_IF_ERROR(in.CheckListSize(v.list().size()));
  ListObj out;
  if (const Value* attr = args.Keyword("attribute")) {
    if (!attr->is_string()) return InvalidArgument("attribute must be a string");
    const Value* def = args.Keyword("default");
    for (const Value& item : v.list()) {
      if (!item.is_object()) return InvalidArgument("items in map must be an object");
      Value x = AttributePath(item, attr->str());
      out.push_back(x.is_undefined() && def ? *def : x);
    }
    return Value::List(std::move(out));
  }
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return InvalidArgument("map needs a filter name or attribute=");
  }
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : v.list()) {
    KVS_ASSIGN_OR_RETURN(Value x, in.ApplyFilter(args.positional[0].str(), item, rest, true));
    out.push_back(std::move(x));
  }
  return Value::List(std::move(out));
}

StatusOr<Value> IndentFilter(Interpreter& in, const Value& v, const CallArgs& args) {
  Value unit = Value::String("    ");
  if (const Value* w = args.Get(0, "width")) {
    if (w->is_int()) {
      unit = Value::String(std::string(static_cast<size_t>(std::clamp<int64_t>(w->int_value(), 0, 1024)), ' '));
    } else if (w->is_string()) {
      unit = *w;
    } else {
      return InvalidArgument("width must be an integer or a string");
    }
  }
  const Value* first = args.Get(1, "first");
  const Value* blank = args.Get(2, "blank");
  const bool indent_first = first && first->Truthy();
  const bool indent_blank = blank && blank->Truthy();
  const StrData& s = v.str_data();
  TextOut out = in.NewText();
  size_t line = 0, start = 0;
  while (true) {
    const size_t nl = s.text.find('\n', start);
    const size_t end = nl == std::string::npos ? s.text.size() : nl;
    if ((line > 0 || indent_first) && (end > start || indent_blank)) KVS_RETURN_IF_ERROR(out.Append(unit.str_data()));
    KVS_RETURN_IF_ERROR(out.AppendRange(s, start, nl == std::string::npos ? end : end + 1));
    if (nl == std::string::npos) break;
    start = nl + 1;
    ++line;
  }
  return out.Take();
}

StatusOr<Value> RoundFilter(const Value& v, const CallArgs& args) {
  const Value* precision = args.Get(0, "precision");
  const Value* method = args.Get(1, "method");
  const int64_t p = precision && precision->is_int() ? std::clamp<int64_t>(precision->int_value(), -15, 15) : 0;
  const std::string m = method && method->is_string() ? method->str() : "common";
  const double scale = std::pow(10.0, static_cast<double>(p));
  const double x = v.number() * scale;
  double r;
  if (m == "common") {
    if (v.is_int() && p >= 0) return v;
    r = std::round(x);  // half away from zero
  } else if (m == "floor") {
    r = std::floor(x);
  } else if (m == "ceil") {
    r = std::ceil(x);
  } else {
    return InvalidArgument("method must be common, ceil or floor");
  }
  return Value::Float(r / scale);
}

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

int64_t WordCount(std::string_view s) {
  int64_t n = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = text::NextCodePoint(s, &i);
    const bool word = (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_' ||
                      (cp >= 0x80 && !text::IsSpace(cp));
    if (word && !in_word) ++n;
    in_word = word;
  }
  return n;
}

// unique: strings and integers through hash sets, the rare rest (floats,
// containers) by a counted linear scan, so 300k distinct items stay fast.
StatusOr<Value> Unique(Interpreter& in, const ListObj& items) {
  KVS_RETURN_IF_ERROR(in.CheckListSize(items.size()));
  ListObj out;
  std::unordered_set<std::string_view> strings;  // views into the items' own text
  std::unordered_set<int64_t> ints;
  bool any_float = false;
  for (const Value& x : items) {
    bool seen = false;
    if (x.is_string()) {
      seen = !strings.insert(std::string_view(x.str())).second;
    } else if (x.is_int() && !any_float) {
      seen = !ints.insert(x.int_value()).second;
    } else {
      // Floats compare numerically with ints: from the first float on, every
      // number goes through the scan.
      any_float = any_float || x.is_float();
      KVS_RETURN_IF_ERROR(in.Tick(out.size() / 16));
      for (const Value& y : out) seen = seen || (!y.is_string() && StrictEquals(x, y));
      if (x.is_int()) ints.insert(x.int_value());
    }
    if (!seen) out.push_back(x);
  }
  return Value::List(std::move(out));
}

StatusOr<Value> Batch(Interpreter& in, const ListObj& items, const CallArgs& args) {
  const Value* size = args.Get(0, "linecount");
  if (!size || !size->is_int() || size->int_value() <= 0) return InvalidArgument("batch needs a positive size");
  const Value* fill = args.Get(1, "fill_with");
  const bool filling = fill && !fill->is_none();
  // A row holds at most the items there are, unless it is padded: then the
  // padding counts against the list-size limit before it is built.
  const uint64_t width = static_cast<uint64_t>(size->int_value());
  const size_t rows = items.empty() ? 0 : static_cast<size_t>((items.size() - 1) / width + 1);
  if (filling && !items.empty()) {
    KVS_RETURN_IF_ERROR(in.CheckListSize(width > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(width)));
  }
  KVS_RETURN_IF_ERROR(in.CheckListSize(rows));
  ListObj out, row;
  for (const Value& x : items) {
    row.push_back(x);
    if (row.size() == width) out.push_back(Value::List(std::move(row))), row = {};
  }
  if (!row.empty()) {
    while (filling && row.size() < width) row.push_back(*fill);
    out.push_back(Value::List(std::move(row)));
  }
  return Value::List(std::move(out));
}

StatusOr<Value> ListFilter(Interpreter& in, std::string_view name, const Value& v, const CallArgs& args) {
  const ListObj& items = v.list();
  if (name == "list") {
    KVS_RETURN_IF_ERROR(in.CheckListSize(items.size()));
    return Value::List(items);
  }
  if (name == "first") return items.empty() ? Value() : items.front();
  if (name == "last") return items.empty() ? Value() : items.back();
  if (name == "length" || name == "count") return Value::Int(static_cast<int64_t>(items.size()));
  if (name == "reverse") {
    KVS_RETURN_IF_ERROR(in.CheckListSize(items.size()));
    return Value::List(ListObj(items.rbegin(), items.rend()));
  }
  if (name == "sort") return SortFilter(in, v, args);
  if (name == "string") return DisplayString(v, in.budget());
  if (name == "unique") return Unique(in, items);
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    return SelectFilter(in, name, v, args);
  }
  if (name == "map") return MapFilter(in, v, args);
  if (name == "min" || name == "max") return MinMax(in, v, args, name == "max");
  if (name == "sum") return SumFilter(v, args);
  if (name == "batch") return Batch(in, items, args);
  return Unknown("ArrayValue", name);
}

StatusOr<Value> Rewritten(Interpreter& in, const Value& from, std::string text) {
  return ::kvs::tmpl::Rewritten(from, std::move(text), in.budget());
}

// `part` is a view into v's text.
StatusOr<Value> Substring(Interpreter& in, const Value& v, std::string_view part) {
  const size_t b = static_cast<size_t>(part.data() - v.str().data());
  return ::kvs::tmpl::Substring(v, b, b + part.size(), in.budget());
}

StatusOr<Value> CodePointList(Interpreter& in, const Value& v) {
  const StrData& s = v.str_data();
  KVS_RETURN_IF_ERROR(in.CheckListSize(text::CodePointCount(s.text)));
  ListObj out;
  for (size_t i = 0; i < s.text.size();) {
    const size_t start = i;
    text::NextCodePoint(s.text, &i);
    out.push_back(Value::String(s.text.substr(start, i - start), SliceSpans(s.content, start, i)));
  }
  return Value::List(std::move(out));
}

}  // namespace

StatusOr<Value> ReplaceString(Interpreter& in, const Value& v, const Value& from, const Value& to, long count) {
  const StrData& s = v.str_data();
  TextOut out = in.NewText();
  KVS_RETURN_IF_ERROR(text::ReplacePieces(
      s.text, from.str(), count, [&](size_t b, size_t e) { return out.AppendRange(s, b, e); },
      [&] { return out.Append(to.str_data()); }));
  return out.Take();
}

namespace {

StatusOr<Value> StringFilter(Interpreter& in, std::string_view name, const Value& v, const CallArgs& args) {
  const std::string& s = v.str();
  if (name == "length" || name == "count") return Value::Int(static_cast<int64_t>(text::CodePointCount(s)));
  if (name == "upper") return Rewritten(in, v, text::Upper(s));
  if (name == "lower") return Rewritten(in, v, text::Lower(s));
  if (name == "title") return Rewritten(in, v, text::TitleCase(s));
  if (name == "capitalize") return Rewritten(in, v, text::Capitalize(s));
  if (name == "trim") {
    const Value* chars = args.Get(0, "chars");
    if (chars && chars->is_string()) return Substring(in, v, text::StripChars(s, chars->str(), true, true));
    return Substring(in, v, text::Trim(s));
  }
  if (name == "indent") return IndentFilter(in, v, args);
  if (name == "string") return v;
  if (name == "replace") {
    const Value* from = args.Get(0, "old");
    const Value* to = args.Get(1, "new");
    const Value* count = args.Get(2, "count");
    if (!from || !to || !from->is_string() || !to->is_string()) return InvalidArgument("replace() arguments must be strings");
    if (count && !count->is_int() && !count->is_none()) return InvalidArgument("replace() count argument must be a number or null");
    return ReplaceString(in, v, *from, *to, count && count->is_int() ? count->int_value() : -1);
  }
  if (name == "list") return CodePointList(in, v);
  if (name == "first" || name == "last") {
    if (s.empty()) return Value();
    size_t b = 0, e = 0;
    if (name == "first") {
      text::NextCodePoint(s, &e);
    } else {
      b = text::ByteOffset(s, text::CodePointCount(s) - 1);
      e = s.size();
    }
    return Substring(in, v, std::string_view(s).substr(b, e - b));
  }
  if (name == "reverse") {
    std::string out;
    out.reserve(s.size());
    const std::vector<size_t> offsets = text::CodePointOffsets(s);
    for (size_t k = offsets.size() - 1; k > 0; --k) out.append(s, offsets[k - 1], offsets[k] - offsets[k - 1]);
    return Rewritten(in, v, std::move(out));
  }
  if (name == "wordcount") return Value::Int(WordCount(s));
  if (name == "escape" || name == "e") return Rewritten(in, v, HtmlEscape(s));
  if (name == "from_json") {
    const RenderLimits& limits = in.options().limits;
    return ParseJsonText(s, /*content=*/!v.spans().empty(), JsonLimits{limits.max_list_items, limits.max_total_bytes});
  }
  return Unknown("StringValue", name);
}

}  // namespace

StatusOr<Value> Interpreter::ApplyFilter(std::string_view name, const Value& v, CallArgs& args, bool parens) {
  (void)parens;
  if (name == "safe") return v;
  if (name == "tojson") return ToJsonFilter(*this, v, args);
  if (name == "default" || name == "d") {
    const Value* def = args.Get(0, "default_value");
    KVS_ASSIGN_OR_RETURN(bool boolean, BoolArg(args, 1, "boolean", false));
    if (v.is_undefined() || (boolean && !v.Truthy())) return def ? *def : Value::String("");
    return v;
  }
  if (name == "join") return JoinFilter(*this, v, args);
  if (name == "int" || name == "float") return NumberFilter(name, v, args);
  switch (v.kind()) {
    case Kind::kList: return ListFilter(*this, name, v, args);
    case Kind::kString: return StringFilter(*this, name, v, args);
    case Kind::kInt:
    case Kind::kFloat:
      if (name == "abs") {
        if (v.is_float()) return Value::Float(std::fabs(v.float_value()));
        if (v.int_value() == INT64_MIN) return OutOfRange("integer overflow in abs");
        return Value::Int(std::llabs(v.int_value()));
      }
      if (name == "string") return DisplayString(v, budget());
      if (name == "round") return RoundFilter(v, args);
      return Unknown("NumericValue", name);
    case Kind::kDict: {
      const DictObj& d = v.dict();
      if (name == "items") {
        KVS_RETURN_IF_ERROR(CheckListSize(d.size()));
        ListObj out;
        for (const auto& [k, x] : d.entries()) out.push_back(Value::List({k, x}));
        return Value::List(std::move(out));
      }
      if (name == "length" || name == "count") return Value::Int(static_cast<int64_t>(d.size()));
      if (name == "string") return DisplayString(v, budget());
      if (name == "list") {
        KVS_RETURN_IF_ERROR(CheckListSize(d.size()));
        ListObj keys;
        for (const auto& [k, x] : d.entries()) keys.push_back(k);
        return Value::List(std::move(keys));
      }
      if (name == "dictsort" || name == "keys" || name == "values" || name == "get") {
        bool found = false;
        return CallMethod(*this, v, name, args, &found);
      }
      return Unknown("ObjectValue", name);
    }
    case Kind::kBool:
      if (name == "bool") return v;
      if (name == "string") return Value::String(v.bool_value() ? "true" : "false");
      return Unknown("BooleanValue", name);
    default: break;
  }
  return InvalidArgument("Cannot apply filter \"{}\" to type: {}", name, v.kind_name());
}

StatusOr<bool> Interpreter::ApplyTest(std::string_view name, const Value& v, const CallArgs& args) {
  const Value arg = args.positional.empty() ? Value() : args.positional[0];
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "false") return v.is_bool() && !v.bool_value();
  if (name == "true") return v.is_bool() && v.bool_value();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "iterable") return v.is_list() || v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string();
  if (name == "callable") return v.is_callable();
  if (name == "lower") return v.is_string() && text::Lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && text::Upper(v.str()) == v.str();
  if (name == "escaped") return false;
  if (name == "odd" || name == "even") {
    if (!v.is_int()) return InvalidArgument("cannot {} on {}", name, v.kind_name());
    return (v.int_value() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    if (!v.is_int() || !arg.is_int() || arg.int_value() == 0) return InvalidArgument("divisibleby needs integers");
    return arg.int_value() == -1 || v.int_value() % arg.int_value() == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return StrictEquals(v, arg);
  if (name == "ne" || name == "!=") return !StrictEquals(v, arg);
  if (name == "sameas") return v.kind() == arg.kind() && StrictEquals(v, arg);
  if (name == "gt" || name == "ge" || name == "lt" || name == "le" || name == "greaterthan" || name == "lessthan") {
    KVS_ASSIGN_OR_RETURN(int c, Compare(v, arg, true));
    if (name == "gt" || name == "greaterthan") return c > 0;
    if (name == "ge") return c >= 0;
    if (name == "lt" || name == "lessthan") return c < 0;
    return c <= 0;
  }
  if (name == "in") {
    if (arg.is_list()) {
      KVS_RETURN_IF_ERROR(Tick(arg.list().size() / 16));
      for (const Value& x : arg.list()) {
        if (StrictEquals(x, v)) return true;
      }
      return false;
    }
    if (arg.is_string() && v.is_string()) return arg.str().find(v.str()) != std::string::npos;
    if (arg.is_dict() && v.is_string()) return arg.dict().Find(v.str()) != nullptr;
    return InvalidArgument("the 'in' test needs a list, string or dict");
  }
  return InvalidArgument("Unknown test: {}", name);
}

}  // namespace kvs::tmpl
