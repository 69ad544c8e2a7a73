// Binary operators and member access, with @huggingface/jinja's semantics
// (see value.h for the policy where it has none).
#include <cmath>
#include <limits>

#include "template/interpreter.h"
#include "template/text.h"

namespace kvs::tmpl {
namespace {

const char* OpName(BinOp op) {
  switch (op) {
    case BinOp::kAnd: return "and";
    case BinOp::kOr: return "or";
    case BinOp::kEq: return "==";
    case BinOp::kNe: return "!=";
    case BinOp::kLt: return "<";
    case BinOp::kGt: return ">";
    case BinOp::kLe: return "<=";
    case BinOp::kGe: return ">=";
    case BinOp::kIn: return "in";
    case BinOp::kNotIn: return "not in";
    case BinOp::kAdd: return "+";
    case BinOp::kSub: return "-";
    case BinOp::kConcat: return "~";
    case BinOp::kMul: return "*";
    case BinOp::kDiv: return "/";
    case BinOp::kFloorDiv: return "//";
    case BinOp::kMod: return "%";
    case BinOp::kPow: return "**";
  }
  return "?";
}

StatusOr<Value> IntArith(BinOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case BinOp::kAdd:
      if (__builtin_add_overflow(a, b, &r)) return OutOfRange("integer overflow");
      return Value::Int(r);
    case BinOp::kSub:
      if (__builtin_sub_overflow(a, b, &r)) return OutOfRange("integer overflow");
      return Value::Int(r);
    case BinOp::kMul:
      if (__builtin_mul_overflow(a, b, &r)) return OutOfRange("integer overflow");
      return Value::Int(r);
    case BinOp::kFloorDiv: {
      if (b == 0) return InvalidArgument("integer division by zero");
      if (a == std::numeric_limits<int64_t>::min() && b == -1) return OutOfRange("integer overflow");
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
      return Value::Int(q);
    }
    case BinOp::kMod:
      // JavaScript's remainder: the sign follows the dividend.
      if (b == 0) return InvalidArgument("integer modulo by zero");
      if (b == -1) return Value::Int(0);
      return Value::Int(a % b);
    default: return Internal("not an integer operator");
  }
}

StatusOr<Value> NumericOp(BinOp op, const Value& l, const Value& r) {
  const bool is_float = l.is_float() || r.is_float();
  if (!is_float && (op == BinOp::kAdd || op == BinOp::kSub || op == BinOp::kMul || op == BinOp::kFloorDiv ||
                    op == BinOp::kMod)) {
    return IntArith(op, l.int_value(), r.int_value());
  }
  const double a = l.number(), b = r.number();
  switch (op) {
    case BinOp::kAdd: return Value::Float(a + b);
    case BinOp::kSub: return Value::Float(a - b);
    case BinOp::kMul: return Value::Float(a * b);
    case BinOp::kDiv:
      if (b == 0) return InvalidArgument("division by zero");
      return Value::Float(a / b);
    case BinOp::kFloorDiv:
      if (b == 0) return InvalidArgument("division by zero");
      return Value::Float(std::floor(a / b));
    case BinOp::kMod:
      if (b == 0) return InvalidArgument("modulo by zero");
      return Value::Float(std::fmod(a, b));
    case BinOp::kLt: return Value::Bool(a < b);
    case BinOp::kGt: return Value::Bool(a > b);
    case BinOp::kLe: return Value::Bool(a <= b);
    case BinOp::kGe: return Value::Bool(a >= b);
    default: return InvalidArgument("Unknown operator \"{}\" between {} and {}", OpName(op), l.kind_name(), r.kind_name());
  }
}

StatusOr<Value> Power(const Value& l, const Value& r) {
  const double a = l.number(), b = r.number();
  if (a == 0 && b < 0) return InvalidArgument("0.0 cannot be raised to a negative power");
  const bool is_float = l.is_float() || r.is_float() || b < 0;
  if (!is_float) {
    // Exact integer power by squaring, refusing overflow.
    int64_t base = l.is_int() ? l.int_value() : int64_t{l.bool_value()};
    int64_t e = r.is_int() ? r.int_value() : int64_t{r.bool_value()};
    int64_t acc = 1;
    while (e > 0) {
      if ((e & 1) && __builtin_mul_overflow(acc, base, &acc)) return OutOfRange("integer overflow in **");
      e >>= 1;
      if (e > 0 && __builtin_mul_overflow(base, base, &base)) return OutOfRange("integer overflow in **");
    }
    return Value::Int(acc);
  }
  const double p = std::pow(a, b);
  if (!std::isfinite(p)) return InvalidArgument("Exponentiation result is not a finite real number");
  return Value::Float(p);
}

// Python's sequence repetition (`'-' * 3`), which the oracle lacks. The
// result's size is checked before anything is built, in 128 bits so that
// no count can wrap around.
StatusOr<Value> Repeat(Interpreter& in, const Value& seq, int64_t times) {
  if (times <= 0) return seq.is_string() ? Value::String("") : Value::List();
  if (seq.is_string()) {
    const StrData& s = seq.str_data();
    const unsigned __int128 total = static_cast<unsigned __int128>(s.text.size()) * static_cast<uint64_t>(times);
    KVS_RETURN_IF_ERROR(in.budget()->NewString(total > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(total)));
    const size_t n = static_cast<size_t>(total);
    std::string out;
    out.reserve(n);
    out += s.text;
    while (!out.empty() && out.size() * 2 <= n) out.append(out);  // doubling
    out.append(out, 0, n - out.size());
    Spans spans;
    for (int64_t i = 0; i < times && !s.content.empty(); ++i) AppendSpans(&spans, s.content, static_cast<size_t>(i) * s.text.size());
    return Value::String(std::move(out), std::move(spans));
  }
  const ListObj& items = seq.list();
  const unsigned __int128 total = static_cast<unsigned __int128>(items.size()) * static_cast<uint64_t>(times);
  KVS_RETURN_IF_ERROR(in.CheckListSize(total > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(total)));
  ListObj out;
  out.reserve(static_cast<size_t>(total));
  for (int64_t i = 0; i < times && !items.empty(); ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::List(std::move(out));
}

StatusOr<Value> Concat(Interpreter& in, const Value& l, const Value& r) {
  TextOut out = in.NewText();
  KVS_RETURN_IF_ERROR(AppendRaw(l, &out));
  KVS_RETURN_IF_ERROR(AppendRaw(r, &out));
  return out.Take();
}

}  // namespace

StatusOr<Value> Interpreter::EvalBinary(const Expr& e, Scope* scope) {
  const BinOp op = e.op;
  KVS_ASSIGN_OR_RETURN(Value l, Eval(*e.a, scope));
  if (op == BinOp::kAnd) return l.Truthy() ? Eval(*e.b, scope) : l;
  if (op == BinOp::kOr) return l.Truthy() ? l : Eval(*e.b, scope);
  KVS_ASSIGN_OR_RETURN(Value r, Eval(*e.b, scope));
  if (op == BinOp::kEq) return Value::Bool(LooseEquals(l, r));
  if (op == BinOp::kNe) return Value::Bool(!LooseEquals(l, r));
  const bool in_op = op == BinOp::kIn || op == BinOp::kNotIn;
  if (l.is_number() && r.is_number() && op != BinOp::kConcat && op != BinOp::kPow) {
    if (!in_op) return NumericOp(op, l, r);
  } else if (l.is_undefined() || r.is_undefined()) {
    if (r.is_undefined() && in_op) return Value::Bool(op == BinOp::kNotIn);
    if (op == BinOp::kConcat && !l.is_none() && !r.is_none()) {
      return Concat(*this, l.is_undefined() ? Value::String("") : l, r.is_undefined() ? Value::String("") : r);
    }
    return InvalidArgument("Cannot perform operation {} on undefined values", OpName(op));
  } else if (l.is_none() || r.is_none()) {
    return InvalidArgument("Cannot perform operation {} on null values", OpName(op));
  } else if (op == BinOp::kConcat) {
    return Concat(*this, l, r);
  } else if (op == BinOp::kPow && NumberLike(l) && NumberLike(r)) {
    return Power(l, r);
  } else if (l.is_list() && r.is_list()) {
    if (op == BinOp::kAdd) {
      KVS_RETURN_IF_ERROR(CheckListSize(l.list().size() + r.list().size()));
      ListObj out = l.list();
      out.insert(out.end(), r.list().begin(), r.list().end());
      return Value::List(std::move(out));
    }
  } else if (r.is_list() && in_op) {
    KVS_RETURN_IF_ERROR(Tick(r.list().size() / 16));
    bool member = false;
    for (const Value& x : r.list()) {
      if (StrictEquals(x, l)) {
        member = true;
        break;
      }
    }
    return Value::Bool(op == BinOp::kIn ? member : !member);
  }
  if ((l.is_string() || r.is_string()) && op == BinOp::kAdd) return Concat(*this, l, r);
  if (l.is_string() && r.is_string()) {
    if (in_op) {
      const bool found = r.str().find(l.str()) != std::string::npos;
      return Value::Bool(op == BinOp::kIn ? found : !found);
    }
    const int c = l.str().compare(r.str());
    switch (op) {
      case BinOp::kLt: return Value::Bool(c < 0);
      case BinOp::kGt: return Value::Bool(c > 0);
      case BinOp::kLe: return Value::Bool(c <= 0);
      case BinOp::kGe: return Value::Bool(c >= 0);
      default: break;
    }
  }
  if (l.is_string() && r.is_dict() && in_op) {
    const bool found = r.dict().Find(l.str()) != nullptr;
    return Value::Bool(op == BinOp::kIn ? found : !found);
  }
  if (op == BinOp::kMul && (l.is_string() || l.is_list()) && r.is_int()) return Repeat(*this, l, r.int_value());
  if (op == BinOp::kMul && l.is_int() && (r.is_string() || r.is_list())) return Repeat(*this, r, l.int_value());
  return InvalidArgument("Unknown operator \"{}\" between {} and {}", OpName(op), l.kind_name(), r.kind_name());
}

StatusOr<Value> Interpreter::GetMember(const Value& object, const Value& key) {
  if (object.is_object()) {
    const DictObj& d = object.dict();
    if (key.is_int() && object.is_dict()) {
      const Value* v = d.Find(key);
      return v ? *v : Value();
    }
    if (!key.is_string()) return InvalidArgument("Cannot access property with non-string: got {}", key.kind_name());
    if (const Value* v = d.Find(key.str())) return *v;
    if (object.is_dict()) return BoundMethod(object, key.str());
    return Value();
  }
  if (object.is_list() || object.is_string()) {
    if (key.is_int()) {
      int64_t i = key.int_value();
      if (object.is_list()) {
        const int64_t n = static_cast<int64_t>(object.list().size());
        if (i < 0) i += n;
        return (i >= 0 && i < n) ? object.list()[i] : Value();
      }
      const StrData& s = object.str_data();
      if (i < 0) {
        const int64_t n = static_cast<int64_t>(text::CodePointCount(s.text));
        if (i + n < 0) return Value();
        i += n;
      }
      // Walk to code point i without materializing the others.
      const size_t b = text::ByteOffset(s.text, static_cast<size_t>(i));
      if (b >= s.text.size()) return Value();
      size_t e = b;
      text::NextCodePoint(s.text, &e);
      return Value::String(s.text.substr(b, e - b), SliceSpans(s.content, b, e));
    }
    if (key.is_string()) {
      if (key.str() == "length") {
        return Value::Int(static_cast<int64_t>(object.is_list() ? object.list().size()
                                                                : text::CodePointCount(object.str())));
      }
      return BoundMethod(object, key.str());
    }
    return InvalidArgument("Cannot access property with non-string/non-number: got {}", key.kind_name());
  }
  if (!key.is_string()) return InvalidArgument("Cannot access property with non-string: got {}", key.kind_name());
  return Value();
}

}  // namespace kvs::tmpl
