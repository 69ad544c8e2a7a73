// A parsed Jinja template: the public entry point of the interpreter.
//
//   KVS_ASSIGN_OR_RETURN(auto t, Template::Parse(source));
//   KVS_ASSIGN_OR_RETURN(std::string text, t.Render(context_json));
//
// Parse runs the lexer and parser once (trim_blocks and lstrip_blocks on by
// default, as transformers renders chat templates); syntax errors and
// unsupported constructs name the construct and the line/column. Render
// evaluates the tree against a JSON object whose members become variables;
// runtime errors (including raise_exception) and exceeded budgets
// (RenderOptions::limits) come back as a Status.
//
// Thread-safety: a Template is immutable after Parse and cheap to copy (the
// tree is shared); Render is const and may run on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "template/interpreter.h"
#include "template/lexer.h"

namespace kvs::tmpl {

struct Program;

// A rendered text and the byte ranges of it that came from content strings
// (the caller's data), sorted and disjoint.
struct RenderedText {
  std::string text;
  Spans content;
};

class Template {
 public:
  static StatusOr<Template> Parse(std::string source, const LexOptions& options = {});

  // `context` must be a JSON object (or null for no variables); its strings
  // count as template text.
  StatusOr<std::string> Render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

  // Renders with variables given as values (json.h's FromJson builds them,
  // marking the caller's strings as content) and reports which bytes of the
  // output came from content strings.
  using Variables = std::vector<std::pair<std::string, Value>>;
  StatusOr<RenderedText> RenderValues(Variables variables, const RenderOptions& options = {}) const;

  const std::string& source() const;

 private:
  struct Impl;
  explicit Template(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace kvs::tmpl
