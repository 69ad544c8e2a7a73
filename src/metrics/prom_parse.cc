#include "metrics/prom_parse.h"

#include <cmath>
#include <cstdlib>
#include <optional>

namespace kvs::metrics {

namespace {

bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
bool IsNameChar(char c) { return IsNameStart(c) || (c >= '0' && c <= '9'); }

void SkipSpaces(std::string_view s, size_t* i) {
  while (*i < s.size() && (s[*i] == ' ' || s[*i] == '\t')) ++*i;
}

std::optional<double> ParseValue(std::string_view v) {
  if (v == "+Inf" || v == "Inf") return HUGE_VAL;
  if (v == "-Inf") return -HUGE_VAL;
  if (v == "NaN") return std::nan("");
  if (v.empty() || v.size() > 64) return std::nullopt;
  std::string t(v);
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return d;
}

// One sample line: name{labels} value [timestamp].
std::optional<PromSample> ParseSampleLine(std::string_view line) {
  PromSample s;
  size_t i = 0;
  if (i >= line.size() || !IsNameStart(line[i])) return std::nullopt;
  while (i < line.size() && IsNameChar(line[i])) ++i;
  s.name = std::string(line.substr(0, i));
  SkipSpaces(line, &i);
  if (i < line.size() && line[i] == '{') {
    ++i;
    for (;;) {
      SkipSpaces(line, &i);
      if (i < line.size() && line[i] == '}') {
        ++i;
        break;
      }
      const size_t k0 = i;
      while (i < line.size() && IsNameChar(line[i])) ++i;
      if (i == k0) return std::nullopt;
      std::string key(line.substr(k0, i - k0));
      SkipSpaces(line, &i);
      if (i >= line.size() || line[i] != '=') return std::nullopt;
      ++i;
      SkipSpaces(line, &i);
      if (i >= line.size() || line[i] != '"') return std::nullopt;
      ++i;
      std::string value;
      bool closed = false;
      while (i < line.size()) {
        const char c = line[i++];
        if (c == '"') {
          closed = true;
          break;
        }
        if (c == '\\' && i < line.size()) {
          const char e = line[i++];
          value += e == 'n' ? '\n' : e;
        } else {
          value += c;
        }
      }
      if (!closed) return std::nullopt;
      s.labels[std::move(key)] = std::move(value);
      SkipSpaces(line, &i);
      if (i < line.size() && line[i] == ',') ++i;
    }
  }
  SkipSpaces(line, &i);
  const size_t v0 = i;
  while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
  auto v = ParseValue(line.substr(v0, i - v0));
  if (!v) return std::nullopt;
  s.value = *v;
  return s;  // a trailing timestamp is ignored
}

}  // namespace

PromPage ParsePrometheusText(std::string_view text) {
  PromPage page;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t i = 0;
    SkipSpaces(line, &i);
    line.remove_prefix(i);
    if (line.empty()) continue;
    if (line[0] == '#') {
      // "# TYPE name type"; HELP, EOF and other comments are skipped.
      if (line.substr(0, 7) == "# TYPE ") {
        std::string_view rest = line.substr(7);
        const size_t sp = rest.find(' ');
        if (sp != std::string_view::npos) {
          std::string_view type = rest.substr(sp + 1);
          while (!type.empty() && type.back() == ' ') type.remove_suffix(1);
          page.types[std::string(rest.substr(0, sp))] = std::string(type);
        }
      }
      continue;
    }
    if (auto s = ParseSampleLine(line)) {
      page.samples.push_back(std::move(*s));
    } else {
      ++page.skipped_lines;
    }
  }
  return page;
}

}  // namespace kvs::metrics
