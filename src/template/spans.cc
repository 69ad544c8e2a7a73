#include "template/spans.h"

#include <algorithm>

namespace kvs::tmpl {

void AddSpan(Spans* s, size_t b, size_t e) {
  if (b >= e) return;
  if (!s->empty() && s->back().e == b) {
    s->back().e = e;
  } else {
    s->push_back(Span{b, e});
  }
}

void AppendSpans(Spans* dst, const Spans& src, size_t offset) {
  for (const Span& x : src) AddSpan(dst, x.b + offset, x.e + offset);
}

Spans SliceSpans(const Spans& s, size_t b, size_t e) {
  Spans out;
  // First span that ends after b.
  auto it = std::upper_bound(s.begin(), s.end(), b, [](size_t pos, const Span& x) { return pos < x.e; });
  for (; it != s.end() && it->b < e; ++it) AddSpan(&out, std::max(it->b, b) - b, std::min(it->e, e) - b);
  return out;
}

bool AnyContent(const Spans& s, size_t b, size_t e) {
  if (b >= e) return false;
  auto it = std::upper_bound(s.begin(), s.end(), b, [](size_t pos, const Span& x) { return pos < x.e; });
  return it != s.end() && it->b < e;
}

Spans ConservativeSpans(const Spans& src, size_t size) {
  if (src.empty() || size == 0) return {};
  return Spans{Span{0, size}};
}

}  // namespace kvs::tmpl
