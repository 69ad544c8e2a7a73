// Syntax tree of a parsed Jinja template.
//
// Nodes are built once by the parser and never change afterwards; a parsed
// template may be rendered by many threads at once. Every node records the
// byte offset in the original source where it starts (for error messages).
// Literal strings keep a ready-made Value so rendering shares them instead of
// copying (their reference counts are atomic).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "template/value.h"

namespace kvs::tmpl {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind : uint8_t {
  kLiteral,     // value
  kName,        // name
  kList,        // items
  kTuple,       // items
  kDict,        // keys/items
  kMember,      // a.name (name) or a[b] (items[0] = b)
  kSlice,       // a[start:stop:step] (items: start, stop, step; null when absent)
  kCall,        // a(args)
  kBinary,      // a op b
  kUnary,       // op a ("not", "-", "+")
  kFilter,      // a | name(args)
  kTest,        // a is [not] name(args)
  kTernary,     // b if a else c  (a: condition, b: true branch, c: false branch)
  kSelect,      // b if a  (undefined when a is false)
};

enum class BinOp : uint8_t {
  kAnd, kOr, kEq, kNe, kLt, kGt, kLe, kGe, kIn, kNotIn,
  kAdd, kSub, kConcat, kMul, kDiv, kFloorDiv, kMod, kPow,
};

// One argument of a call or filter, or one parameter of a macro.
struct Arg {
  enum class Kind : uint8_t { kPositional, kKeyword, kSpread, kKwSpread } kind = Kind::kPositional;
  std::string name;  // kKeyword: the name; parameters: the parameter name
  ExprPtr value;     // parameters: the default (may be null)
};

struct Expr {
  ExprKind kind;
  uint32_t pos = 0;
  Value value;                 // kLiteral
  std::string name;            // kName, kMember (dot form), kFilter, kTest, kCall-less filter
  BinOp op = BinOp::kAnd;      // kBinary
  std::string unary_op;        // kUnary
  bool negate = false;         // kTest
  bool has_call = false;       // kFilter/kTest: written with parentheses or an argument
  ExprPtr a, b, c;             // operands (see ExprKind)
  std::vector<ExprPtr> items;  // kList/kTuple/kSlice/kMember(computed)
  std::vector<ExprPtr> keys;   // kDict
  std::vector<Arg> args;       // kCall/kFilter/kTest

  Expr(ExprKind k, uint32_t p) : kind(k), pos(p) {}
};

enum class StmtKind : uint8_t {
  kText,         // text
  kOutput,       // {{ expr }}
  kIf,           // if expr: body else alt
  kFor,          // for target in expr [if cond]: body else alt
  kSet,          // set target = expr | set target %}body{% endset
  kMacro,        // macro name(params): body
  kCallBlock,    // call(params) expr: body
  kFilterBlock,  // filter expr: body
  kBreak,
  kContinue,
};

struct Stmt {
  StmtKind kind;
  uint32_t pos = 0;
  std::shared_ptr<const std::string> text;  // kText
  ExprPtr expr;       // kOutput, kIf cond, kFor iterable, kSet value, kCallBlock call, kFilterBlock filter
  ExprPtr target;     // kFor/kSet target (name, tuple of names, or member for set)
  ExprPtr cond;       // kFor: the `if` filter
  std::string name;   // kMacro
  std::vector<Arg> params;  // kMacro, kCallBlock (caller's parameters)
  Body body, alt;

  // Macros and call blocks: which of caller/kwargs/varargs the body uses.
  bool uses_caller = false, uses_kwargs = false, uses_varargs = false;

  Stmt(StmtKind k, uint32_t p) : kind(k), pos(p) {}
};

struct Program {
  Body body;
};

}  // namespace kvs::tmpl
