#include "base/json_depth.h"

#include <algorithm>
#include <vector>

namespace kvs {
namespace {

// Calls f(c) for every character of text outside JSON strings (escapes
// honoured; the quotes themselves are not passed); stops when f returns false.
template <typename F>
void ForEachOutsideStrings(std::string_view text, F&& f) {
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (!f(c)) {
      return;
    }
  }
}

}  // namespace

size_t JsonNestingDepth(std::string_view text, size_t stop_after) {
  size_t depth = 0, max_depth = 0;
  ForEachOutsideStrings(text, [&](char c) {
    if (c == '[' || c == '{') {
      if (++depth > max_depth) max_depth = depth;
      return max_depth <= stop_after;
    }
    if ((c == ']' || c == '}') && depth > 0) --depth;
    return true;
  });
  return max_depth;
}

JsonMembers CountJsonObjectMembers(std::string_view text) {
  JsonMembers m;
  std::vector<size_t> colons;  // per open bracket: colons seen directly inside it
  size_t top_level = 0;        // colons outside any bracket (invalid JSON)
  ForEachOutsideStrings(text, [&](char c) {
    if (c == '[' || c == '{') {
      colons.push_back(0);
    } else if ((c == ']' || c == '}') && !colons.empty()) {
      colons.pop_back();
    } else if (c == ':') {
      size_t& n = colons.empty() ? top_level : colons.back();
      m.largest = std::max(m.largest, ++n);
      ++m.total;
    }
    return true;
  });
  return m;
}

JsonElements CountJsonArrayElements(std::string_view text) {
  JsonElements e;
  struct Open {
    bool array;
    size_t elements;  // commas + 1 once anything but white space was seen
    bool any;
  };
  std::vector<Open> open;
  auto close = [&] {
    const Open& o = open.back();
    // (A string is not seen here: ["a"] counts 0, ["a","b"] counts 2.)
    if (o.array && (o.any || o.elements > 0)) {
      e.largest = std::max(e.largest, o.elements + 1);
      e.total += o.elements + 1;
    }
    open.pop_back();
  };
  ForEachOutsideStrings(text, [&](char c) {
    if (!open.empty() && c != ' ' && c != '\n' && c != '\r' && c != '\t' && c != ']' && c != '}') open.back().any = true;
    if (c == '[' || c == '{') {
      open.push_back({c == '[', 0, false});
    } else if ((c == ']' || c == '}') && !open.empty()) {
      close();
    } else if (c == ',' && !open.empty() && open.back().array) {
      ++open.back().elements;
    }
    return true;
  });
  while (!open.empty()) close();  // unterminated: still a bound
  return e;
}

}  // namespace kvs
