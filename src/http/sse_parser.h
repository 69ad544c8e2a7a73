// SseParser: the client side of server-sent events (the gateway reading a
// replica's stream, the benchmark tools, tests): accepts bytes in arbitrary
// pieces and returns complete events, as the WHATWG HTML spec parses them.
// Thread-safety: a value type.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "http/sse.h"

namespace kvs::http {

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
