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

JsonCounts CountJsonContainers(std::string_view text) {
  JsonCounts c;
  struct Open {
    bool array;
    size_t colons = 0;  // directly inside it
    size_t commas = 0;  // directly inside it (arrays: elements - 1)
    bool any = false;   // anything but white space seen inside
  };
  std::vector<Open> open;
  size_t top_level_colons = 0;  // outside any bracket (invalid JSON)
  auto close = [&] {
    const Open& o = open.back();
    // (A string is not seen here: ["a"] counts 0, ["a","b"] counts 2.)
    if (o.array && (o.any || o.commas > 0)) {
      c.elements.largest = std::max(c.elements.largest, o.commas + 1);
      c.elements.total += o.commas + 1;
    }
    open.pop_back();
  };
  ForEachOutsideStrings(text, [&](char ch) {
    if (!open.empty() && ch != ' ' && ch != '\n' && ch != '\r' && ch != '\t' && ch != ']' && ch != '}') {
      open.back().any = true;
    }
    if (ch == '[' || ch == '{') {
      open.push_back({ch == '['});
    } else if ((ch == ']' || ch == '}') && !open.empty()) {
      close();
    } else if (ch == ':') {
      size_t& n = open.empty() ? top_level_colons : open.back().colons;
      c.members.largest = std::max(c.members.largest, ++n);
      ++c.members.total;
    } else if (ch == ',' && !open.empty() && open.back().array) {
      ++open.back().commas;
    }
    return true;
  });
  while (!open.empty()) close();  // unterminated: still a bound
  return c;
}

JsonMembers CountJsonObjectMembers(std::string_view text) { return CountJsonContainers(text).members; }

JsonElements CountJsonArrayElements(std::string_view text) { return CountJsonContainers(text).elements; }

}  // namespace kvs
