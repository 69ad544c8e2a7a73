// Runtime values of the Jinja interpreter.
//
// A Value is one of: undefined, none, bool, int, float, string, list, dict,
// namespace or callable. Scalars and strings are immutable; lists, dicts and
// namespaces are reference types (copying a Value shares the container, as in
// Python), so `ns.x = ...` and `list.append(...)` are seen by every holder.
// Dicts keep insertion order and have string or integer keys.
//
// The observable behaviour (printing, JSON, equality, truthiness) follows
// @huggingface/jinja, the renderer the project's oracle tests compare with;
// where that library has no behaviour (it throws), Jinja2's is used.
//
// Thread-safety: a Value and the containers it reaches belong to one render;
// only immutable strings (e.g. literals owned by a parsed template) are
// shared between threads, through atomic reference counts.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kvs::tmpl {

enum class Kind : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kDict,
  kNamespace,
  kCallable,
};

// "UndefinedValue", "StringValue", ...: the names errors use.
const char* KindName(Kind k);

class Value;
class DictObj;
class Callable;
using ListObj = std::vector<Value>;

class Value {
 public:
  Value() = default;  // undefined
  static Value None() { return Value(Kind::kNone); }
  static Value Bool(bool b) {
    Value v(Kind::kBool);
    v.b_ = b;
    return v;
  }
  static Value Int(int64_t i) {
    Value v(Kind::kInt);
    v.i_ = i;
    return v;
  }
  static Value Float(double f) {
    Value v(Kind::kFloat);
    v.f_ = f;
    return v;
  }
  static Value String(std::string s);
  static Value String(std::shared_ptr<const std::string> s);
  static Value List(ListObj items = {});
  static Value Dict();
  static Value Namespace();
  static Value Function(std::shared_ptr<Callable> fn);

  Kind kind() const { return kind_; }
  const char* kind_name() const { return KindName(kind_); }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_list() const { return kind_ == Kind::kList; }
  bool is_dict() const { return kind_ == Kind::kDict; }
  bool is_namespace() const { return kind_ == Kind::kNamespace; }
  bool is_callable() const { return kind_ == Kind::kCallable; }
  // Dicts and namespaces: things with named attributes.
  bool is_object() const { return kind_ == Kind::kDict || kind_ == Kind::kNamespace; }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }
  double float_value() const { return f_; }
  // int, float or bool as a double.
  double number() const { return kind_ == Kind::kFloat ? f_ : kind_ == Kind::kInt ? double(i_) : double(b_); }
  const std::string& str() const { return *static_cast<const std::string*>(ptr_.get()); }
  std::shared_ptr<const std::string> shared_str() const {
    return std::static_pointer_cast<const std::string>(ptr_);
  }
  ListObj& list() const { return *static_cast<ListObj*>(ptr_.get()); }
  DictObj& dict() const { return *static_cast<DictObj*>(ptr_.get()); }  // dict or namespace
  Callable& callable() const { return *static_cast<Callable*>(ptr_.get()); }
  // Identity of a container (reference equality, as the oracle compares lists).
  const void* identity() const { return ptr_.get(); }

  // Python/JS truthiness: empty string/list/dict, 0, none, undefined are false.
  bool Truthy() const;

 private:
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> ptr_;
};

// Insertion-ordered mapping for dicts and namespaces. Keys are strings or
// ints (Jinja2 allows `{0: 'a'}`); lookups by string never find int keys.
class DictObj {
 public:
  // Null when absent.
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  void Set(const Value& key, Value v);
  void Set(std::string_view key, Value v) { Set(Value::String(std::string(key)), std::move(v)); }
  bool Erase(const Value& key);
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  void Clear() { entries_.clear(); }

  // Set on the dict that stands for `loop` in a for loop, so that
  // `loop.cycle(...)` can be offered without being one of its entries.
  bool is_loop = false;

 private:
  long IndexOf(const Value& key) const;
  long IndexOf(std::string_view key) const;
  std::vector<std::pair<Value, Value>> entries_;
};

// Arguments of a call, in the order written: positional first, then keyword.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;

  const Value* Keyword(std::string_view name) const {
    for (const auto& [k, v] : keyword) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  // Positional i, else keyword `name`, else null.
  const Value* Get(size_t i, std::string_view name) const {
    if (i < positional.size()) return &positional[i];
    return Keyword(name);
  }
};

class Interpreter;

// Something that can be called from a template: a builtin, a bound method,
// a macro or a `caller` of a call block.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual StatusOr<Value> Call(Interpreter& in, CallArgs& args) = 0;
  virtual std::string name() const = 0;
};

// A Callable backed by a std::function.
class NativeFunction final : public Callable {
 public:
  using Fn = std::function<StatusOr<Value>(Interpreter&, CallArgs&)>;
  NativeFunction(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}
  StatusOr<Value> Call(Interpreter& in, CallArgs& args) override { return fn_(in, args); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  Fn fn_;
};

// ---- Conversions shared by the interpreter and filters. ----

// How a value prints in `{{ }}` output (the oracle's toString): floats keep a
// ".0", booleans print true/false, lists and dicts print as JSON with
// undefined members as `undefined`. Undefined and none print nothing.
StatusOr<std::string> Display(const Value& v);

// JavaScript's String(x) of the underlying value, used by `~`, `+` and
// `join` (1.0 becomes "1", a list joins its items' Display with ",").
StatusOr<std::string> RawString(const Value& v);

// JavaScript's Number.prototype.toString for a double.
std::string JsNumberToString(double d);

struct JsonOptions {
  int indent = 0;                   // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_separator;       // when has_separators
  std::string key_separator;
  bool undefined_as_null = true;    // false prints `undefined` (Display)
};
// JSON text as @huggingface/jinja's tojson writes it (", " and ": " by
// default, "," and ": " with an indent, insertion order).
StatusOr<std::string> ToJson(const Value& v, const JsonOptions& opt);

// Appends s as a JSON string literal (quotes included).
void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out);

// Loose equality (`==`): numbers and booleans compare numerically, strings
// by content, none equals undefined, containers by identity.
bool LooseEquals(const Value& a, const Value& b);
// Strict equality (the `eq` test, `in`): same kind family and same value.
bool StrictEquals(const Value& a, const Value& b);
// Ordering for sort/dictsort/min/max: numbers and booleans numerically,
// strings (optionally case-insensitively); other mixes are errors.
StatusOr<int> Compare(const Value& a, const Value& b, bool case_sensitive);

}  // namespace kvs::tmpl
