// Jinja parser: tokens -> Program.
//
// Grammar and operator precedence follow @huggingface/jinja (lowest first):
// `a if c else b` / `a if c`, or, and, not, comparisons and (not) in,
// + - ~, * / // %, **, `is` tests, `|` filters, unary sign, calls and
// member access, primaries. Statements: if/elif/else, for (with `if`
// filter, tuple targets and else), set (expression, namespace attribute,
// tuple, block form), macro, call blocks, filter blocks, break, continue.
// Anything else (include, extends, block, recursive loops, ...) is an error
// naming the construct and its line/column. Nesting is limited so hostile
// templates cannot exhaust the stack.
// Thread-safety: pure function.
#pragma once

#include <memory>
#include <vector>

#include "base/status.h"
#include "template/ast.h"
#include "template/lexer.h"

namespace kvs::tmpl {

// Deepest nesting of expressions and blocks the parser accepts.
inline constexpr int kMaxParseDepth = 100;

StatusOr<std::unique_ptr<Program>> Parse(std::vector<Token> tokens, const SourceMap& map);

}  // namespace kvs::tmpl
