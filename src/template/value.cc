#include "template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>

#include "template/text.h"

namespace kvs::tmpl {

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

Value Value::String(std::string s, Spans content) {
  Value v(Kind::kString);
  v.ptr_ = std::make_shared<StrData>(StrData{std::move(s), std::move(content)});
  return v;
}

Value Value::Content(std::string s) {
  Spans spans;
  AddSpan(&spans, 0, s.size());
  return String(std::move(s), std::move(spans));
}

Value Value::List(ListObj items) {
  Value v(Kind::kList);
  v.ptr_ = std::make_shared<ListHolder>(std::move(items));
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

bool Value::MarkTracked() const {
  bool* flag = is_list() ? &static_cast<ListHolder*>(ptr_.get())->tracked
                         : is_object() ? &dict().tracked : nullptr;
  if (!flag) return true;
  return std::exchange(*flag, true);
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

// ---- Destruction without recursion ----

namespace {

// Payloads whose destruction was deferred by a container's destructor.
struct Graveyard {
  std::vector<std::shared_ptr<void>> pending;
  bool draining = false;
};
thread_local Graveyard graveyard;

}  // namespace

void BuryPayload(Value& v) {
  if (v.is_container() || v.is_callable()) graveyard.pending.push_back(std::move(v.ptr_));
}

void BuryPointer(std::shared_ptr<void> p) {
  if (p) graveyard.pending.push_back(std::move(p));
}

void DrainBuried() {
  Graveyard& g = graveyard;
  if (g.draining) return;  // an outer destructor on this thread drains the queue
  g.draining = true;
  while (!g.pending.empty()) {
    // Releasing may run destructors that queue more payloads: they land in
    // g.pending, to be taken by this loop, instead of recursing.
    std::shared_ptr<void> p = std::move(g.pending.back());
    g.pending.pop_back();
    p.reset();
  }
  g.draining = false;
}

ListHolder::~ListHolder() {
  for (Value& v : items) BuryPayload(v);
  items.clear();
  DrainBuried();
}

DictObj::~DictObj() {
  for (auto& [k, v] : entries_) BuryPayload(v);
  DrainBuried();
}

BoundMethodFunction::~BoundMethodFunction() {
  BuryPayload(self_);
  DrainBuried();
}

// ---- DictObj ----

static bool SameKey(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  if (a.is_string()) return a.str() == b.str();
  return a.is_int() && a.int_value() == b.int_value();
}

long DictObj::IndexOf(const Value& key) const {
  if (key.is_string()) return IndexOf(std::string_view(key.str()));
  if (!key.is_int()) return -1;
  if (entries_.size() >= kIndexFrom) {
    auto it = by_int_.find(key.int_value());
    return it == by_int_.end() ? -1 : static_cast<long>(it->second);
  }
  for (size_t i = 0; i < entries_.size(); ++i) {
    if (SameKey(entries_[i].first, key)) return static_cast<long>(i);
  }
  return -1;
}

long DictObj::IndexOf(std::string_view key) const {
  if (entries_.size() >= kIndexFrom) {
    auto it = by_string_.find(key);
    return it == by_string_.end() ? -1 : static_cast<long>(it->second);
  }
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
    return;
  }
  entries_.emplace_back(key, std::move(v));
  auto index = [&](size_t at) {
    const Value& k = entries_[at].first;
    // The views point into the keys' own (immutable, heap-held) text.
    if (k.is_string()) {
      by_string_.emplace(std::string_view(k.str()), at);
    } else {
      by_int_.emplace(k.int_value(), at);
    }
  };
  if (entries_.size() == kIndexFrom) {
    for (size_t at = 0; at < entries_.size(); ++at) index(at);
  } else if (entries_.size() > kIndexFrom) {
    index(entries_.size() - 1);
  }
}

void DictObj::Clear() {
  by_string_.clear();
  by_int_.clear();
  std::vector<std::pair<Value, Value>> dropped;
  dropped.swap(entries_);
  for (auto& [k, v] : dropped) BuryPayload(v);
  dropped.clear();
  DrainBuried();
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

bool NumberLike(const Value& v) { return v.is_number() || v.is_bool(); }

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
