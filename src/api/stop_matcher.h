// StopMatcher: finds stop strings in generated text that arrives in pieces
// (token by token), where a stop string may span any number of pieces.
//
// Text that could still turn out to be the start of a stop string is held
// back; everything before it is released. When a stop string completes, the
// text before it is released and the rest (the stop string and anything
// after it) is never emitted. At the end of generation Flush() releases what
// was held back.
//
// Which stop wins: the one that completes first in the text, as if it came
// one byte at a time (the longer of two that end at the same byte), so the
// result never depends on how the text was split into pieces.
//
// Invariant: released text never contains a stop string, and never ends
// with a proper prefix of one unless Flush() released it. Matching is on
// bytes; for valid UTF-8 stop strings and text this is matching on
// characters, and the held-back part always starts on a character boundary.
// Thread-safety: a value type, one per choice.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvs::api {

class StopMatcher {
 public:
  StopMatcher() = default;
  explicit StopMatcher(std::vector<std::string> stops);  // empty strings are ignored
  // Stop strings shared by every choice of a request (none empty): n
  // choices do not copy them n times.
  explicit StopMatcher(std::shared_ptr<const std::vector<std::string>> stops);

  struct Result {
    std::string released;  // safe to emit now
    bool stopped = false;  // a stop string completed; nothing more will be released
    std::string matched;   // which stop string
  };

  Result Push(std::string_view text);
  // End of generation without a stop string: what was held back.
  std::string Flush();

  bool stopped() const { return stopped_; }
  const std::string& held() const { return held_; }

 private:
  std::shared_ptr<const std::vector<std::string>> stops_;
  std::string held_;
  bool stopped_ = false;
};

}  // namespace kvs::api
