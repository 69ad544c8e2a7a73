// Content spans: which bytes of a string came from the caller's data
// (message content, tool arguments, ...) rather than from the template's own
// text. The renderer carries them through every string operation so that the
// prompt can be tokenized with special-token parsing for template text only
// (chat_render.h).
//
// A Spans is sorted, disjoint, with no empty and no touching spans (touching
// ones are merged). Operations that keep bytes (concatenation, substrings,
// replace, strip, split, indent, ...) keep their spans exactly; operations
// that rewrite bytes (upper, title, escape, ...) mark the whole result as
// content when any input byte was (ConservativeSpans): when in doubt, text
// is the caller's.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstddef>
#include <vector>

namespace kvs::tmpl {

struct Span {
  size_t b = 0, e = 0;  // [b, e)
  bool operator==(const Span&) const = default;
};
using Spans = std::vector<Span>;

// Adds [b, e) at the end of *s (REQUIRES: b >= the end of the last span).
void AddSpan(Spans* s, size_t b, size_t e);
// Appends src shifted by `offset` (REQUIRES: offset >= the end of *dst's last span).
void AppendSpans(Spans* dst, const Spans& src, size_t offset);
// The spans of the substring [b, e), relative to b.
Spans SliceSpans(const Spans& s, size_t b, size_t e);
// Whether any byte of [b, e) is content.
bool AnyContent(const Spans& s, size_t b, size_t e);
// {[0, size)} when `src` has any span and size > 0, else none: the spans of
// a string rewritten from one with spans `src`.
Spans ConservativeSpans(const Spans& src, size_t size);

}  // namespace kvs::tmpl
