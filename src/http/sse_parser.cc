#include "http/sse_parser.h"

namespace kvs::http {

std::vector<SseMessage> SseParser::Feed(std::string_view bytes) {
  std::vector<SseMessage> out;
  for (char c : bytes) {
    if (pending_cr_) {
      pending_cr_ = false;
      if (c == '\n') continue;
    }
    if (c == '\r' || c == '\n') {
      pending_cr_ = c == '\r';
      Line(buf_, out);
      buf_.clear();
    } else {
      buf_ += c;
    }
  }
  return out;
}

void SseParser::Line(std::string_view line, std::vector<SseMessage>& out) {
  if (line.empty()) {
    if (has_data_) out.push_back(std::move(cur_));
    cur_ = SseMessage();
    has_data_ = false;
    return;
  }
  if (line[0] == ':') return;  // comment
  const size_t colon = line.find(':');
  std::string_view field = line.substr(0, colon);
  std::string_view value;
  if (colon != std::string_view::npos) {
    value = line.substr(colon + 1);
    if (!value.empty() && value[0] == ' ') value.remove_prefix(1);
  }
  if (field == "data") {
    if (has_data_) cur_.data += '\n';
    cur_.data += value;
    has_data_ = true;
  } else if (field == "event") {
    cur_.event = std::string(value);
  } else if (field == "id") {
    cur_.id = std::string(value);
  }
}

}  // namespace kvs::http
