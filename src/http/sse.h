// Server-sent events (text/event-stream) framing, as the WHATWG HTML spec
// defines it: an event is a block of "field: value" lines ended by an empty
// line; a payload with line breaks becomes several "data:" lines, which the
// client joins with "\n".
//
// SseParser is the client side (tests and tools): it accepts bytes in
// arbitrary pieces and returns complete events.
// Thread-safety: free functions are pure; SseParser is a value type.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kvs::http {

inline constexpr std::string_view kSseContentType = "text/event-stream";
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// "data: <payload>\n\n" (one data line per payload line).
std::string SseData(std::string_view payload);
// "event: <event>\ndata: <payload>\n\n"; event must be one line.
std::string SseEvent(std::string_view event, std::string_view payload);
// ": <text>\n\n", ignored by clients (a keep-alive ping).
std::string SseComment(std::string_view text);

struct SseMessage {
  std::string event;  // "" when the event had no event field
  std::string data;   // data lines joined with "\n"
  std::string id;
};

class SseParser {
 public:
  // Feeds bytes; returns the events they complete.
  std::vector<SseMessage> Feed(std::string_view bytes);

 private:
  void Line(std::string_view line, std::vector<SseMessage>& out);

  std::string buf_;
  bool pending_cr_ = false;  // the last byte was \r: a following \n belongs to it
  SseMessage cur_;
  bool has_data_ = false;
};

}  // namespace kvs::http
