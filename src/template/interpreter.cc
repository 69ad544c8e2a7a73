#include "template/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "template/text.h"

namespace kvs::tmpl {

// ---- Scope ----

Scope::Scope(std::shared_ptr<Scope> parent, std::shared_ptr<ScopeCount> count)
    : parent_(std::move(parent)), count_(std::move(count)) {
  if (count_) count_->peak = std::max(count_->peak, ++count_->live);
}

Scope::~Scope() {
  if (count_) --count_->live;
  // A chain of scopes and closures may be long: release it iteratively.
  for (auto& [k, v] : vars_) BuryPayload(v);
  BuryPointer(std::move(parent_));
  DrainBuried();
}

const Value* Scope::Lookup(std::string_view name) const {
  for (const Scope* s = this; s; s = s->parent_.get()) {
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

void Scope::Clear() {
  std::vector<std::pair<std::string, Value>> dropped;
  dropped.swap(vars_);
  for (auto& [k, v] : dropped) BuryPayload(v);
  dropped.clear();
  DrainBuried();
}

// ---- Interpreter ----

namespace {
// Steps of evaluation between two reads of the clock.
constexpr uint64_t kClockEvery = 256;
}  // namespace

struct Interpreter::DepthGuard {
  explicit DepthGuard(Interpreter* in) : in_(in) { ++in_->depth_; }
  ~DepthGuard() { --in_->depth_; }
  bool exceeded() const { return in_->depth_ > in_->options_.limits.max_depth; }
  Interpreter* in_;
};

Interpreter::Interpreter(const SourceMap& map, const RenderOptions& options)
    : map_(map),
      options_(options),
      budget_(options.limits.max_output_bytes, options.limits.max_total_bytes),
      start_(std::chrono::steady_clock::now()),
      scope_count_(std::make_shared<ScopeCount>()) {
  if (options_.limits.max_seconds > 0) {
    has_deadline_ = true;
    deadline_ = start_ + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                             std::chrono::duration<double>(std::min(options_.limits.max_seconds, 1e9)));
    budget_.SetDeadline(deadline_, options_.limits.max_seconds);
  }
  next_clock_check_ = kClockEvery;
  globals_ = std::make_shared<Scope>(nullptr, scope_count_);
  InstallGlobals();
}

Interpreter::~Interpreter() {
  pending_caller_ = Value();
  // Reference cycles: a macro kept in the scope it closes over, a namespace
  // holding itself. Emptying what can take part in one lets every count
  // reach zero.
  for (auto& weak : captured_) {
    if (ScopePtr s = weak.lock()) s->Clear();
  }
  for (auto& [kind, weak] : tracked_) {
    std::shared_ptr<void> p = weak.lock();
    if (!p) continue;
    if (kind == Kind::kList) {
      ListObj dropped;
      dropped.swap(static_cast<ListHolder*>(p.get())->items);
      for (Value& v : dropped) BuryPayload(v);
      dropped.clear();
      DrainBuried();
    } else {
      static_cast<DictObj*>(p.get())->Clear();
    }
  }
  globals_->Clear();
}

ScopePtr Interpreter::NewScope(Scope* parent) {
  return std::make_shared<Scope>(parent ? parent->shared_from_this() : nullptr, scope_count_);
}

Status Interpreter::Capture(Scope* scope) {
  if (scope->captured) return Status::Ok();
  scope->captured = true;
  captured_.push_back(scope->weak_from_this());
  return budget_.Charge(sizeof(Scope) + 4 * sizeof(Value));
}

void Interpreter::InstallGlobals() {
  globals_->Set("true", Value::Bool(true));
  globals_->Set("false", Value::Bool(false));
  globals_->Set("none", Value::None());
  globals_->Set("True", Value::Bool(true));
  globals_->Set("False", Value::Bool(false));
  globals_->Set("None", Value::None());
  InstallGlobalFunctions(globals_.get());
}

void Interpreter::Track(const Value& container) {
  if (!container.is_container() || container.MarkTracked()) return;
  tracked_.emplace_back(container.is_list() ? Kind::kList : Kind::kDict, container.weak());
}

Status Interpreter::At(uint32_t pos, Status s) const {
  if (s.ok() || s.message().rfind("template ", 0) == 0) return s;
  return Status(s.code(), fmt::format("template error at {}: {}", map_.Describe(pos), s.message()));
}

Status Interpreter::GrowList(size_t new_size, size_t added) {
  if (new_size > options_.limits.max_list_items) {
    return ResourceExhausted("a list of {} items exceeds the limit of {}", new_size, options_.limits.max_list_items);
  }
  KVS_RETURN_IF_ERROR(budget_.Charge(added * sizeof(Value)));
  return Tick(added / 64);
}

Status Interpreter::CountIterations(uint64_t n) {
  iterations_ += n;
  if (iterations_ > options_.limits.max_loop_iterations) {
    return ResourceExhausted("loops and range() ran more than {} iterations", options_.limits.max_loop_iterations);
  }
  return Tick(n);
}

Status Interpreter::CheckClock() {
  next_clock_check_ = ticks_ + kClockEvery;
  return budget_.CheckDeadline();
}

Status Interpreter::Render(const Program& program, TextOut* out) {
  Status s = ExecBody(program.body, globals_.get(), out);
  if (RenderStats* st = options_.stats) {
    st->loop_iterations = iterations_;
    st->total_bytes = budget_.total();
    st->peak_live_scopes = scope_count_->peak;
    st->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  return s;
}

Status Interpreter::ExecBody(const Body& body, Scope* scope, TextOut* out) {
  for (const StmtPtr& s : body) {
    KVS_RETURN_IF_ERROR(Exec(*s, scope, out));
    if (flow_ != Flow::kNormal) break;
  }
  return Status::Ok();
}

Status Interpreter::Exec(const Stmt& s, Scope* scope, TextOut* out) {
  DepthGuard guard(this);
  if (guard.exceeded()) {
    return At(s.pos, ResourceExhausted("nesting deeper than {} levels (runaway recursion?)", options_.limits.max_depth));
  }
  KVS_RETURN_IF_ERROR(At(s.pos, Tick()));
  switch (s.kind) {
    case StmtKind::kText: return At(s.pos, out->Append(*s.text));
    case StmtKind::kOutput: {
      KVS_ASSIGN_OR_RETURN(Value v, Eval(*s.expr, scope));
      return At(s.pos, AppendDisplay(v, out));
    }
    case StmtKind::kIf: {
      KVS_ASSIGN_OR_RETURN(Value cond, Eval(*s.expr, scope));
      return ExecBody(cond.Truthy() ? s.body : s.alt, scope, out);
    }
    case StmtKind::kFor: return ExecFor(s, scope, out);
    case StmtKind::kSet: return ExecSet(s, scope);
    case StmtKind::kMacro: {
      KVS_ASSIGN_OR_RETURN(Value macro, MakeMacro(*this, s, scope));
      scope->Set(s.name, std::move(macro));
      return Status::Ok();
    }
    case StmtKind::kCallBlock: return ExecCallBlock(s, scope, out);
    case StmtKind::kFilterBlock: return ExecFilterBlock(s, scope, out);
    case StmtKind::kBreak: flow_ = Flow::kBreak; return Status::Ok();
    case StmtKind::kContinue: flow_ = Flow::kContinue; return Status::Ok();
  }
  return Status::Ok();
}

Status Interpreter::ExecFilterBlock(const Stmt& s, Scope* scope, TextOut* out) {
  TextOut body = NewText();
  KVS_RETURN_IF_ERROR(ExecBody(s.body, scope, &body));
  // The filter chain's innermost operand is the rendered body.
  std::vector<const Expr*> chain;
  for (const Expr* f = s.expr.get(); f; f = f->a.get()) chain.push_back(f);
  Value v = body.Take();
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    CallArgs args;
    KVS_RETURN_IF_ERROR(EvalArgs((*it)->args, scope, &args));
    auto r = ApplyFilter((*it)->name, v, args, (*it)->has_call);
    if (!r.ok()) return At((*it)->pos, r.status());
    v = std::move(r).value();
  }
  return At(s.pos, AppendDisplay(v, out));
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

Status Interpreter::ExecFor(const Stmt& s, Scope* scope, TextOut* out) {
  ScopePtr loop_scope = NewScope(scope);
  KVS_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr, loop_scope.get()));
  std::vector<Value> candidates;
  switch (iterable.kind()) {
    case Kind::kList:
      KVS_RETURN_IF_ERROR(At(s.expr->pos, CheckListSize(iterable.list().size())));
      candidates = iterable.list();
      break;
    case Kind::kDict:
      KVS_RETURN_IF_ERROR(At(s.expr->pos, CheckListSize(iterable.dict().size())));
      for (const auto& [k, v] : iterable.dict().entries()) candidates.push_back(k);
      break;
    case Kind::kString: {
      CallArgs none;
      KVS_ASSIGN_OR_RETURN(Value chars, ApplyFilter("list", iterable, none, false));
      candidates = std::move(chars.list());
      break;
    }
    case Kind::kUndefined: break;  // Jinja2 iterates undefined as empty
    default:
      return At(s.expr->pos,
                InvalidArgument("Expected iterable or object type in for loop: got {}", iterable.kind_name()));
  }
  std::vector<Value> items;
  if (s.target->kind == ExprKind::kName && !s.cond) {
    items = std::move(candidates);
  } else {
    ScopePtr test_scope = NewScope(loop_scope.get());
    for (Value& c : candidates) {
      KVS_RETURN_IF_ERROR(At(s.pos, CountIterations(1)));
      KVS_RETURN_IF_ERROR(At(s.target->pos, BindTarget(*s.target, c, test_scope.get(), "")));
      if (s.cond) {
        KVS_ASSIGN_OR_RETURN(Value keep, Eval(*s.cond, test_scope.get()));
        if (!keep.Truthy()) continue;
      }
      items.push_back(std::move(c));
    }
  }
  if (items.empty()) return ExecBody(s.alt, loop_scope.get(), out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    KVS_RETURN_IF_ERROR(At(s.pos, CountIterations(1)));
    // The keys are made once (immutable strings may be shared between threads).
    static const Value kKeys[] = {Value::String("index"),    Value::String("index0"), Value::String("revindex"),
                                  Value::String("revindex0"), Value::String("first"),  Value::String("last"),
                                  Value::String("length"),   Value::String("previtem"), Value::String("nextitem")};
    Value loop = Value::Dict();
    DictObj& d = loop.dict();
    d.is_loop = true;
    d.Reserve(std::size(kKeys));
    d.Set(kKeys[0], Value::Int(i + 1));
    d.Set(kKeys[1], Value::Int(i));
    d.Set(kKeys[2], Value::Int(n - i));
    d.Set(kKeys[3], Value::Int(n - i - 1));
    d.Set(kKeys[4], Value::Bool(i == 0));
    d.Set(kKeys[5], Value::Bool(i == n - 1));
    d.Set(kKeys[6], Value::Int(n));
    d.Set(kKeys[7], i > 0 ? items[i - 1] : Value());
    d.Set(kKeys[8], i + 1 < n ? items[i + 1] : Value());
    loop_scope->Set("loop", std::move(loop));
    KVS_RETURN_IF_ERROR(At(s.target->pos, BindTarget(*s.target, items[i], loop_scope.get(), "")));
    KVS_RETURN_IF_ERROR(ExecBody(s.body, loop_scope.get(), out));
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
    TextOut body = NewText();
    KVS_RETURN_IF_ERROR(ExecBody(s.body, scope, &body));
    rhs = body.Take();
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

Status Interpreter::ExecCallBlock(const Stmt& s, Scope* scope, TextOut* out) {
  const Expr& call = *s.expr;
  KVS_ASSIGN_OR_RETURN(Value fn, Eval(*call.a, scope));
  CallArgs args;
  KVS_RETURN_IF_ERROR(EvalArgs(call.args, scope, &args));
  if (!fn.is_callable()) {
    return At(call.pos, InvalidArgument("Cannot call something that is not a function: got {}", fn.kind_name()));
  }
  KVS_ASSIGN_OR_RETURN(pending_caller_, MakeCaller(*this, s, scope));
  auto result = CallValue(fn, args);
  pending_caller_ = Value();
  if (!result.ok()) return At(call.pos, result.status());
  return At(s.pos, AppendDisplay(*result, out));
}

// ---- expressions ----

StatusOr<Value> Interpreter::Eval(const Expr& e, Scope* scope) {
  DepthGuard guard(this);
  if (guard.exceeded()) {
    return At(e.pos, ResourceExhausted("nesting deeper than {} levels (runaway recursion?)", options_.limits.max_depth));
  }
  KVS_RETURN_IF_ERROR(At(e.pos, Tick()));
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
        KVS_RETURN_IF_ERROR(At(a.value->pos, GrowList(out->positional.size() + v.list().size(), v.list().size())));
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
          // The duplicate check is linear: count it, so `f(**huge)` meets the deadline.
          KVS_RETURN_IF_ERROR(At(a.value->pos, Tick(out->keyword.size() / 16)));
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
      KVS_RETURN_IF_ERROR(CheckListSize(e.items.size()));
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

// Python's slice semantics over n elements: the selected indices, in order.
// The arithmetic is 128-bit, so no start, stop or step can overflow.
std::vector<int64_t> SliceIndices(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v) {
  const __int128 step = step_v.is_int() ? step_v.int_value() : 1;
  std::vector<int64_t> out;
  __int128 start, stop;
  if (step > 0) {
    start = start_v.is_int() ? start_v.int_value() : 0;
    stop = stop_v.is_int() ? stop_v.int_value() : n;
    start = start < 0 ? std::max<__int128>(start + n, 0) : std::min<__int128>(start, n);
    stop = stop < 0 ? std::max<__int128>(stop + n, 0) : std::min<__int128>(stop, n);
    for (__int128 i = start; i < stop; i += step) out.push_back(static_cast<int64_t>(i));
  } else {
    start = start_v.is_int() ? start_v.int_value() : n - 1;
    start = start < 0 ? std::max<__int128>(start + n, -1) : std::min<__int128>(start, n - 1);
    // An explicit negative stop counts from the end; an absent one is "before 0".
    stop = -1;
    if (stop_v.is_int()) {
      stop = stop_v.int_value();
      stop = stop < 0 ? std::max<__int128>(stop + n, -1) : std::min<__int128>(stop, n - 1);
    }
    for (__int128 i = start; i > stop; i += step) out.push_back(static_cast<int64_t>(i));
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
    const std::vector<int64_t> picked = SliceIndices(static_cast<int64_t>(src.size()), parts[0], parts[1], parts[2]);
    KVS_RETURN_IF_ERROR(CheckListSize(picked.size()));
    ListObj out;
    out.reserve(picked.size());
    for (int64_t i : picked) out.push_back(src[static_cast<size_t>(i)]);
    return Value::List(std::move(out));
  }
  const StrData& s = object.str_data();
  const size_t n = text::CodePointCount(s.text);
  if (parts[2].is_undefined() || parts[2].int_value() == 1) {
    // A forward run of consecutive code points is one substring.
    const std::vector<int64_t> ends = SliceIndices(static_cast<int64_t>(n), parts[0], parts[1], Value());
    if (ends.empty()) return Value::String("");
    const size_t b = text::ByteOffset(s.text, static_cast<size_t>(ends.front()));
    const size_t end = text::ByteOffset(s.text, static_cast<size_t>(ends.back()) + 1);
    TextOut out = NewText();
    KVS_RETURN_IF_ERROR(out.AppendRange(s, b, end));
    return out.Take();
  }
  // Other steps pick code points one by one: index every code point first.
  KVS_RETURN_IF_ERROR(budget_.Charge((n + 1) * sizeof(size_t)));
  const std::vector<size_t> offsets = text::CodePointOffsets(s.text);
  TextOut out = NewText();
  for (int64_t i : SliceIndices(static_cast<int64_t>(n), parts[0], parts[1], parts[2])) {
    KVS_RETURN_IF_ERROR(out.AppendRange(s, offsets[static_cast<size_t>(i)], offsets[static_cast<size_t>(i) + 1]));
  }
  return out.Take();
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
