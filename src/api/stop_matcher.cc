#include "api/stop_matcher.h"

#include <algorithm>

namespace kvs::api {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  std::erase_if(stops, [](const std::string& s) { return s.empty(); });
  stops_ = std::make_shared<const std::vector<std::string>>(std::move(stops));
}

StopMatcher::StopMatcher(std::shared_ptr<const std::vector<std::string>> stops) : stops_(std::move(stops)) {}

StopMatcher::Result StopMatcher::Push(std::string_view text) {
  Result r;
  if (stopped_) {
    r.stopped = true;
    return r;
  }
  if (!stops_ || stops_->empty()) {
    r.released = std::string(text);
    return r;
  }
  held_ += text;
  // The stop string that completes first, as if the text came one byte at a
  // time (so the result does not depend on how the text was split); of two
  // ending at the same byte, the longer. A string's first occurrence is also
  // the one that ends first.
  size_t best = std::string::npos, best_end = std::string::npos;
  const std::string* which = nullptr;
  for (const auto& s : *stops_) {
    const size_t pos = held_.find(s);
    if (pos == std::string::npos) continue;
    const size_t end = pos + s.size();
    if (end < best_end || (end == best_end && pos < best)) {
      best = pos;
      best_end = end;
      which = &s;
    }
  }
  if (which) {
    r.released = held_.substr(0, best);
    r.stopped = true;
    r.matched = *which;
    held_.clear();
    stopped_ = true;
    return r;
  }
  // Hold back the longest suffix of held_ that is a proper prefix of a stop.
  size_t keep = 0;
  for (const auto& s : *stops_) {
    if (s.empty()) continue;
    const size_t max_len = std::min(s.size() - 1, held_.size());
    for (size_t len = max_len; len > keep; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep = len;
        break;
      }
    }
  }
  r.released = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return r;
}

std::string StopMatcher::Flush() {
  if (stopped_) return {};
  std::string out = std::move(held_);
  held_.clear();
  return out;
}

}  // namespace kvs::api
