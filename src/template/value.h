// Runtime values of the Jinja interpreter.
//
// A Value is one of: undefined, none, bool, int, float, string, list, dict,
// namespace or callable. Scalars and strings are immutable; lists, dicts and
// namespaces are reference types (copying a Value shares the container, as in
// Python), so `ns.x = ...` and `list.append(...)` are seen by every holder.
// Dicts keep insertion order, have string or integer keys and are indexed
// once they grow (lookups stay O(1) for a 100k-key JSON object).
//
// Provenance: a string records which of its bytes came from the caller's data
// (message content, tool arguments: see text_out.h) as sorted byte spans, so
// the rendered prompt can tell template text from user text.
//
// Destruction never recurses deeper than a few frames, however deeply values
// nest (a list holding a list ... a million levels down, built by a loop):
// containers hand their children to a per-thread queue that the outermost
// destructor drains.
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
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "template/spans.h"

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

// The payload of a string: its bytes and which of them are the caller's data.
struct StrData {
  std::string text;
  Spans content;
};

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
  // Template-side text (literals, numbers printed, ...).
  static Value String(std::string s) { return String(std::move(s), Spans{}); }
  // Text with the given content spans (sorted, disjoint, within s).
  static Value String(std::string s, Spans content);
  // Text that is entirely the caller's data.
  static Value Content(std::string s);
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
  // Lists, dicts and namespaces: the mutable reference types.
  bool is_container() const { return kind_ == Kind::kList || is_object(); }

  bool bool_value() const { return b_; }
  int64_t int_value() const { return i_; }
  double float_value() const { return f_; }
  // int, float or bool as a double.
  double number() const { return kind_ == Kind::kFloat ? f_ : kind_ == Kind::kInt ? double(i_) : double(b_); }
  const StrData& str_data() const { return *static_cast<const StrData*>(ptr_.get()); }
  const std::string& str() const { return str_data().text; }
  // The content spans of a string (empty: all template text).
  const Spans& spans() const { return str_data().content; }
  ListObj& list() const;
  DictObj& dict() const { return *static_cast<DictObj*>(ptr_.get()); }  // dict or namespace
  Callable& callable() const { return *static_cast<Callable*>(ptr_.get()); }
  // Identity of a container (reference equality, as the oracle compares lists).
  const void* identity() const { return ptr_.get(); }
  // A weak reference to a container's payload (for cycle breaking).
  std::weak_ptr<void> weak() const { return ptr_; }
  // Whether this container was registered for cycle breaking; sets the mark.
  bool MarkTracked() const;

  // Python/JS truthiness: empty string/list/dict, 0, none, undefined are false.
  bool Truthy() const;

 private:
  friend void BuryPayload(Value& v);
  explicit Value(Kind k) : kind_(k) {}
  Kind kind_ = Kind::kUndefined;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> ptr_;
};

// The payload of a list.
struct ListHolder {
  ListObj items;
  bool tracked = false;  // registered for cycle breaking (Interpreter::Track)
  ListHolder() = default;
  explicit ListHolder(ListObj v) : items(std::move(v)) {}
  ListHolder(const ListHolder&) = delete;
  ListHolder& operator=(const ListHolder&) = delete;
  ~ListHolder();
};
inline ListObj& Value::list() const { return static_cast<ListHolder*>(ptr_.get())->items; }

// Hands the payload of a container or callable to the destruction queue of
// this thread (see the header comment); strings and scalars are left alone.
void BuryPayload(Value& v);
// Same for an owned pointer of any kind (a scope, a closure).
void BuryPointer(std::shared_ptr<void> p);
// Destroys what is queued unless an outer destructor on this thread already is.
void DrainBuried();

// Insertion-ordered mapping for dicts and namespaces. Keys are strings or
// ints (Jinja2 allows `{0: 'a'}`); lookups by string never find int keys.
class DictObj {
 public:
  DictObj() = default;
  DictObj(const DictObj&) = delete;
  DictObj& operator=(const DictObj&) = delete;
  ~DictObj();

  // Null when absent.
  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  void Set(const Value& key, Value v);
  void Set(std::string_view key, Value v) { Set(Value::String(std::string(key)), std::move(v)); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  void Reserve(size_t n) { entries_.reserve(n); }
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  void Clear();

  // Set on the dict that stands for `loop` in a for loop, so that
  // `loop.cycle(...)` can be offered without being one of its entries.
  bool is_loop = false;
  bool tracked = false;  // registered for cycle breaking (Interpreter::Track)

 private:
  long IndexOf(const Value& key) const;
  long IndexOf(std::string_view key) const;
  std::vector<std::pair<Value, Value>> entries_;
  // Built once the dict has kIndexFrom entries: key -> position.
  static constexpr size_t kIndexFrom = 16;
  std::unordered_map<std::string_view, size_t> by_string_;  // views into the keys' own text
  std::unordered_map<int64_t, size_t> by_int_;
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

// A method of a string, list or dict bound to its object (`x.upper` used as
// a value rather than called at once).
class BoundMethodFunction final : public Callable {
 public:
  BoundMethodFunction(Value self, std::string method) : self_(std::move(self)), method_(std::move(method)) {}
  ~BoundMethodFunction() override;
  StatusOr<Value> Call(Interpreter& in, CallArgs& args) override;
  std::string name() const override { return method_; }

 private:
  Value self_;
  std::string method_;
};

// ---- Equality and ordering ----

// Loose equality (`==`): numbers and booleans compare numerically, strings
// by content, none equals undefined, containers by identity.
bool LooseEquals(const Value& a, const Value& b);
// Numbers and booleans: the operands arithmetic and loose equality treat as numbers.
bool NumberLike(const Value& v);
// Strict equality (the `eq` test, `in`): same kind family and same value.
bool StrictEquals(const Value& a, const Value& b);
// Ordering for sort/dictsort/min/max: numbers and booleans numerically,
// strings (optionally case-insensitively); other mixes are errors.
StatusOr<int> Compare(const Value& a, const Value& b, bool case_sensitive);

// JavaScript's Number.prototype.toString for a double.
std::string JsNumberToString(double d);

}  // namespace kvs::tmpl
