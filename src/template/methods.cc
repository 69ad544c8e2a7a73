// Methods of strings, lists and dicts, macros, call-block callers and the
// global functions.
#include <algorithm>
#include <ctime>
#include <iomanip>
#include <locale>
#include <sstream>

#include "template/interpreter.h"
#include "template/text.h"

namespace kvs::tmpl {
namespace {

// ---- string methods ----

// Byte offset of code point index `cp` in s (clamped to the end).
size_t ByteOffset(std::string_view s, int64_t cp) {
  size_t i = 0;
  for (int64_t k = 0; k < cp && i < s.size(); ++k) text::NextCodePoint(s, &i);
  return i;
}

// Python's start/end arguments (code points, negative from the end) as bytes.
void Bounds(std::string_view s, const CallArgs& args, size_t first, size_t* b, size_t* e) {
  const int64_t n = static_cast<int64_t>(text::CodePointCount(s));
  auto norm = [&](const Value* v, int64_t def) {
    if (!v || !v->is_int()) return def;
    int64_t x = v->int_value();
    if (x < 0) x = std::max<int64_t>(0, x + n);
    return std::min(x, n);
  };
  *b = ByteOffset(s, norm(args.Get(first, "start"), 0));
  *e = std::max(*b, ByteOffset(s, norm(args.Get(first + 1, "end"), n)));
}

StatusOr<Value> Split(const std::string& s, const CallArgs& args) {
  const Value* sep = args.Get(0, "sep");
  const Value* maxsplit_v = args.Get(1, "maxsplit");
  if (sep && !sep->is_string() && !sep->is_none()) return InvalidArgument("sep argument must be a string or null");
  if (maxsplit_v && !maxsplit_v->is_int()) return InvalidArgument("maxsplit argument must be a number");
  const int64_t maxsplit = maxsplit_v ? maxsplit_v->int_value() : -1;
  ListObj out;
  if (!sep || sep->is_none()) {
    const std::string_view t = text::TrimStart(s);
    size_t i = 0;
    while (i < t.size()) {
      // Skip spaces, then take a run of non-spaces.
      size_t j = i;
      while (j < t.size()) {
        size_t k = j;
        if (!text::IsSpace(text::NextCodePoint(t, &k))) break;
        j = k;
      }
      if (j >= t.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(Value::String(std::string(t.substr(j))));
        break;
      }
      size_t end = j;
      while (end < t.size()) {
        size_t k = end;
        if (text::IsSpace(text::NextCodePoint(t, &k))) break;
        end = k;
      }
      out.push_back(Value::String(std::string(t.substr(j, end - j))));
      i = end;
    }
    return Value::List(std::move(out));
  }
  const std::string& d = sep->str();
  if (d.empty()) return InvalidArgument("empty separator");
  size_t start = 0;
  while (true) {
    const size_t hit = s.find(d, start);
    if (hit == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit)) {
      out.push_back(Value::String(s.substr(start)));
      break;
    }
    out.push_back(Value::String(s.substr(start, hit - start)));
    start = hit + d.size();
  }
  return Value::List(std::move(out));
}

StatusOr<bool> AffixTest(const std::string& s, const CallArgs& args, bool prefix) {
  const char* what = prefix ? "startswith" : "endswith";
  if (args.positional.empty()) return InvalidArgument("{}() requires at least one argument", what);
  auto test = [&](const std::string& a) {
    return a.size() <= s.size() && (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0);
  };
  const Value& p = args.positional[0];
  if (p.is_string()) return test(p.str());
  if (p.is_list()) {
    for (const Value& item : p.list()) {
      if (!item.is_string()) return InvalidArgument("{}() tuple elements must be strings", what);
      if (test(item.str())) return true;
    }
    return false;
  }
  return InvalidArgument("{}() argument must be a string or tuple of strings", what);
}

// Python's str() of a value, for str.format.
StatusOr<std::string> PyStr(const Value& v) {
  if (v.is_bool()) return std::string(v.bool_value() ? "True" : "False");
  if (v.is_none()) return std::string("None");
  return Display(v);
}

StatusOr<Value> Format(Interpreter& in, const std::string& f, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}' ) {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) return InvalidArgument("format: single '{{' encountered");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      return Unimplemented("format: conversions and format specs ('{}') are not supported", field);
    }
    const Value* v = nullptr;
    if (field.empty()) {
      v = auto_index < args.positional.size() ? &args.positional[auto_index] : nullptr;
      ++auto_index;
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      const size_t k = std::stoul(field);
      v = k < args.positional.size() ? &args.positional[k] : nullptr;
    } else {
      v = args.Keyword(field);
    }
    if (!v) return InvalidArgument("format: no argument for '{{{}}}'", field);
    KVS_ASSIGN_OR_RETURN(std::string s, PyStr(*v));
    out += s;
    KVS_RETURN_IF_ERROR(in.CheckSize(out.size()));
    i = close;
  }
  return Value::String(std::move(out));
}

Value SplitLines(const std::string& s, bool keepends) {
  ListObj out;
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const size_t at = i;
    const uint32_t cp = text::NextCodePoint(s, &i);
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
                     cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.push_back(Value::String(s.substr(start, (keepends ? i : at) - start)));
    start = i;
  }
  if (start < s.size()) out.push_back(Value::String(s.substr(start)));
  return Value::List(std::move(out));
}

bool AllCodePoints(const std::string& s, bool (*pred)(uint32_t)) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    if (!pred(text::NextCodePoint(s, &i))) return false;
  }
  return true;
}

StatusOr<Value> StringMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args,
                             bool* found) {
  const std::string& s = self.str();
  auto chars_arg = [&]() -> const Value* {
    const Value* c = args.Get(0, "chars");
    return c && c->is_string() ? c : nullptr;
  };
  if (name == "upper") return Value::String(text::Upper(s));
  if (name == "lower") return Value::String(text::Lower(s));
  if (name == "title") return Value::String(text::TitleCase(s));
  if (name == "capitalize") return Value::String(text::Capitalize(s));
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    if (const Value* c = chars_arg()) return Value::String(std::string(text::StripChars(s, c->str(), left, right)));
    std::string_view t = s;
    if (left) t = text::TrimStart(t);
    if (right) t = text::TrimEnd(t);
    return Value::String(std::string(t));
  }
  if (name == "startswith" || name == "endswith") {
    KVS_ASSIGN_OR_RETURN(bool r, AffixTest(s, args, name == "startswith"));
    return Value::Bool(r);
  }
  if (name == "split") return Split(s, args);
  if (name == "replace") {
    const Value* from = args.Get(0, "old");
    const Value* to = args.Get(1, "new");
    if (!from || !to) return InvalidArgument("replace() requires at least two arguments");
    if (!from->is_string() || !to->is_string()) return InvalidArgument("replace() arguments must be strings");
    const Value* count = args.Get(2, "count");
    if (count && !count->is_int() && !count->is_none()) {
      return InvalidArgument("replace() count argument must be a number or null");
    }
    std::string r = text::Replace(s, from->str(), to->str(), count && count->is_int() ? count->int_value() : -1);
    KVS_RETURN_IF_ERROR(in.CheckSize(r.size()));
    return Value::String(std::move(r));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const Value* sub = args.Get(0, "sub");
    if (!sub || !sub->is_string()) return InvalidArgument("{}() needs a string argument", name);
    size_t b = 0, e = 0;
    Bounds(s, args, 1, &b, &e);
    const std::string_view range(s.data() + b, e - b);
    if (name == "count") {
      if (sub->str().empty()) return Value::Int(static_cast<int64_t>(text::CodePointCount(range)) + 1);
      int64_t n = 0;
      for (size_t p = range.find(sub->str()); p != std::string_view::npos; p = range.find(sub->str(), p + sub->str().size())) ++n;
      return Value::Int(n);
    }
    const size_t hit = name == "rfind" ? range.rfind(sub->str()) : range.find(sub->str());
    if (hit == std::string_view::npos) {
      if (name == "index") return InvalidArgument("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(text::CodePointCount(std::string_view(s.data(), b + hit))));
  }
  if (name == "format") return Format(in, s, args);
  if (name == "splitlines") return SplitLines(s, args.Get(0, "keepends") && args.Get(0, "keepends")->Truthy());
  if (name == "join") {
    const Value* items = args.Get(0, "iterable");
    if (!items || !items->is_list()) return InvalidArgument("join() needs a list");
    std::string out;
    for (size_t i = 0; i < items->list().size(); ++i) {
      const Value& x = items->list()[i];
      if (!x.is_string()) return InvalidArgument("join(): item {} is a {}, not a string", i, x.kind_name());
      if (i > 0) out += s;
      out += x.str();
      KVS_RETURN_IF_ERROR(in.CheckSize(out.size()));
    }
    return Value::String(std::move(out));
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const Value* a = args.Get(0, name == "removeprefix" ? "prefix" : "suffix");
    if (!a || !a->is_string()) return InvalidArgument("{}() needs a string argument", name);
    const std::string& x = a->str();
    if (name == "removeprefix") return Value::String(s.rfind(x, 0) == 0 ? s.substr(x.size()) : s);
    const bool ends = x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
    return Value::String(ends ? s.substr(0, s.size() - x.size()) : s);
  }
  if (name == "isdigit") return Value::Bool(AllCodePoints(s, [](uint32_t c) { return c >= '0' && c <= '9'; }));
  if (name == "isalpha") {
    return Value::Bool(AllCodePoints(s, [](uint32_t c) { return text::ToLower(c) != text::ToUpper(c) || (c > 0x7F && !text::IsSpace(c)); }));
  }
  if (name == "isalnum") {
    return Value::Bool(AllCodePoints(s, [](uint32_t c) {
      return (c >= '0' && c <= '9') || text::ToLower(c) != text::ToUpper(c) || (c > 0x7F && !text::IsSpace(c));
    }));
  }
  if (name == "isspace") return Value::Bool(AllCodePoints(s, [](uint32_t c) { return text::IsSpace(c); }));
  if (name == "islower") return Value::Bool(text::Lower(s) == s && text::Upper(s) != s);
  if (name == "isupper") return Value::Bool(text::Upper(s) == s && text::Lower(s) != s);
  *found = false;
  return Value();
}

// ---- list methods ----

StatusOr<Value> ListMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args, bool* found) {
  ListObj& items = self.list();
  auto index_arg = [&](size_t pos, int64_t def, bool allow_end) -> StatusOr<int64_t> {
    const Value* v = args.Get(pos, "index");
    int64_t i = def;
    if (v) {
      if (!v->is_int()) return InvalidArgument("list index must be an integer");
      i = v->int_value();
    }
    const int64_t n = static_cast<int64_t>(items.size());
    if (i < 0) i += n;
    if (allow_end) return std::clamp<int64_t>(i, 0, n);
    if (i < 0 || i >= n) return OutOfRange("{}", items.empty() ? "pop from empty list" : "pop index out of range");
    return i;
  };
  if (name == "append") {
    if (args.positional.size() != 1) return InvalidArgument("append() takes exactly one argument");
    KVS_RETURN_IF_ERROR(in.CheckListSize(items.size() + 1));
    const Value& x = args.positional[0];
    if (x.is_list() || x.is_object() || x.is_callable()) in.Track(self);
    items.push_back(x);
    return Value::None();
  }
  if (name == "pop") {
    KVS_ASSIGN_OR_RETURN(int64_t i, index_arg(0, -1, false));
    Value v = items[i];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "insert") {
    if (args.positional.size() != 2) return InvalidArgument("insert() takes exactly two arguments");
    KVS_ASSIGN_OR_RETURN(int64_t i, index_arg(0, 0, true));
    KVS_RETURN_IF_ERROR(in.CheckListSize(items.size() + 1));
    const Value& x = args.positional[1];
    if (x.is_list() || x.is_object() || x.is_callable()) in.Track(self);
    items.insert(items.begin() + i, x);
    return Value::None();
  }
  if (name == "extend") {
    if (args.positional.size() != 1 || !args.positional[0].is_list()) return InvalidArgument("extend() needs a list");
    const ListObj add = args.positional[0].list();
    KVS_RETURN_IF_ERROR(in.CheckListSize(items.size() + add.size()));
    in.Track(self);
    items.insert(items.end(), add.begin(), add.end());
    return Value::None();
  }
  if (name == "index" || name == "count") {
    if (args.positional.empty()) return InvalidArgument("{}() takes an argument", name);
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!StrictEquals(items[i], args.positional[0])) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") return InvalidArgument("value is not in list");
    return Value::Int(n);
  }
  if (name == "copy") return Value::List(items);
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    return Value::None();
  }
  *found = false;
  return Value();
}

// ---- dict methods ----

StatusOr<Value> DictSort(const Value& self, const CallArgs& args) {
  const Value* cs = args.Get(0, "case_sensitive");
  const Value* by = args.Get(1, "by");
  const Value* rev = args.Get(2, "reverse");
  if (cs && !cs->is_bool()) return InvalidArgument("case_sensitive must be a boolean");
  if (by && (!by->is_string() || (by->str() != "key" && by->str() != "value"))) {
    return InvalidArgument("by must be either 'key' or 'value'");
  }
  if (rev && !rev->is_bool()) return InvalidArgument("reverse must be a boolean");
  const bool case_sensitive = cs && cs->bool_value();
  const size_t index = by && by->str() == "value" ? 1 : 0;
  const bool reverse = rev && rev->bool_value();
  ListObj items;
  for (const auto& [k, v] : self.dict().entries()) items.push_back(Value::List({k, v}));
  Status error;
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    if (!error.ok()) return false;
    auto c = Compare(a.list()[index], b.list()[index], case_sensitive);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  KVS_RETURN_IF_ERROR(error);
  return Value::List(std::move(items));
}

StatusOr<Value> DictMethod(const Value& self, std::string_view name, CallArgs& args, bool* found) {
  const DictObj& d = self.dict();
  if (name == "get") {
    const Value* key = args.Get(0, "key");
    if (!key || !(key->is_string() || key->is_int())) {
      return InvalidArgument("Object key must be a string: got {}", key ? key->kind_name() : "nothing");
    }
    if (const Value* v = d.Find(*key)) return *v;
    const Value* def = args.Get(1, "default");
    return def ? *def : Value::None();
  }
  if (name == "items" || name == "keys" || name == "values") {
    ListObj out;
    for (const auto& [k, v] : d.entries()) {
      out.push_back(name == "items" ? Value::List({k, v}) : name == "keys" ? k : v);
    }
    return Value::List(std::move(out));
  }
  if (name == "dictsort") return DictSort(self, args);
  if (d.is_loop && name == "cycle") {
    if (args.positional.empty()) return InvalidArgument("loop.cycle() needs at least one argument");
    const Value* index0 = d.Find("index0");
    const int64_t i = index0 && index0->is_int() ? index0->int_value() : 0;
    return args.positional[static_cast<size_t>(i) % args.positional.size()];
  }
  *found = false;
  return Value();
}

bool HasMethod(const Value& self, std::string_view name) {
  static const std::string_view kString[] = {
      "upper", "lower", "title", "capitalize", "strip", "lstrip", "rstrip", "startswith", "endswith",
      "split", "replace", "find", "rfind", "index", "count", "format", "splitlines", "join", "removeprefix",
      "removesuffix", "isdigit", "isalpha", "isalnum", "isspace", "islower", "isupper"};
  static const std::string_view kList[] = {"append", "pop", "insert", "extend", "index", "count", "copy", "reverse"};
  static const std::string_view kDict[] = {"get", "items", "keys", "values", "dictsort"};
  auto in = [&](const auto& names) { return std::find(std::begin(names), std::end(names), name) != std::end(names); };
  if (self.is_string()) return in(kString);
  if (self.is_list()) return in(kList);
  if (self.is_dict()) return in(kDict) || (self.dict().is_loop && name == "cycle");
  return false;
}

// ---- macros ----

Status BindParams(Interpreter& in, const Stmt& s, const std::string& display, CallArgs& args, Scope* scope) {
  std::vector<std::pair<std::string, Value>> kwargs = args.keyword;
  std::vector<const Arg*> pending;
  for (size_t i = 0; i < s.params.size(); ++i) {
    const Arg& p = s.params[i];
    const Value* v = i < args.positional.size() ? &args.positional[i] : nullptr;
    Value taken;
    if (!v) {
      for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
        if (it->first == p.name) {
          taken = std::move(it->second);
          kwargs.erase(it);
          v = &taken;
          break;
        }
      }
    }
    if (!v && p.value) pending.push_back(&p);
    scope->Set(p.name, v ? *v : Value());
  }
  if (s.uses_kwargs) {
    Value d = Value::Dict();
    for (auto& [k, v] : kwargs) d.dict().Set(k, std::move(v));
    scope->Set("kwargs", std::move(d));
  } else if (!kwargs.empty()) {
    return InvalidArgument("macro {} takes no keyword argument '{}'", display, kwargs.front().first);
  }
  if (s.uses_varargs) {
    ListObj rest;
    for (size_t i = s.params.size(); i < args.positional.size(); ++i) rest.push_back(args.positional[i]);
    scope->Set("varargs", Value::List(std::move(rest)));
  } else if (args.positional.size() > s.params.size()) {
    return InvalidArgument("macro {} takes not more than {} argument(s)", display, s.params.size());
  }
  for (const Arg* p : pending) {
    KVS_ASSIGN_OR_RETURN(Value v, in.Eval(*p->value, scope));
    scope->Set(p->name, std::move(v));
  }
  return Status::Ok();
}

class MacroCallable final : public Callable {
 public:
  MacroCallable(const Stmt& s, Scope* closure) : s_(s), closure_(closure) {}
  StatusOr<Value> Call(Interpreter& in, CallArgs& args) override {
    Value caller = in.TakePendingCaller();
    Scope* parent = closure_;
    if (s_.uses_caller) {
      parent = in.NewScope(closure_);
      parent->Set("caller", std::move(caller));
    }
    Scope* scope = in.NewScope(parent);
    KVS_RETURN_IF_ERROR(BindParams(in, s_, "'" + s_.name + "'", args, scope));
    std::string out;
    KVS_RETURN_IF_ERROR(in.ExecBody(s_.body, scope, &out));
    return Value::String(std::move(out));
  }
  std::string name() const override { return s_.name; }

 private:
  const Stmt& s_;
  Scope* closure_;  // owned by the Interpreter, which outlives every Value
};

class CallerCallable final : public Callable {
 public:
  CallerCallable(const Stmt& s, Scope* env) : s_(s), env_(env) {}
  StatusOr<Value> Call(Interpreter& in, CallArgs& args) override {
    Scope* scope = in.NewScope(env_);
    KVS_RETURN_IF_ERROR(BindParams(in, s_, "None", args, scope));
    std::string out;
    KVS_RETURN_IF_ERROR(in.ExecBody(s_.body, scope, &out));
    return Value::String(std::move(out));
  }
  std::string name() const override { return "caller"; }

 private:
  const Stmt& s_;
  Scope* env_;
};

// ---- globals ----

StatusOr<Value> Range(Interpreter& in, CallArgs& args) {
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) return InvalidArgument("range() takes 1 to 3 arguments");
  for (const Value& v : p) {
    if (!v.is_int()) return InvalidArgument("range() arguments must be integers, got {}", v.kind_name());
  }
  int64_t start = 0, stop = 0, step = 1;
  if (p.size() == 1) {
    stop = p[0].int_value();
  } else {
    start = p[0].int_value();
    stop = p[1].int_value();
    if (p.size() == 3) step = p[2].int_value();
  }
  if (step == 0) return InvalidArgument("range() step must not be zero");
  const __int128 span = step > 0 ? __int128{stop} - start : __int128{start} - stop;
  const __int128 magnitude = step > 0 ? __int128{step} : -__int128{step};
  const __int128 count = span <= 0 ? 0 : (span + magnitude - 1) / magnitude;
  KVS_RETURN_IF_ERROR(in.CheckListSize(count > (1 << 30) ? size_t{1} << 40 : static_cast<size_t>(count)));
  ListObj out;
  out.reserve(static_cast<size_t>(count));
  for (__int128 k = 0; k < count; ++k) out.push_back(Value::Int(static_cast<int64_t>(start + k * step)));
  return Value::List(std::move(out));
}

// namespace(...) and dict(...): an optional dict or list of pairs, then keywords.
StatusOr<Value> MakeMapping(Interpreter& in, CallArgs& args, bool is_namespace) {
  Value out = is_namespace ? Value::Namespace() : Value::Dict();
  if (is_namespace) in.Track(out);
  const char* what = is_namespace ? "namespace" : "dict";
  if (args.positional.size() > 1) {
    return InvalidArgument("{} expected at most 1 argument, got {}", what, args.positional.size());
  }
  if (args.positional.size() == 1) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      for (const auto& [k, v] : src.dict().entries()) out.dict().Set(k, v);
    } else if (src.is_list()) {
      for (const Value& pair : src.list()) {
        if (!pair.is_list() || pair.list().size() != 2 || !pair.list()[0].is_string()) {
          return InvalidArgument("{} expected an object or an iterable of [key, value] pairs", what);
        }
        out.dict().Set(pair.list()[0], pair.list()[1]);
      }
    } else {
      return InvalidArgument("'{}' object is not iterable", src.kind_name());
    }
  }
  for (const auto& [k, v] : args.keyword) out.dict().Set(k, v);
  return out;
}

StatusOr<Value> StrftimeNow(Interpreter& in, CallArgs& args) {
  if (args.positional.empty() || !args.positional[0].is_string()) {
    return InvalidArgument("strftime_now() needs a format string");
  }
  const std::string& fmt = args.positional[0].str();
  if (fmt.size() > 1024) return InvalidArgument("strftime_now(): format longer than 1024 bytes");
  const RenderOptions& o = in.options();
  const std::time_t t = o.has_fixed_now ? static_cast<std::time_t>(o.fixed_now_unix) : std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os << std::put_time(&tm, fmt.c_str());
  return Value::String(os.str());
}

}  // namespace

StatusOr<Value> CallMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args, bool* found) {
  *found = true;
  if (self.is_string()) return StringMethod(in, self, name, args, found);
  if (self.is_list()) return ListMethod(in, self, name, args, found);
  if (self.is_dict()) return DictMethod(self, name, args, found);
  *found = false;
  return Value();
}

Value BoundMethod(const Value& self, std::string_view name) {
  if (self.is_dict() && self.dict().is_loop) {
    if (name == "depth") return Value::Int(1);
    if (name == "depth0") return Value::Int(0);
  }
  if (!HasMethod(self, name)) return Value();
  const std::string method(name);
  return Value::Function(std::make_shared<NativeFunction>(method, [self, method](Interpreter& in, CallArgs& args) {
    bool found = false;
    return CallMethod(in, self, method, args, &found);
  }));
}

Value MakeMacro(const Stmt& s, Scope* scope) { return Value::Function(std::make_shared<MacroCallable>(s, scope)); }

Value MakeCaller(const Stmt& s, Scope* scope) { return Value::Function(std::make_shared<CallerCallable>(s, scope)); }

void InstallGlobalFunctions(Scope* scope) {
  auto add = [&](const char* name, NativeFunction::Fn fn) {
    scope->Set(name, Value::Function(std::make_shared<NativeFunction>(name, std::move(fn))));
  };
  add("range", Range);
  add("namespace", [](Interpreter& in, CallArgs& args) { return MakeMapping(in, args, true); });
  add("dict", [](Interpreter& in, CallArgs& args) { return MakeMapping(in, args, false); });
  add("strftime_now", StrftimeNow);
  add("raise_exception", [](Interpreter&, CallArgs& args) -> StatusOr<Value> {
    std::string msg;
    if (!args.positional.empty()) {
      KVS_ASSIGN_OR_RETURN(msg, RawString(args.positional[0]));
    }
    return Status(StatusCode::kInvalidArgument, "raise_exception: " + msg);
  });
}

}  // namespace kvs::tmpl
