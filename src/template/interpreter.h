// Jinja interpreter: renders a parsed Program against a context.
//
// An Interpreter is the state of one render: scopes, the output budget, the
// loop-iteration budget, the nesting depth and the clock for strftime_now.
// It is created per Render call and used by one thread; the Program it walks
// is shared and read-only.
//
// Scoping follows @huggingface/jinja (and Jinja2): `set` binds in the current
// scope; for loops and macro calls open a child scope; if/filter/set blocks do
// not. Macros close over the scope they were defined in.
//
// Errors name the construct and the line/column of the innermost expression
// or statement that failed ("template error at line L, column C: ...").
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "template/ast.h"
#include "template/lexer.h"
#include "template/value.h"

namespace kvs::tmpl {

struct RenderLimits {
  size_t max_output_bytes = size_t{64} << 20;  // rendered text, and any one string built
  uint64_t max_loop_iterations = 10'000'000;   // all loops of one render together
  size_t max_list_items = size_t{1} << 20;     // range() and list building
  int max_depth = 400;                         // nested evaluation (expressions, blocks, macro calls)
};

struct RenderOptions {
  // Seconds since the epoch for strftime_now (local time); the real clock when absent.
  bool has_fixed_now = false;
  int64_t fixed_now_unix = 0;
  RenderLimits limits;
};

// A set of variable bindings with a parent; owned by the Interpreter.
class Scope {
 public:
  explicit Scope(Scope* parent) : parent_(parent) {}
  // Innermost binding of name, or null.
  const Value* Lookup(std::string_view name) const;
  void Set(std::string_view name, Value v);
  Scope* parent() const { return parent_; }

 private:
  Scope* parent_;
  std::vector<std::pair<std::string, Value>> vars_;
};

class Interpreter {
 public:
  Interpreter(const SourceMap& map, const RenderOptions& options);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // The scope holding globals (range, namespace, ...) and the context.
  Scope* globals() { return globals_; }
  Status Render(const Program& program, std::string* out);

  // ---- used by builtins ----
  Scope* NewScope(Scope* parent);
  StatusOr<Value> Eval(const Expr& e, Scope* scope);
  Status ExecBody(const Body& body, Scope* scope, std::string* out);
  StatusOr<Value> CallValue(const Value& fn, CallArgs& args);
  // Filter `name` applied to v with args (used by the filter syntax, map and
  // filter blocks). `parens` tells whether the filter was written with ().
  StatusOr<Value> ApplyFilter(std::string_view name, const Value& v, CallArgs& args, bool parens);
  StatusOr<bool> ApplyTest(std::string_view name, const Value& v, const CallArgs& args);
  // Attribute or item `key` of `object` (member syntax).
  StatusOr<Value> GetMember(const Value& object, const Value& key);
  // Errors if a string or output of n bytes would exceed the limit.
  Status CheckSize(size_t n) const;
  Status CountIterations(uint64_t n);
  Status CheckListSize(size_t n) const;
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

  Status Exec(const Stmt& s, Scope* scope, std::string* out);
  Status ExecFor(const Stmt& s, Scope* scope, std::string* out);
  Status ExecSet(const Stmt& s, Scope* scope);
  Status ExecCallBlock(const Stmt& s, Scope* scope, std::string* out);
  Status Append(std::string* out, std::string_view text) const;
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
  std::deque<Scope> scopes_;
  Scope* globals_ = nullptr;
  std::vector<Value> tracked_;
  Value pending_caller_;
  Flow flow_ = Flow::kNormal;
  uint64_t iterations_ = 0;
  int depth_ = 0;
};

// Builds the macro value for a `{% macro %}` statement defined in `scope`.
Value MakeMacro(const Stmt& s, Scope* scope);
// Builds the `caller` of a call block evaluated in `scope`.
Value MakeCaller(const Stmt& s, Scope* scope);
// Registers the global functions (range, namespace, dict, raise_exception,
// strftime_now, ...) in `scope`.
void InstallGlobalFunctions(Scope* scope);
// Method `name` of a string, list or dict, bound to `self`; undefined if none.
Value BoundMethod(const Value& self, std::string_view name);
// Calls method `name` of `self` directly (the common `x.method(...)` form).
// Returns false in *found when `self` has no such method.
StatusOr<Value> CallMethod(Interpreter& in, const Value& self, std::string_view name, CallArgs& args, bool* found);

}  // namespace kvs::tmpl
