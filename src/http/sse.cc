#include "http/sse.h"

namespace kvs::http {

namespace {

// Appends "<field>: <line>\n" for each line of value (\n, \r\n or \r breaks).
void AppendField(std::string& out, std::string_view field, std::string_view value) {
  size_t start = 0;
  for (;;) {
    size_t end = value.find_first_of("\r\n", start);
    out += field;
    out += ": ";
    out += value.substr(start, end == std::string_view::npos ? std::string_view::npos : end - start);
    out += '\n';
    if (end == std::string_view::npos) return;
    start = end + 1;
    if (value[end] == '\r' && start < value.size() && value[start] == '\n') ++start;
  }
}

}  // namespace

std::string SseData(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 8);
  AppendField(out, "data", payload);
  out += '\n';
  return out;
}

std::string SseEvent(std::string_view event, std::string_view payload) {
  std::string out;
  out.reserve(event.size() + payload.size() + 16);
  AppendField(out, "event", event.substr(0, event.find_first_of("\r\n")));
  AppendField(out, "data", payload);
  out += '\n';
  return out;
}

std::string SseComment(std::string_view text) {
  std::string out;
  AppendField(out, "", text);
  out += '\n';
  return out;
}

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
