#include "frontend/config_keys.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

namespace kvs::frontend {

RawValue FromYaml(const YAML::Node& n) {
  RawValue v;
  switch (n.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      v.kind = RawValue::kNull;
      break;
    case YAML::NodeType::Scalar:
      v.kind = n.Tag() == "!" ? RawValue::kQuoted : RawValue::kScalar;
      v.text = n.Scalar();
      break;
    case YAML::NodeType::Sequence:
      v.kind = RawValue::kList;
      for (const auto& item : n) {
        if (!item.IsScalar()) {
          v.kind = RawValue::kMap;  // a list of non-strings: reported as the wrong type
          v.items.clear();
          return v;
        }
        v.items.push_back(item.Scalar());
      }
      break;
    case YAML::NodeType::Map:
      v.kind = RawValue::kMap;
      break;
  }
  return v;
}

std::string Describe(const RawValue& v) {
  // A URL with credentials is not echoed (a password in stderr).
  const std::string text = v.text.find('@') == std::string::npos ? v.text : "<redacted>";
  switch (v.kind) {
    case RawValue::kScalar: return fmt::format("\"{}\"", text);
    case RawValue::kQuoted: return fmt::format("the quoted string \"{}\"", text);
    case RawValue::kList: return "a list";
    case RawValue::kMap: return "a mapping";
    case RawValue::kNull: return "nothing";
  }
  return "?";
}

StatusOr<YAML::Node> ParseYaml(std::string_view text) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("YAML syntax error at line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg);
  }
}

StatusOr<std::string> ReadConfigFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read configuration file \"{}\"", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string KeyHelp(std::string_view header, const std::vector<KeyInfo>& keys) {
  std::string out = std::string(header) + "\n";
  for (const KeyInfo& k : keys) {
    const std::string names = (k.option ? "--" : "") + k.key + (k.alias.empty() ? "" : ", " + k.alias);
    out += fmt::format("  {:<38} {}\n", names, k.help);
    out += fmt::format("  {:<38} {}: {}; default {}\n", "", k.type, k.allowed, k.default_value);
  }
  return out;
}

namespace key_detail {

Status Mismatch(std::string_view name, std::string_view expected, const RawValue& v, bool scalar_key) {
  if (scalar_key && (v.kind == RawValue::kList || v.kind == RawValue::kMap)) {
    return InvalidArgument("{}: expected a single value ({}), got {}", name, expected, Describe(v));
  }
  return InvalidArgument("{}: expected {}, got {}", name, expected, Describe(v));
}

std::optional<int64_t> ParseInt(const RawValue& v) {
  if (v.kind != RawValue::kScalar || v.text.empty()) return std::nullopt;
  int64_t x = 0;
  const char* end = v.text.data() + v.text.size();
  auto [p, ec] = std::from_chars(v.text.data(), end, x);
  if (ec != std::errc() || p != end) return std::nullopt;
  return x;
}

std::optional<double> ParseNumber(const RawValue& v) {
  if (v.kind != RawValue::kScalar || v.text.empty()) return std::nullopt;
  double x = 0;
  const char* end = v.text.data() + v.text.size();
  auto [p, ec] = std::from_chars(v.text.data(), end, x);
  if (ec != std::errc() || p != end || !std::isfinite(x)) return std::nullopt;
  return x;
}

std::optional<bool> ParseBool(const RawValue& v) {
  if (v.kind != RawValue::kScalar) return std::nullopt;
  const std::string t = Lower(v.text);
  if (t == "true" || t == "yes" || t == "on") return true;
  if (t == "false" || t == "no" || t == "off") return false;
  return std::nullopt;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char ch) { return std::tolower(ch); });
  return s;
}

std::optional<std::vector<std::string>> ListItems(const RawValue& v) {
  if (v.kind == RawValue::kList) return v.items;
  if (!v.is_text()) return std::nullopt;
  std::vector<std::string> items;
  std::stringstream ss(v.text);
  for (std::string item; std::getline(ss, item, ',');) items.push_back(item);
  return items;
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

std::string NumberRange(double lo, bool lo_open, double hi) {
  return fmt::format("{}{}, {}]", lo_open ? "(" : "[", lo, hi);
}

std::string SuggestAmong(std::string_view typed,
                         const std::vector<std::pair<std::string_view, std::string_view>>& candidates) {
  std::string_view best;
  size_t best_distance = 4;  // farther than 3 edits is no suggestion
  for (const auto& [spelling, name] : candidates) {
    if (spelling.empty()) continue;
    size_t d = EditDistance(typed, spelling);
    // Also compare with the part after the section ("port" vs "server.port").
    if (const size_t dot = spelling.find('.'); dot != std::string_view::npos) {
      d = std::min(d, EditDistance(typed, spelling.substr(dot + 1)));
    }
    if (d < best_distance) {
      best_distance = d;
      best = name;
    }
  }
  return best.empty() ? "" : fmt::format(" (did you mean {}?)", best);
}

}  // namespace key_detail

}  // namespace kvs::frontend
