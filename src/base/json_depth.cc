#include "base/json_depth.h"

#include <algorithm>
#include <vector>

namespace kvs {

size_t JsonNestingDepth(std::string_view text, size_t stop_after) {
  size_t depth = 0, max_depth = 0;
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
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        max_depth = depth;
        if (max_depth > stop_after) return max_depth;
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

JsonMembers CountJsonObjectMembers(std::string_view text) {
  JsonMembers m;
  std::vector<size_t> colons;  // per open bracket: colons seen directly inside it
  size_t top_level = 0;        // colons outside any bracket (invalid JSON)
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
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      colons.push_back(0);
    } else if ((c == ']' || c == '}') && !colons.empty()) {
      colons.pop_back();
    } else if (c == ':') {
      size_t& n = colons.empty() ? top_level : colons.back();
      m.largest = std::max(m.largest, ++n);
      ++m.total;
    }
  }
  return m;
}

}  // namespace kvs
