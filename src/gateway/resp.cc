#include "gateway/resp.h"

#include <charconv>

#include <fmt/format.h>

namespace kvs::gateway {

namespace {

// The line at the front of buf (without CRLF), or npos-length when incomplete.
bool Line(std::string_view buf, std::string_view* line, size_t* used) {
  const size_t eol = buf.find("\r\n");
  if (eol == std::string_view::npos) return false;
  *line = buf.substr(0, eol);
  *used = eol + 2;
  return true;
}

bool ToInt(std::string_view s, int64_t* out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return !s.empty() && ec == std::errc() && p == s.data() + s.size();
}

constexpr int kMaxDepth = 8;

int Parse(std::string_view buf, size_t* consumed, RespValue* out, int depth) {
  if (buf.empty()) return 0;
  if (depth > kMaxDepth) return -1;
  std::string_view line;
  size_t used = 0;
  if (!Line(buf, &line, &used)) return 0;
  if (line.empty()) return -1;  // every RESP line starts with its type byte
  const char kind = line[0];
  const std::string_view rest = line.substr(1);
  int64_t n = 0;
  switch (kind) {
    case '+':
    case '-':
      out->type = kind == '+' ? RespValue::Type::kString : RespValue::Type::kError;
      out->str = std::string(rest);
      *consumed = used;
      return 1;
    case ':':
      if (!ToInt(rest, &out->integer)) return -1;
      out->type = RespValue::Type::kInteger;
      *consumed = used;
      return 1;
    case '$':
      if (!ToInt(rest, &n) || n < -1 || n > (int64_t{512} << 20)) return -1;
      if (n == -1) {
        out->type = RespValue::Type::kNil;
        *consumed = used;
        return 1;
      }
      if (buf.size() < used + static_cast<size_t>(n) + 2) return 0;
      if (buf.substr(used + n, 2) != "\r\n") return -1;
      out->type = RespValue::Type::kString;
      out->str = std::string(buf.substr(used, n));
      *consumed = used + n + 2;
      return 1;
    case '*': {
      if (!ToInt(rest, &n) || n < -1 || n > 1000000) return -1;
      if (n == -1) {
        out->type = RespValue::Type::kNil;
        *consumed = used;
        return 1;
      }
      out->type = RespValue::Type::kArray;
      out->elems.clear();
      size_t pos = used;
      for (int64_t i = 0; i < n; ++i) {
        RespValue e;
        size_t c = 0;
        const int r = Parse(buf.substr(pos), &c, &e, depth + 1);
        if (r <= 0) return r;
        pos += c;
        out->elems.push_back(std::move(e));
      }
      *consumed = pos;
      return 1;
    }
    default: return -1;
  }
}

}  // namespace

int ParseResp(std::string_view buf, size_t* consumed, RespValue* out) { return Parse(buf, consumed, out, 0); }

std::string EncodeRespCommand(const std::vector<std::string>& args) {
  std::string out = fmt::format("*{}\r\n", args.size());
  for (const auto& a : args) {
    out += fmt::format("${}\r\n", a.size());
    out += a;
    out += "\r\n";
  }
  return out;
}

}  // namespace kvs::gateway
