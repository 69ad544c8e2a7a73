#include "grammar/tool_call_scan.h"

#include <algorithm>

namespace kvs::grammar::internal {

size_t SafePrefixLength(std::string_view buf, const std::vector<std::string>& markers) {
  size_t hold = 0;
  for (const std::string& m : markers) {
    for (size_t k = std::min(m.size() - 1, buf.size()); k > hold; --k) {
      if (buf.substr(buf.size() - k) == std::string_view(m).substr(0, k)) {
        hold = k;
        break;
      }
    }
  }
  return buf.size() - hold;
}

size_t JsonValueScanner::Feed(std::string_view text) {
  size_t i = 0;
  for (; i < text.size() && !done_; ++i) {
    const char c = text[i];
    if (!started_) {
      started_ = true;
      if (c == '{' || c == '[') {
        depth_ = 1;
      } else if (c == '"') {
        in_string_ = true;
      } else {
        scalar_ = true;
      }
      continue;
    }
    if (scalar_) {
      const bool part = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '+' || c == '.' ||
                        c == 'E';
      if (!part) {
        done_ = true;
        return i;
      }
      continue;
    }
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 0) done_ = true;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) done_ = true;
    }
  }
  return i;
}

}  // namespace kvs::grammar::internal
