// Server-sent events (text/event-stream) framing, as the WHATWG HTML spec
// defines it: an event is a block of "field: value" lines ended by an empty
// line; a payload with line breaks becomes several "data:" lines, which the
// client joins with "\n".
// The client side is SseParser (sse_parser.h).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

namespace kvs::http {

inline constexpr std::string_view kSseContentType = "text/event-stream";
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

// "data: <payload>\n\n" (one data line per payload line).
std::string SseData(std::string_view payload);
// "event: <event>\ndata: <payload>\n\n"; event must be one line.
std::string SseEvent(std::string_view event, std::string_view payload);
// ": <text>\n\n", ignored by clients (a keep-alive ping).
std::string SseComment(std::string_view text);

}  // namespace kvs::http
