// Jinja lexer: template source -> tokens.
//
// Before tokenizing, the source goes through the same whitespace pass as
// @huggingface/jinja (and transformers' Jinja2 settings): one trailing
// newline is dropped; with lstrip_blocks, spaces and tabs before a `{%`, `{#`
// (or `{-`) at the start of a line are removed; with trim_blocks, the newline
// right after `%}`, `#}` (or `-}`) is removed; `{% generation %}` and
// `{% endgeneration %}` markers are dropped. `{%-`, `-%}`, `{{-`, `-}}`,
// `{#-`, `-#}` strip the neighbouring whitespace. `{% raw %}...{% endraw %}`
// yields its body as text.
//
// Every token records the byte offset in the *original* source where it
// starts, so errors can name a line and column.
// Thread-safety: pure functions; SourceMap is immutable after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kvs::tmpl {

enum class Tok : uint8_t {
  kText,
  kNumber,          // 1, 1.5, -3 (a sign is part of the literal after an operator)
  kString,          // value without quotes, escapes resolved
  kIdent,
  kEquals,          // =
  kLParen,
  kRParen,
  kOpenStmt,        // {%
  kCloseStmt,       // %}
  kOpenExpr,        // {{
  kCloseExpr,       // }}
  kLBracket,
  kRBracket,
  kLBrace,
  kRBrace,
  kComma,
  kDot,
  kColon,
  kPipe,
  kAdditive,        // + - ~
  kMultiplicative,  // * / // %
  kPower,           // **
  kCompare,         // < > <= >= == !=
  kUnary,           // a lone + or - before an operand
  kComment,
};
const char* TokName(Tok t);

struct Token {
  Tok type;
  std::string value;
  uint32_t pos;  // byte offset in the original source
};

// Translates original byte offsets to "line L, column C" (1-based, columns in
// code points).
class SourceMap {
 public:
  SourceMap() = default;
  explicit SourceMap(std::string source) : source_(std::move(source)) {}
  std::string Describe(uint32_t pos) const;
  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

struct LexOptions {
  bool trim_blocks = true;
  bool lstrip_blocks = true;
};

// Tokens of `source`; errors name the construct and its line/column.
StatusOr<std::vector<Token>> Tokenize(std::string_view source, const LexOptions& opt, const SourceMap& map);

}  // namespace kvs::tmpl
