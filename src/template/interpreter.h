// Jinja interpreter: renders a parsed Program against a context.
//
// An Interpreter is the state of one render: scopes, the budgets (bytes,
// iterations, nesting, wall clock) and the clock for strftime_now. It is
// created per Render call and used by one thread; the Program it walks is
// shared and read-only.
//
// Scoping follows @huggingface/jinja (and Jinja2): `set` binds in the current
// scope; for loops and macro calls open a child scope; if/filter/set blocks do
// not. Macros close over the scope they were defined in. Scopes are reference
// counted: a loop's or a call's scope is freed when it ends unless a macro or
// caller defined in it still refers to it. Reference cycles (a namespace
// holding itself, a macro stored in the scope it closes over) are broken
// when the render ends.
//
// Budgets (RenderLimits): every string, printed value and list is checked
// before it is built; loops and range() count iterations; the wall clock is
// read every few hundred steps of evaluation, including inside long built-in
// loops, so even a quadratic template stops at the deadline. Exceeding a
// budget fails the render with ResourceExhausted or DeadlineExceeded naming
// the budget.
//
// Errors name the construct and the line/column of the innermost expression
// or statement that failed ("template error at line L, column C: ...").
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "template/ast.h"
#include "template/lexer.h"
#include "template/text_out.h"
#include "template/value.h"

namespace kvs::tmpl {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // the rendered text, and any one string or printed value
  size_t max_total_bytes = size_t{256} << 20;  // all text and list storage one render creates, summed
  uint64_t max_loop_iterations = 10'000'000;   // loop iterations plus items made by range(), all loops together
  size_t max_list_items = size_t{1} << 20;     // any one list (range(), repetition, split, ...)
  int max_depth = 400;                         // nested evaluation (expressions, blocks, macro calls)
  double max_seconds = 1.0;                    // wall clock per render; <= 0: none
};

// What a render used (RenderOptions::stats), for tests and diagnostics.
struct RenderStats {
  uint64_t loop_iterations = 0;
  size_t total_bytes = 0;
  size_t peak_live_scopes = 0;
  double seconds = 0;
};

struct RenderOptions {
  // Seconds since the epoch for strftime_now (local time); the real clock when absent.
  bool has_fixed_now = false;
  int64_t fixed_now_unix = 0;
  RenderLimits limits;
  RenderStats* stats = nullptr;  // filled when set
};

class Interpreter;

// Live and peak number of scopes of one render (shared by its scopes, which
// may outlive the Interpreter inside values the caller owns).
struct ScopeCount {
  size_t live = 0, peak = 0;
};

// A set of variable bindings with a parent. Owned by shared pointers: the
// code running in it, its child scopes and the macros closing over it.
class Scope : public std::enable_shared_from_this<Scope> {
 public:
  Scope(std::shared_ptr<Scope> parent, std::shared_ptr<ScopeCount> count);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Innermost binding of name, or null.
  const Value* Lookup(std::string_view name) const;
  void Set(std::string_view name, Value v);
  void Clear();
  // Set once a macro or caller closes over this scope (see Interpreter::Capture).
  bool captured = false;

 private:
  std::shared_ptr<Scope> parent_;
  std::shared_ptr<ScopeCount> count_;
  std::vector<std::pair<std::string, Value>> vars_;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter(const SourceMap& map, const RenderOptions& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // The scope holding globals (range, namespace, ...) and the context.
  Scope* globals() { return globals_.get(); }
  // Renders the program into *out (text and content spans).
  Status Render(const Program& program, TextOut* out);

  // ---- used by builtins ----
  ScopePtr NewScope(Scope* parent);
  // Registers a scope a macro or caller closes over (for cycle breaking); such
  // a scope may live until the render ends, so it is charged to the budget.
  Status Capture(Scope* scope);
  StatusOr<Value> Eval(const Expr& e, Scope* scope);
  Status ExecBody(const Body& body, Scope* scope, TextOut* out);
  StatusOr<Value> CallValue(const Value& fn, CallArgs& args);
  // Filter `name` applied to v with args (used by the filter syntax, map and
  // filter blocks). `parens` tells whether the filter was written with ().
  StatusOr<Value> ApplyFilter(std::string_view name, const Value& v, CallArgs& args, bool parens);
  StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& args);
  // Attribute or item `key` of `object` (member syntax).
  StatusOr<Value> GetMember(const Value& object, const Value& key);

  // Budgets.
  Budget* budget() { return &budget_; }
  // A new empty text builder charged to this render.
  TextOut NewText() { return TextOut(&budget_); }
  StatusOr<Value> NewString(std::string text, Spans spans = {}) {
    return ::kvs::tmpl::NewString(&budget_, std::move(text), std::move(spans));
  }
  Status CountIterations(uint64_t n);
  // A list may grow to new_size items by adding `added` (the size limit;
  // the added storage is charged to the total).
  Status GrowList(size_t new_size, size_t added);
  // A new list of n items.
  Status CheckListSize(size_t n) { return GrowList(n, n); }
  // Counts n steps of work and reads the clock every few hundred.
  Status Tick(uint64_t n = 1) {
    ticks_ += n;
    if (ticks_ < next_clock_check_) return Status::Ok();
    return CheckClock();
  }
  // Registers a mutable container so that reference cycles (a namespace
  // holding itself) are broken when the render ends.
  void Track(const Value& container);
  const RenderOptions& options() const { return options_; }
  // The `caller` a call block hands to the macro it calls (consumed once).
  Value TakePendingCaller() { return std::exchange(pending_caller_, Value()); }
  // Prefixes the position of `pos` unless the error already has one.
  Status At(uint32_t pos, Status s) const;

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  struct DepthGuard;

  Status CheckClock();
  Status Exec(const Stmt& s, Scope* scope, TextOut* out);
  Status ExecFor(const Stmt& s, Scope* scope, TextOut* out);
  Status ExecSet(const Stmt& s, Scope* scope);
  Status ExecCallBlock(const Stmt& s, Scope* scope, TextOut* out);
  Status ExecFilterBlock(const Stmt& s, Scope* scope, TextOut* out);
  StatusOr<Value> EvalInner(const Expr& e, Scope* scope);
  StatusOr<Value> EvalBinary(const Expr& e, Scope* scope);
  StatusOr<Value> EvalUnary(const Expr& e, Scope* scope);
  StatusOr<Value> EvalMember(const Expr& e, Scope* scope);
  StatusOr<Value> EvalSlice(const Expr& e, Scope* scope);
  StatusOr<Value> EvalCall(const Expr& e, Scope* scope);
  StatusOr<Value> EvalFilter(const Expr& e, Scope* scope);
  StatusOr<Value> EvalTest(const Expr& e, Scope* scope);
  Status EvalArgs(const std::vector<Arg>& args, Scope* scope, CallArgs* out);
  void InstallGlobals();

  const SourceMap& map_;
  RenderOptions options_;
  Budget budget_;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point deadline_;
  bool has_deadline_ = false;
  uint64_t ticks_ = 0;
  uint64_t next_clock_check_ = 0;
  ScopePtr globals_;
  std::shared_ptr<ScopeCount> scope_count_;
  std::vector<std::weak_ptr<Scope>> captured_;
  std::vector<std::pair<Kind, std::weak_ptr<void>>> tracked_;
  Value pending_caller_;
  Flow flow_ = Flow::kNormal;
  uint64_t iterations_ = 0;
  int depth_ = 0;
};

// Builds the macro value for a `{% macro %}` statement defined in `scope`.
StatusOr<Value> MakeMacro(Interpreter& in, const Stmt& s, Scope* scope);
// Builds the `caller` of a call block evaluated in `scope`.
StatusOr<Value> MakeCaller(Interpreter& in, const Stmt& s, Scope* scope);
// Registers the global functions (range, namespace, dict, raise_exception,
// strftime_now, ...) in `scope`.
void InstallGlobalFunctions(Scope* scope);
// Method `name` of a string, list or dict, bound to `self`; undefined if none.
Value BoundMethod(const Value& self, std::string_view name);
// Python's v.replace(from, to, count) on strings, keeping content spans.
StatusOr<Value> ReplaceString(Interpreter& in, const Value& v, const Value& from, const Value& to, long count);
// Sorts *items stably by key(item), ordered by Compare (optionally
// case-insensitive; descending when reverse): the order of the sort filter
// and of dictsort. Each comparison ticks the render budget; the first error
// (the budget, or two keys that do not compare) ends the sort and is returned.
Status SortValues(Interpreter& in, ListObj* items, bool reverse, bool case_sensitive,
                  const std::function<Value(const Value&)>& key);
// Calls method `name` of `self` directly (the common `x.method(...)` form).
// Returns false in *found when `self` has no such method.
StatusOr<Value> CallMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args, bool* found);

}  // namespace kvs::tmpl
