#include "template/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "template/text.h"

namespace kvs::tmpl {

// ---- Scope ----

const Value* Scope::Lookup(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_) {
    for (const auto& [k, v] : s->vars_) {
      if (k == name) return &v;
    }
  }
  return nullptr;
}

void Scope::Set(std::string_view name, Value v) {
  for (auto& [k, old] : vars_) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  vars_.emplace_back(std::string(name), std::move(v));
}

// ---- Interpreter ----

struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter* in) : in_(in) { ++in_->depth_; }
  ~DepthGuard() { --in_->depth_; }
  bool exceeded() const { return in_->depth_ > in_->options_.limits.max_depth; }
  Interpreter* in_;
};

Interpreter::Interpreter(const SourceMap& map, const RenderOptions& options) : map_(map), options_(options) {
  globals_ = NewScope(nullptr);
  InstallGlobals();
}

Interpreter::~Interpreter() {
  // Containers may reference each other in cycles (a namespace holding
  // itself); emptying them lets the reference counts reach zero.
  for (Value& v : tracked_) {
    if (v.is_list()) {
      ListObj dropped;
      dropped.swap(v.list());
    } else if (v.is_object()) {
      v.dict().Clear();
    }
  }
}

Scope* Interpreter::NewScope(Scope* parent) {
  scopes_.emplace_back(parent);
  return &scopes_.back();
}

void Interpreter::InstallGlobals() {
  globals_->Set("true", Value::Bool(true));
  globals_->Set("false", Value::Bool(false));
  globals_->Set("none", Value::None());
  globals_->Set("True", Value::Bool(true));
  globals_->Set("False", Value::Bool(false));
  globals_->Set("None", Value::None());
  InstallGlobalFunctions(globals_);
}

void Interpreter::Track(const Value& container) { tracked_.push_back(container); }

Status Interpreter::At(uint32_t pos, Status s) const {
  if (s.ok() || s.message().rfind("template ", 0) == 0) return s;
  return Status(s.code(), fmt::format("template error at {}: {}", map_.Describe(pos), s.message()));
}

Status Interpreter::CheckSize(size_t n) const {
  if (n > options_.limits.max_output_bytes) {
    return ResourceExhausted("rendered text exceeds the limit of {} bytes", options_.limits.max_output_bytes);
  }
  return Status::Ok();
}

Status Interpreter::CheckListSize(size_t n) const {
  if (n > options_.limits.max_list_items) {
    return ResourceExhausted("a list of {} items exceeds the limit of {}", n, options_.limits.max_list_items);
  }
  return Status::Ok();
}

Status Interpreter::CountIterations(uint64_t n) {
  iterations_ += n;
  if (iterations_ > options_.limits.max_loop_iterations) {
    return ResourceExhausted("loops ran more than {} iterations", options_.limits.max_loop_iterations);
  }
  return Status::Ok();
}

Status Interpreter::Append(std::string* out, std::string_view text) const {
  KVS_RETURN_IF_ERROR(CheckSize(out->size() + text.size()));
  out->append(text);
  return Status::Ok();
}

Status Interpreter::Render(const Program& program, std::string* out) {
  return ExecBody(program.body, globals_, out);
}

Status Interpreter::ExecBody(const Body& body, Scope* scope, std::string* out) {
  for (const StmtPtr& s : body) {
    KVS_RETURN_IF_ERROR(Exec(*s, scope, out));
    if (flow_ != Flow::kNormal) break;
  }
  return Status::Ok();
}

Status Interpreter::Exec(const Stmt& s, Scope* scope, std::string* out) {
  DepthGuard guard(this);
  if (guard.exceeded()) {
    return At(s.pos, ResourceExhausted("nesting deeper than {} levels (runaway recursion?)", options_.limits.max_depth));
  }
  switch (s.kind) {
    case StmtKind::kText: return At(s.pos, Append(out, *s.text));
    case StmtKind::kOutput: {
      KVS_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      if (v.is_none() || v.is_undefined()) return Status::Ok();
      auto text = Display(v);
      if (!text.ok()) return At(s.expr->pos, text.status());
      return At(s.pos, Append(out, *text));
    }
    case StmtKind::kIf: {
      KVS_ASSIGN_OR_RETURN(Value cond, Eval(*s.expr, scope));
      return ExecBody(cond.Truthy() ? s.body : s.alt, scope, out);
    }
    case StmtKind::kFor: return ExecFor(s, scope, out);
    case StmtKind::kSet: return ExecSet(s, scope);
    case StmtKind::kMacro: scope->Set(s.name, MakeMacro(s, scope)); return Status::Ok();
    case StmtKind::kCallBlock: return ExecCallBlock(s, scope, out);
    case StmtKind::kFilterBlock: {
      std::string body;
      KVS_RETURN_IF_ERROR(ExecBody(s.body, scope, &body));
      // The filter chain's innermost operand is the rendered body.
      std::vector<const Expr*> chain;
      for (const Expr* f = s.expr.get(); f; f = f->a.get()) chain.push_back(f);
      Value v = Value::String(std::move(body));
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        CallArgs args;
        KVS_RETURN_IF_ERROR(EvalArgs((*it)->args, scope, &args));
        auto r = ApplyFilter((*it)->name, v, args, (*it)->has_call);
        if (!r.ok()) return At((*it)->pos, r.status());
        v = std::move(r).value();
      }
      if (v.is_none() || v.is_undefined()) return Status::Ok();
      auto text = Display(v);
      if (!text.ok()) return At(s.pos, text.status());
      return At(s.pos, Append(out, *text));
    }
    case StmtKind::kBreak: flow_ = Flow::kBreak; return Status::Ok();
    case StmtKind::kContinue: flow_ = Flow::kContinue; return Status::Ok();
  }
  return Status::Ok();
}

namespace {

Status BindTarget(const Expr& target, const Value& item, Scope* scope, const char* where) {
  if (target.kind == ExprKind::kName) {
    scope->Set(target.name, item);
    return Status::Ok();
  }
  if (!item.is_list()) return InvalidArgument("Cannot unpack non-iterable type{}: {}", where, item.kind_name());
  const size_t want = target.items.size(), have = item.list().size();
  if (want != have) return InvalidArgument("Too {} items to unpack{}", want > have ? "few" : "many", where);
  for (size_t i = 0; i < want; ++i) scope->Set(target.items[i]->name, item.list()[i]);
  return Status::Ok();
}

}  // namespace

Status Interpreter::ExecFor(const Stmt& s, Scope* scope, std::string* out) {
  Scope* loop_scope = NewScope(scope);
  KVS_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, loop_scope));
  std::vector<Value> candidates;
  switch (iterable.kind()) {
    case Kind::kList: candidates = iterable.list(); break;
    case Kind::kDict:
      for (const auto& [k, v] : iterable.dict().entries()) candidates.push_back(k);
      break;
    case Kind::kString:
      for (std::string& ch : text::SplitCodePoints(iterable.str())) candidates.push_back(Value::String(std::move(ch)));
      break;
    case Kind::kUndefined: break;  // Jinja2 iterates undefined as empty
    default:
      return At(s.expr->pos,
                InvalidArgument("Expected iterable or object type in for loop: got {}", iterable.kind_name()));
  }
  std::vector<Value> items;
  if (s.target->kind == ExprKind::kName && !s.cond) {
    items = std::move(candidates);
  } else {
    for (Value& c : candidates) {
      KVS_RETURN_IF_ERROR(CountIterations(1));
      Scope* test_scope = NewScope(loop_scope);
      KVS_RETURN_IF_ERROR(At(s.target->pos, BindTarget(*s.target, c, test_scope, "")));
      if (s.cond) {
        KVS_ASSIGN_OR_RETURN(Value keep, Eval(*s.cond, test_scope));
        if (!keep.Truthy()) continue;
      }
      items.push_back(std::move(c));
    }
  }
  if (items.empty()) return ExecBody(s.alt, loop_scope, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    KVS_RETURN_IF_ERROR(At(s.pos, CountIterations(1)));
    Value loop = Value::Dict();
    DictObj& d = loop.dict();
    d.is_loop = true;
    d.Set("index", Value::Int(i + 1));
    d.Set("index0", Value::Int(i));
    d.Set("revindex", Value::Int(n - i));
    d.Set("revindex0", Value::Int(n - i - 1));
    d.Set("first", Value::Bool(i == 0));
    d.Set("last", Value::Bool(i == n - 1));
    d.Set("length", Value::Int(n));
    d.Set("previtem", i > 0 ? items[i - 1] : Value());
    d.Set("nextitem", i + 1 < n ? items[i + 1] : Value());
    loop_scope->Set("loop", std::move(loop));
    KVS_RETURN_IF_ERROR(At(s.target->pos, BindTarget(*s.target, items[i], loop_scope, "")));
    KVS_RETURN_IF_ERROR(ExecBody(s.body, loop_scope, out));
    if (flow_ == Flow::kBreak) {
      flow_ = Flow::kNormal;
      break;
    }
    flow_ = Flow::kNormal;
  }
  return Status::Ok();
}

Status Interpreter::ExecSet(const Stmt& s, Scope* scope) {
  Value rhs;
  if (s.expr) {
    KVS_ASSIGN_OR_RETURN(rhs, Eval(*s.expr, scope));
  } else {
    std::string body;
    KVS_RETURN_IF_ERROR(ExecBody(s.body, scope, &body));
    rhs = Value::String(std::move(body));
  }
  const Expr& t = *s.target;
  if (t.kind == ExprKind::kMember) {
    KVS_ASSIGN_OR_RETURN(Value obj, Eval(*t.a, scope));
    if (!obj.is_namespace()) {
      return At(t.pos, InvalidArgument("cannot assign attribute '{}' on {} (only namespace() objects)", t.name,
                                       obj.kind_name()));
    }
    obj.dict().Set(t.name, std::move(rhs));
    return Status::Ok();
  }
  return At(t.pos, BindTarget(t, rhs, scope, " in set"));
}

Status Interpreter::ExecCallBlock(const Stmt& s, Scope* scope, std::string* out) {
  const Expr& call = *s.expr;
  KVS_ASSIGN_OR_RETURN(Value fn, Eval(*call.a, scope));
  CallArgs args;
  KVS_RETURN_IF_ERROR(EvalArgs(call.args, scope, &args));
  if (!fn.is_callable()) {
    return At(call.pos, InvalidArgument("Cannot call something that is not a function: got {}", fn.kind_name()));
  }
  pending_caller_ = MakeCaller(s, scope);
  auto result = CallValue(fn, args);
  pending_caller_ = Value();
  if (!result.ok()) return At(call.pos, result.status());
  if (result->is_none() || result->is_undefined()) return Status::Ok();
  auto text = Display(*result);
  if (!text.ok()) return At(s.pos, text.status());
  return At(s.pos, Append(out, *text));
}

// ---- expressions ----

StatusOr<Value> Interpreter::Eval(const Expr& e, Scope* scope) {
  DepthGuard guard(this);
  if (guard.exceeded()) {
    return At(e.pos, ResourceExhausted("nesting deeper than {} levels (runaway recursion?)", options_.limits.max_depth));
  }
  auto r = EvalInner(e, scope);
  if (!r.ok()) return At(e.pos, r.status());
  return r;
}

StatusOr<Value> Interpreter::CallValue(const Value& fn, CallArgs& args) {
  if (!fn.is_callable()) return InvalidArgument("Cannot call something that is not a function: got {}", fn.kind_name());
  DepthGuard guard(this);
  if (guard.exceeded()) {
    return ResourceExhausted("calls nested deeper than {} levels (runaway recursion?)", options_.limits.max_depth);
  }
  return fn.callable().Call(*this, args);
}

Status Interpreter::EvalArgs(const std::vector<Arg>& args, Scope* scope, CallArgs* out) {
  for (const Arg& a : args) {
    KVS_ASSIGN_OR_RETURN(Value v, Eval(*a.value, scope));
    switch (a.kind) {
      case Arg::Kind::kPositional: out->positional.push_back(std::move(v)); break;
      case Arg::Kind::kSpread:
        if (!v.is_list()) return At(a.value->pos, InvalidArgument("Cannot unpack non-iterable type: {}", v.kind_name()));
        for (const Value& item : v.list()) out->positional.push_back(item);
        break;
      case Arg::Kind::kKeyword:
      case Arg::Kind::kKwSpread: {
        std::vector<std::pair<std::string, Value>> kws;
        if (a.kind == Arg::Kind::kKeyword) {
          kws.emplace_back(a.name, std::move(v));
        } else {
          if (!v.is_dict()) {
            return At(a.value->pos, InvalidArgument("Argument after ** must be a mapping, not {}", v.kind_name()));
          }
          for (const auto& [k, val] : v.dict().entries()) {
            if (!k.is_string()) return At(a.value->pos, InvalidArgument("keywords must be strings"));
            kws.emplace_back(k.str(), val);
          }
        }
        for (auto& [k, val] : kws) {
          if (out->Keyword(k)) return At(a.value->pos, InvalidArgument("Got multiple values for keyword argument '{}'", k));
          out->keyword.emplace_back(std::move(k), std::move(val));
        }
        break;
      }
    }
  }
  return Status::Ok();
}

StatusOr<Value> Interpreter::EvalInner(const Expr& e, Scope* scope) {
  switch (e.kind) {
    case ExprKind::kLiteral: return e.value;
    case ExprKind::kName: {
      const Value* v = scope->Lookup(e.name);
      return v ? *v : Value();
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      ListObj items;
      items.reserve(e.items.size());
      for (const ExprPtr& item : e.items) {
        KVS_ASSIGN_OR_RETURN(Value v, Eval(*item, scope));
        items.push_back(std::move(v));
      }
      return Value::List(std::move(items));
    }
    case ExprKind::kDict: {
      Value d = Value::Dict();
      for (size_t i = 0; i < e.keys.size(); ++i) {
        KVS_ASSIGN_OR_RETURN(Value k, Eval(*e.keys[i], scope));
        if (!k.is_string() && !k.is_int()) {
          return At(e.keys[i]->pos, InvalidArgument("Object keys must be strings: got {}", k.kind_name()));
        }
        KVS_ASSIGN_OR_RETURN(Value v, Eval(*e.items[i], scope));
        d.dict().Set(k, std::move(v));
      }
      return d;
    }
    case ExprKind::kMember: return EvalMember(e, scope);
    case ExprKind::kSlice: return EvalSlice(e, scope);
    case ExprKind::kCall: return EvalCall(e, scope);
    case ExprKind::kBinary: return EvalBinary(e, scope);
    case ExprKind::kUnary: return EvalUnary(e, scope);
    case ExprKind::kFilter: return EvalFilter(e, scope);
    case ExprKind::kTest: return EvalTest(e, scope);
    case ExprKind::kTernary: {
      KVS_ASSIGN_OR_RETURN(Value cond, Eval(*e.a, scope));
      return Eval(cond.Truthy() ? *e.b : *e.c, scope);
    }
    case ExprKind::kSelect: {
      KVS_ASSIGN_OR_RETURN(Value cond, Eval(*e.a, scope));
      if (!cond.Truthy()) return Value();
      return Eval(*e.b, scope);
    }
  }
  return Value();
}

StatusOr<Value> Interpreter::EvalMember(const Expr& e, Scope* scope) {
  KVS_ASSIGN_OR_RETURN(Value object, Eval(*e.a, scope));
  Value key;
  if (!e.items.empty()) {
    KVS_ASSIGN_OR_RETURN(key, Eval(*e.items[0], scope));
  } else {
    key = Value::String(e.name);
  }
  return GetMember(object, key);
}

namespace {

// Python slice semantics over n elements; returns the selected indices.
std::vector<int64_t> SliceIndices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const int64_t step = step_v.is_int() ? step_v.int_value() : 1;
  std::vector<int64_t> out;
  int64_t start, stop;
  if (step > 0) {
    start = start_v.is_int() ? start_v.int_value() : 0;
    stop = stop_v.is_int() ? stop_v.int_value() : n;
    start = start < 0 ? std::max<int64_t>(n + start, 0) : std::min(start, n);
    stop = stop < 0 ? std::max<int64_t>(n + stop, 0) : std::min(stop, n);
    for (int64_t i = start; i < stop; i += step) out.push_back(i);
  } else {
    start = start_v.is_int() ? start_v.int_value() : n - 1;
    stop = stop_v.is_int() ? stop_v.int_value() : -1;
    start = start < 0 ? std::max<int64_t>(n + start, -1) : std::min(start, n - 1);
    // An explicit stop of -1 means "before the last element", as in Python.
    if (stop_v.is_int()) stop = stop < 0 ? std::max<int64_t>(n + stop, -1) : std::min(stop, n - 1);
    for (int64_t i = start; i > stop; i += step) out.push_back(i);
  }
  return out;
}

}  // namespace

StatusOr<Value> Interpreter::EvalSlice(const Expr& e, Scope* scope) {
  KVS_ASSIGN_OR_RETURN(Value object, Eval(*e.a, scope));
  if (!object.is_list() && !object.is_string()) return InvalidArgument("Slice object must be an array or string");
  Value parts[3];
  const char* names[3] = {"start", "stop", "step"};
  for (int i = 0; i < 3; ++i) {
    if (!e.items[i]) continue;
    KVS_ASSIGN_OR_RETURN(parts[i], Eval(*e.items[i], scope));
    if (!parts[i].is_int() && !parts[i].is_undefined() && !parts[i].is_none()) {
      return InvalidArgument("Slice {} must be numeric or undefined", names[i]);
    }
    if (parts[i].is_none()) parts[i] = Value();
  }
  if (parts[2].is_int() && parts[2].int_value() == 0) return InvalidArgument("slice step cannot be zero");
  if (object.is_list()) {
    const ListObj& src = object.list();
    ListObj out;
    for (int64_t i : SliceIndices(static_cast<int64_t>(src.size()), parts[0], parts[1], parts[2])) out.push_back(src[i]);
    return Value::List(std::move(out));
  }
  const std::string& s = object.str();
  const std::vector<size_t> offsets = text::CodePointOffsets(s);
  const std::vector<int64_t> picked = SliceIndices(static_cast<int64_t>(offsets.size()) - 1, parts[0], parts[1], parts[2]);
  // A forward run of consecutive code points is one substring.
  if (!picked.empty() && (parts[2].is_undefined() || parts[2].int_value() == 1)) {
    return Value::String(s.substr(offsets[picked.front()], offsets[picked.back() + 1] - offsets[picked.front()]));
  }
  std::string out;
  for (int64_t i : picked) out.append(s, offsets[i], offsets[i + 1] - offsets[i]);
  return Value::String(std::move(out));
}

StatusOr<Value> Interpreter::EvalCall(const Expr& e, Scope* scope) {
  const Expr& callee = *e.a;
  // `obj.method(args)`: call string/list/dict methods without binding them.
  if (callee.kind == ExprKind::kMember && callee.items.empty()) {
    KVS_ASSIGN_OR_RETURN(Value self, Eval(*callee.a, scope));
    CallArgs args;
    KVS_RETURN_IF_ERROR(EvalArgs(e.args, scope, &args));
    const Value* data = self.is_object() ? self.dict().Find(callee.name) : nullptr;
    if (!data) {
      bool found = false;
      auto r = CallMethod(*this, self, callee.name, args, &found);
      if (found) return r;
    }
    KVS_ASSIGN_OR_RETURN(Value fn, GetMember(self, Value::String(callee.name)));
    return CallValue(fn, args);
  }
  KVS_ASSIGN_OR_RETURN(Value fn, Eval(callee, scope));
  CallArgs args;
  KVS_RETURN_IF_ERROR(EvalArgs(e.args, scope, &args));
  return CallValue(fn, args);
}

StatusOr<Value> Interpreter::EvalFilter(const Expr& e, Scope* scope) {
  KVS_ASSIGN_OR_RETURN(Value operand, Eval(*e.a, scope));
  CallArgs args;
  KVS_RETURN_IF_ERROR(EvalArgs(e.args, scope, &args));
  return ApplyFilter(e.name, operand, args, e.has_call);
}

StatusOr<Value> Interpreter::EvalTest(const Expr& e, Scope* scope) {
  KVS_ASSIGN_OR_RETURN(Value operand, Eval(*e.a, scope));
  CallArgs args;
  KVS_RETURN_IF_ERROR(EvalArgs(e.args, scope, &args));
  KVS_ASSIGN_OR_RETURN(bool result, ApplyTest(e.name, operand, args));
  return Value::Bool(e.negate ? !result : result);
}

StatusOr<Value> Interpreter::EvalUnary(const Expr& e, Scope* scope) {
  KVS_ASSIGN_OR_RETURN(Value v, Eval(*e.a, scope));
  if (e.unary_op == "not") return Value::Bool(!v.Truthy());
  const bool neg = e.unary_op == "-";
  if (v.is_float()) return Value::Float(neg ? -v.float_value() : v.float_value());
  if (v.is_int() || v.is_bool()) {
    const int64_t i = v.is_int() ? v.int_value() : int64_t{v.bool_value()};
    if (neg && i == std::numeric_limits<int64_t>::min()) return OutOfRange("integer overflow");
    return Value::Int(neg ? -i : i);
  }
  return InvalidArgument("Unknown operator \"{}\" for {}", e.unary_op, v.kind_name());
}

}  // namespace kvs::tmpl
