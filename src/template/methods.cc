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

// Python's start/end arguments (code points, negative from the end) as bytes.
void Bounds(std::string_view s, const CallArgs& args, size_t first, size_t* b, size_t* e) {
  const int64_t n = static_cast<int64_t>(text::CodePointCount(s));
  auto norm = [&](const Value* v, int64_t def) {
    if (!v || !v->is_int()) return def;
    int64_t x = v->int_value();
    if (x < 0) x = std::max<int64_t>(0, x + n);
    return std::min(x, n);
  };
  *b = text::ByteOffset(s, static_cast<size_t>(norm(args.Get(first, "start"), 0)));
  *e = std::max(*b, text::ByteOffset(s, static_cast<size_t>(norm(args.Get(first + 1, "end"), n))));
}

// A piece s[b, e) of the string value v, with its spans.
Value Piece(const StrData& s, size_t b, size_t e) {
  return Value::String(s.text.substr(b, e - b), SliceSpans(s.content, b, e));
}

// Appends Piece(data, b, e) to *out (split, splitlines), charged to the
// render's list and string budgets.
Status PushPiece(Interpreter& in, const StrData& data, size_t b, size_t e, ListObj* out) {
  KVS_RETURN_IF_ERROR(in.GrowList(out->size() + 1, 1));
  KVS_RETURN_IF_ERROR(in.budget()->Charge(e - b));
  out->push_back(Piece(data, b, e));
  return Status::Ok();
}

StatusOr<Value> Split(Interpreter& in, const Value& v, const CallArgs& args) {
  const StrData& data = v.str_data();
  const std::string& s = data.text;
  const Value* sep = args.Get(0, "sep");
  const Value* maxsplit_v = args.Get(1, "maxsplit");
  if (sep && !sep->is_string() && !sep->is_none()) return InvalidArgument("sep argument must be a string or null");
  if (maxsplit_v && !maxsplit_v->is_int()) return InvalidArgument("maxsplit argument must be a number");
  const int64_t maxsplit = maxsplit_v ? maxsplit_v->int_value() : -1;
  ListObj out;
  auto push = [&](size_t b, size_t e) { return PushPiece(in, data, b, e, &out); };
  if (!sep || sep->is_none()) {
    const size_t lead = s.size() - text::TrimStart(s).size();
    size_t i = lead;
    while (i < s.size()) {
      // Skip spaces, then take a run of non-spaces.
      size_t j = i;
      while (j < s.size()) {
        size_t k = j;
        if (!text::IsSpace(text::NextCodePoint(s, &k))) break;
        j = k;
      }
      if (j >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        KVS_RETURN_IF_ERROR(push(j, s.size()));
        break;
      }
      size_t end = j;
      while (end < s.size()) {
        size_t k = end;
        if (text::IsSpace(text::NextCodePoint(s, &k))) break;
        end = k;
      }
      KVS_RETURN_IF_ERROR(push(j, end));
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
      KVS_RETURN_IF_ERROR(push(start, s.size()));
      break;
    }
    KVS_RETURN_IF_ERROR(push(start, hit));
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
Status AppendPyStr(const Value& v, TextOut* out) {
  if (v.is_bool()) return out->Append(v.bool_value() ? "True" : "False");
  if (v.is_none()) return out->Append("None");
  return AppendDisplay(v, out);
}

StatusOr<Value> Format(Interpreter& in, const Value& format, const CallArgs& args) {
  const StrData& fd = format.str_data();
  const std::string& f = fd.text;
  TextOut out = in.NewText();
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      KVS_RETURN_IF_ERROR(out.AppendRange(fd, i, i + 1));
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      continue;
    }
    if (c != '{') {
      KVS_RETURN_IF_ERROR(out.AppendRange(fd, i, i + 1));
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      KVS_RETURN_IF_ERROR(out.AppendRange(fd, i, i + 1));
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
      const size_t k = field.size() > 9 ? SIZE_MAX : std::stoul(field);
      v = k < args.positional.size() ? &args.positional[k] : nullptr;
    } else {
      v = args.Keyword(field);
    }
    if (!v) return InvalidArgument("format: no argument for '{{{}}}'", field);
    KVS_RETURN_IF_ERROR(AppendPyStr(*v, &out));
    i = close;
  }
  return out.Take();
}

StatusOr<Value> SplitLines(Interpreter& in, const Value& v, bool keepends) {
  const StrData& data = v.str_data();
  const std::string& s = data.text;
  ListObj out;
  auto push = [&](size_t b, size_t e) { return PushPiece(in, data, b, e, &out); };
  size_t start = 0, i = 0;
  while (i < s.size()) {
    const size_t at = i;
    const uint32_t cp = text::NextCodePoint(s, &i);
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
                     cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) continue;
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    KVS_RETURN_IF_ERROR(push(start, keepends ? i : at));
    start = i;
  }
  if (start < s.size()) KVS_RETURN_IF_ERROR(push(start, s.size()));
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
  auto sub = [&](std::string_view part) {
    const size_t b = static_cast<size_t>(part.data() - s.data());
    return Substring(self, b, b + part.size(), in.budget());
  };
  if (name == "upper") return Rewritten(self, text::Upper(s), in.budget());
  if (name == "lower") return Rewritten(self, text::Lower(s), in.budget());
  if (name == "title") return Rewritten(self, text::TitleCase(s), in.budget());
  if (name == "capitalize") return Rewritten(self, text::Capitalize(s), in.budget());
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    if (const Value* c = chars_arg()) return sub(text::StripChars(s, c->str(), left, right));
    std::string_view t = s;
    if (left) t = text::TrimStart(t);
    if (right) t = text::TrimEnd(t);
    return sub(t);
  }
  if (name == "startswith" || name == "endswith") {
    KVS_ASSIGN_OR_RETURN(bool r, AffixTest(s, args, name == "startswith"));
    return Value::Bool(r);
  }
  if (name == "split") return Split(in, self, args);
  if (name == "replace") {
    const Value* from = args.Get(0, "old");
    const Value* to = args.Get(1, "new");
    if (!from || !to) return InvalidArgument("replace() requires at least two arguments");
    if (!from->is_string() || !to->is_string()) return InvalidArgument("replace() arguments must be strings");
    const Value* count = args.Get(2, "count");
    if (count && !count->is_int() && !count->is_none()) {
      return InvalidArgument("replace() count argument must be a number or null");
    }
    return ReplaceString(in, self, *from, *to, count && count->is_int() ? count->int_value() : -1);
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "count") {
    const Value* sub = args.Get(0, "sub");  // shadows the helper above
    if (!sub || !sub->is_string()) return InvalidArgument("{}() needs a string argument", name);
    size_t b = 0, e = 0;
    Bounds(s, args, 1, &b, &e);
    const std::string_view range(s.data() + b, e - b);
    if (name == "count") {
      if (sub->str().empty()) return Value::Int(static_cast<int64_t>(text::CodePointCount(range)) + 1);
      int64_t n = 0;
      const std::string& needle = sub->str();
      for (size_t p = range.find(needle); p != std::string_view::npos; p = range.find(needle, p + needle.size())) ++n;
      return Value::Int(n);
    }
    const size_t hit = name == "rfind" ? range.rfind(sub->str()) : range.find(sub->str());
    if (hit == std::string_view::npos) {
      if (name == "index") return InvalidArgument("substring not found");
      return Value::Int(-1);
    }
    return Value::Int(static_cast<int64_t>(text::CodePointCount(std::string_view(s.data(), b + hit))));
  }
  if (name == "format") return Format(in, self, args);
  if (name == "splitlines") return SplitLines(in, self, args.Get(0, "keepends") && args.Get(0, "keepends")->Truthy());
  if (name == "join") {
    const Value* items = args.Get(0, "iterable");
    if (!items || !items->is_list()) return InvalidArgument("join() needs a list");
    TextOut out = in.NewText();
    for (size_t i = 0; i < items->list().size(); ++i) {
      const Value& x = items->list()[i];
      if (!x.is_string()) return InvalidArgument("join(): item {} is a {}, not a string", i, x.kind_name());
      if (i > 0) KVS_RETURN_IF_ERROR(out.Append(self.str_data()));
      KVS_RETURN_IF_ERROR(out.Append(x.str_data()));
    }
    return out.Take();
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const Value* a = args.Get(0, name == "removeprefix" ? "prefix" : "suffix");
    if (!a || !a->is_string()) return InvalidArgument("{}() needs a string argument", name);
    const std::string& x = a->str();
    if (name == "removeprefix") return s.rfind(x, 0) == 0 ? sub(std::string_view(s).substr(x.size())) : self;
    const bool ends = x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
    return ends ? sub(std::string_view(s).substr(0, s.size() - x.size())) : self;
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
    KVS_RETURN_IF_ERROR(in.GrowList(items.size() + 1, 1));
    const Value& x = args.positional[0];
    if (x.is_container() || x.is_callable()) in.Track(self);
    items.push_back(x);
    return Value::None();
  }
  if (name == "pop") {
    KVS_ASSIGN_OR_RETURN(int64_t i, index_arg(0, -1, false));
    KVS_RETURN_IF_ERROR(in.Tick((items.size() - static_cast<size_t>(i)) / 16));
    Value v = items[i];
    items.erase(items.begin() + i);
    return v;
  }
  if (name == "insert") {
    if (args.positional.size() != 2) return InvalidArgument("insert() takes exactly two arguments");
    KVS_ASSIGN_OR_RETURN(int64_t i, index_arg(0, 0, true));
    KVS_RETURN_IF_ERROR(in.GrowList(items.size() + 1, 1));
    KVS_RETURN_IF_ERROR(in.Tick((items.size() - static_cast<size_t>(i)) / 16));
    const Value& x = args.positional[1];
    if (x.is_container() || x.is_callable()) in.Track(self);
    items.insert(items.begin() + i, x);
    return Value::None();
  }
  if (name == "extend") {
    if (args.positional.size() != 1 || !args.positional[0].is_list()) return InvalidArgument("extend() needs a list");
    const ListObj add = args.positional[0].list();
    KVS_RETURN_IF_ERROR(in.GrowList(items.size() + add.size(), add.size()));
    in.Track(self);
    items.insert(items.end(), add.begin(), add.end());
    return Value::None();
  }
  if (name == "index" || name == "count") {
    if (args.positional.empty()) return InvalidArgument("{}() takes an argument", name);
    KVS_RETURN_IF_ERROR(in.Tick(items.size() / 16));
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!StrictEquals(items[i], args.positional[0])) continue;
      if (name == "index") return Value::Int(static_cast<int64_t>(i));
      ++n;
    }
    if (name == "index") return InvalidArgument("value is not in list");
    return Value::Int(n);
  }
  if (name == "copy") {
    KVS_RETURN_IF_ERROR(in.CheckListSize(items.size()));
    return Value::List(items);
  }
  if (name == "reverse") {
    std::reverse(items.begin(), items.end());
    return Value::None();
  }
  *found = false;
  return Value();
}

// ---- sorting (the sort filter, dictsort) ----

}  // namespace

Status SortValues(Interpreter& in, ListObj* items, bool reverse, bool case_sensitive,
                  const std::function<Value(const Value&)>& key) {
  Status error;
  std::stable_sort(items->begin(), items->end(), [&](const Value& a, const Value& b) {
    if (!error.ok()) return false;
    if (Status t = in.Tick(); !t.ok()) {
      error = t;
      return false;
    }
    auto c = Compare(key(a), key(b), case_sensitive);
    if (!c.ok()) {
      error = c.status();
      return false;
    }
    return reverse ? *c > 0 : *c < 0;
  });
  return error;
}

namespace {

// ---- dict methods ----

StatusOr<Value> DictSort(Interpreter& in, const Value& self, const CallArgs& args) {
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
  KVS_RETURN_IF_ERROR(in.CheckListSize(self.dict().size() * 3));
  ListObj items;
  for (const auto& [k, v] : self.dict().entries()) items.push_back(Value::List({k, v}));
  KVS_RETURN_IF_ERROR(
      SortValues(in, &items, reverse, case_sensitive, [index](const Value& kv) { return kv.list()[index]; }));
  return Value::List(std::move(items));
}

StatusOr<Value> DictMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args, bool* found) {
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
    KVS_RETURN_IF_ERROR(in.CheckListSize(d.size() * (name == "items" ? 3 : 1)));
    ListObj out;
    for (const auto& [k, v] : d.entries()) {
      out.push_back(name == "items" ? Value::List({k, v}) : name == "keys" ? k : v);
    }
    return Value::List(std::move(out));
  }
  if (name == "dictsort") return DictSort(in, self, args);
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

// A macro or the `caller` of a call block: renders the statement's body in a
// new scope below the one it holds. Dropping it hands that scope to the
// destruction queue (long scope chains would otherwise recurse deeply).
class BodyCallable : public Callable {
 public:
  BodyCallable(const Stmt& s, ScopePtr held) : s_(s), held_(std::move(held)) {}
  ~BodyCallable() override {
    BuryPointer(std::move(held_));
    DrainBuried();
  }

 protected:
  // Binds args (`what` names the callable in errors) in a new scope below
  // parent, runs the body there and returns its text.
  StatusOr<Value> RenderBody(Interpreter& in, Scope* parent, const std::string& what, CallArgs& args) {
    ScopePtr scope = in.NewScope(parent);
    KVS_RETURN_IF_ERROR(BindParams(in, s_, what, args, scope.get()));
    TextOut out = in.NewText();
    KVS_RETURN_IF_ERROR(in.ExecBody(s_.body, scope.get(), &out));
    return out.Take();
  }

  const Stmt& s_;  // owned by the parsed template, which outlives the render
  ScopePtr held_;  // macro: the scope it was defined in; caller: the call block's scope
};

class MacroCallable final : public BodyCallable {
 public:
  using BodyCallable::BodyCallable;
  StatusOr<Value> Call(Interpreter& in, CallArgs& args) override {
    Value caller = in.TakePendingCaller();
    ScopePtr parent = held_;
    if (s_.uses_caller) {
      parent = in.NewScope(held_.get());
      parent->Set("caller", std::move(caller));
    }
    return RenderBody(in, parent.get(), "'" + s_.name + "'", args);
  }
  std::string name() const override { return s_.name; }
};

class CallerCallable final : public BodyCallable {
 public:
  using BodyCallable::BodyCallable;
  StatusOr<Value> Call(Interpreter& in, CallArgs& args) override { return RenderBody(in, held_.get(), "None", args); }
  std::string name() const override { return "caller"; }
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
  const size_t n = count > (__int128{1} << 40) ? size_t{1} << 40 : static_cast<size_t>(count);
  KVS_RETURN_IF_ERROR(in.CheckListSize(n));
  // The items count as iterations: range() in a loop is a nested loop.
  KVS_RETURN_IF_ERROR(in.CountIterations(n));
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
      KVS_RETURN_IF_ERROR(in.Tick(src.list().size() / 16));
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
  return in.NewString(os.str());
}

}  // namespace

StatusOr<Value> CallMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args, bool* found) {
  *found = true;
  if (self.is_string()) return StringMethod(in, self, name, args, found);
  if (self.is_list()) return ListMethod(in, self, name, args, found);
  if (self.is_dict()) return DictMethod(in, self, name, args, found);
  *found = false;
  return Value();
}

Value BoundMethod(const Value& self, std::string_view name) {
  if (self.is_dict() && self.dict().is_loop) {
    if (name == "depth") return Value::Int(1);
    if (name == "depth0") return Value::Int(0);
  }
  if (!HasMethod(self, name)) return Value();
  return Value::Function(std::make_shared<BoundMethodFunction>(self, std::string(name)));
}

StatusOr<Value> BoundMethodFunction::Call(Interpreter& in, CallArgs& args) {
  bool found = false;
  return CallMethod(in, self_, method_, args, &found);
}

StatusOr<Value> MakeMacro(Interpreter& in, const Stmt& s, Scope* scope) {
  KVS_RETURN_IF_ERROR(in.Capture(scope));
  return Value::Function(std::make_shared<MacroCallable>(s, scope->shared_from_this()));
}

StatusOr<Value> MakeCaller(Interpreter& in, const Stmt& s, Scope* scope) {
  KVS_RETURN_IF_ERROR(in.Capture(scope));
  return Value::Function(std::make_shared<CallerCallable>(s, scope->shared_from_this()));
}

void InstallGlobalFunctions(Scope* scope) {
  auto add = [&](const char* name, NativeFunction::Fn fn) {
    scope->Set(name, Value::Function(std::make_shared<NativeFunction>(name, std::move(fn))));
  };
  add("range", Range);
  add("namespace", [](Interpreter& in, CallArgs& args) { return MakeMapping(in, args, true); });
  add("dict", [](Interpreter& in, CallArgs& args) { return MakeMapping(in, args, false); });
  add("strftime_now", StrftimeNow);
  add("raise_exception", [](Interpreter& in, CallArgs& args) -> StatusOr<Value> {
    TextOut msg = in.NewText();
    if (!args.positional.empty()) KVS_RETURN_IF_ERROR(AppendRaw(args.positional[0], &msg));
    return Status(StatusCode::kInvalidArgument, "raise_exception: " + msg.TakeText());
  });
}

}  // namespace kvs::tmpl
