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

}  // namespace kvs::http
