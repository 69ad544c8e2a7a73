// Building text inside a render: the byte budgets every string is checked
// against, a builder that keeps content spans, and the ways a value prints
// (`{{ x }}`, `~`, `tojson`).
//
// Every byte a render creates goes through a TextOut, so no string is ever
// built past its budget first and checked afterwards: a list that shares
// itself 60 levels deep (2^60 leaves) stops printing at the limit.
// Thread-safety: one render's objects, used by its thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "template/spans.h"
#include "template/value.h"

namespace kvs::tmpl {

// The budgets of one render (RenderLimits) that text building needs: the
// size of any one string (or printed value), the total bytes of text and list
// storage created, and the deadline (read once per MiB created, so printing
// a huge value stops in time too).
class Budget {
 public:
  using Clock = std::chrono::steady_clock;
  Budget() = default;  // unlimited
  Budget(size_t max_string, size_t max_total) : max_string_(max_string), max_total_(max_total) {}
  // Sets the deadline; max_seconds is for the message.
  void SetDeadline(Clock::time_point deadline, double max_seconds) {
    deadline_ = deadline;
    max_seconds_ = max_seconds;
    has_deadline_ = true;
  }

  // ResourceExhausted when a string of n bytes would exceed the string limit.
  Status CheckString(size_t n) const;
  // Counts n more bytes created; ResourceExhausted past the total limit,
  // DeadlineExceeded past the deadline.
  Status Charge(size_t n);
  // DeadlineExceeded when the deadline has passed.
  Status CheckDeadline() const;
  // Both: a new string of n bytes.
  Status NewString(size_t n) {
    KVS_RETURN_IF_ERROR(CheckString(n));
    return Charge(n);
  }
  size_t total() const { return total_; }
  size_t max_string() const { return max_string_; }

 private:
  size_t max_string_ = SIZE_MAX;
  size_t max_total_ = SIZE_MAX;
  size_t total_ = 0;
  size_t next_clock_check_ = size_t{1} << 20;
  bool has_deadline_ = false;
  Clock::time_point deadline_;
  double max_seconds_ = 0;
};

// A string being built: bytes, their content spans, and the budget each
// append is charged to.
class TextOut {
 public:
  explicit TextOut(Budget* budget) : budget_(budget) {}

  Status Append(std::string_view text, bool content = false);
  Status AppendContent(std::string_view text) { return Append(text, true); }
  // A string value's bytes with their spans.
  Status Append(const StrData& s) { return AppendRange(s, 0, s.text.size()); }
  Status AppendRange(const StrData& s, size_t b, size_t e);
  // Marks [from, size()) as content.
  void MarkContent(size_t from) { AddSpan(&spans_, from, text_.size()); }

  size_t size() const { return text_.size(); }
  const std::string& text() const { return text_; }
  const Spans& spans() const { return spans_; }
  Budget* budget() const { return budget_; }
  // The string built so far as a Value; leaves *this empty.
  Value Take();
  std::string TakeText() { return std::exchange(text_, std::string()); }
  Spans TakeSpans() { return std::exchange(spans_, Spans()); }

 private:
  Budget* budget_;
  std::string text_;
  Spans spans_;
};

// A string Value of `text` with `spans`, charged to the budget.
StatusOr<Value> NewString(Budget* budget, std::string text, Spans spans = {});

// How a value prints in `{{ }}` output (the oracle's toString): floats keep a
// ".0", booleans print true/false, lists and dicts print as JSON with
// undefined members as `undefined`. Undefined and none print nothing.
// Callables are an error.
Status AppendDisplay(const Value& v, TextOut* out);

// JavaScript's String(x) of the underlying value, used by `~`, `+` and
// `join` (1.0 becomes "1", a list joins its items' Display with ",").
Status AppendRaw(const Value& v, TextOut* out);

struct JsonOptions {
  int indent = 0;                   // 0: single line
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool has_separators = false;
  std::string item_separator;       // when has_separators
  std::string key_separator;
  bool undefined_as_null = true;    // false prints `undefined` (Display)
};
// JSON text as @huggingface/jinja's tojson writes it (", " and ": " by
// default, "," and ": " with an indent, insertion order). A string with any
// content bytes is content as a whole once escaped.
Status AppendJson(const Value& v, const JsonOptions& opt, TextOut* out);

// Appends s as a JSON string literal (quotes included).
void AppendJsonString(std::string_view s, bool ensure_ascii, std::string* out);

// The bytes [b, e) of string v as a new string, with their spans.
StatusOr<Value> Substring(const Value& v, size_t b, size_t e, Budget* budget);
// A string rewritten from v byte by byte (case, escaping): all content if any
// byte of v was (ConservativeSpans).
StatusOr<Value> Rewritten(const Value& v, std::string text, Budget* budget);

// The Display / Raw text of v as a string Value (with spans).
StatusOr<Value> DisplayString(const Value& v, Budget* budget);
StatusOr<Value> RawStringValue(const Value& v, Budget* budget);

}  // namespace kvs::tmpl
