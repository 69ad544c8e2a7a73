#include "bench/probes.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>
#include <valijson/adapters/nlohmann_json_adapter.hpp>
#include <valijson/schema.hpp>
#include <valijson/schema_parser.hpp>
#include <valijson/validation_results.hpp>
#include <valijson/validator.hpp>

namespace kvs::bench {

namespace {

constexpr ProbeKind kKinds[] = {ProbeKind::kArithmetic, ProbeKind::kJson,      ProbeKind::kRecall,
                                ProbeKind::kOverLength, ProbeKind::kMalformed, ProbeKind::kCancel};

// n digits, no leading zero and no digit twice in a row (small models lose
// count of repeats, which says nothing about the server).
std::string Digits(Rng& rng, int n) {
  std::uniform_int_distribution<int> first(1, 9), rest(0, 8);
  std::string s(1, static_cast<char>('0' + first(rng)));
  for (int i = 1; i < n; ++i) {
    int d = rest(rng);
    if (d >= s.back() - '0') ++d;  // skip the previous digit
    s += static_cast<char>('0' + d);
  }
  return s;
}

std::string Head(std::string_view s, size_t n = 120) {
  std::string out(s.substr(0, n));
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s.size() > n ? out + "..." : out;
}

}  // namespace

const char* ProbeKindName(ProbeKind k) {
  switch (k) {
    case ProbeKind::kNone: return "none";
    case ProbeKind::kArithmetic: return "arithmetic";
    case ProbeKind::kJson: return "json";
    case ProbeKind::kRecall: return "recall";
    case ProbeKind::kOverLength: return "over_length";
    case ProbeKind::kMalformed: return "malformed";
    case ProbeKind::kCancel: return "cancel";
  }
  return "?";
}

std::optional<ProbeKind> ProbeKindFromName(std::string_view name) {
  std::string n(name);
  std::replace(n.begin(), n.end(), '-', '_');
  for (ProbeKind k : kKinds) {
    if (n == ProbeKindName(k)) return k;
  }
  return std::nullopt;
}

bool ExpectsError(ProbeKind k) { return k == ProbeKind::kOverLength || k == ProbeKind::kMalformed; }

bool ChecksAnswer(ProbeKind k) {
  return k == ProbeKind::kArithmetic || k == ProbeKind::kJson || k == ProbeKind::kRecall;
}

StatusOr<ProbeShares> ParseProbes(const std::string& s) {
  ProbeShares out;
  double total = 0;
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string item = s.substr(pos, end - pos);
    item.erase(std::remove(item.begin(), item.end(), ' '), item.end());
    pos = end + 1;
    if (item.empty()) continue;
    const size_t colon = item.find(':');
    auto kind = ProbeKindFromName(item.substr(0, colon));
    double share = 0;
    bool good = kind.has_value() && colon != std::string::npos;
    if (good) {
      try {
        size_t used = 0;
        share = std::stod(item.substr(colon + 1), &used);
        good = used == item.size() - colon - 1 && share > 0 && share <= 1;
      } catch (...) {
        good = false;
      }
    }
    if (!good) {
      return InvalidArgument(
          "bad probe '{}' in '{}': expected KIND:SHARE with KIND one of arithmetic, json, recall, over-length, "
          "malformed, cancel and SHARE in (0, 1], e.g. arithmetic:0.1,malformed:0.05",
          item, s);
    }
    for (auto& [k, x] : out) {
      if (k == *kind) return InvalidArgument("probe kind '{}' is given twice in '{}'", ProbeKindName(k), s);
    }
    total += share;
    out.emplace_back(*kind, share);
  }
  if (total > 1 + 1e-9) return InvalidArgument("probe shares in '{}' add up to {:g}: at most 1", s, total);
  return out;
}

std::string FormatProbes(const ProbeShares& p) {
  std::vector<std::string> parts;
  for (auto& [k, x] : p) parts.push_back(fmt::format("{}:{:g}", ProbeKindName(k), x));
  return fmt::format("{}", fmt::join(parts, ","));
}

nlohmann::json Probe::ToJson() const {
  nlohmann::json j = {{"kind", ProbeKindName(kind)}};
  if (!expected.empty()) j["expected"] = expected;
  if (!variant.empty()) j["variant"] = variant;
  return j;
}

nlohmann::json ProbeVerdict::ToJson() const {
  return {{"ok", ok}, {"miss", miss.empty() ? nlohmann::json(nullptr) : nlohmann::json(miss)}, {"detail", detail}};
}

ProbePrompt MakeArithmeticProbe(Rng& rng, bool chat) {
  std::uniform_int_distribution<int> digit(1, 9);
  const int a = digit(rng), b = digit(rng);
  ProbePrompt p;
  p.text = chat ? fmt::format("What is {} plus {}?", a, b) : fmt::format("{} plus {} is", a, b);
  p.probe.kind = ProbeKind::kArithmetic;
  p.probe.max_tokens = 24;
  p.probe.expected = std::to_string(a + b);
  p.probe.allowed = {std::to_string(a), std::to_string(b)};
  return p;
}

ProbePrompt MakeJsonProbe(Rng& rng) {
  static const char* kColors[] = {"red", "blue", "green", "yellow"};
  const std::string& name = GivenNames()[std::uniform_int_distribution<size_t>(0, GivenNames().size() - 1)(rng)];
  const char* color = kColors[std::uniform_int_distribution<size_t>(0, std::size(kColors) - 1)(rng)];
  ProbePrompt p;
  p.text = fmt::format("{} has a {} ball. Describe {} as JSON with a name, an age and a color.", name, color, name);
  p.probe.kind = ProbeKind::kJson;
  p.probe.max_tokens = 128;
  p.probe.schema = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}, {"minLength", 1}, {"maxLength", 16}}},
        {"age", {{"type", "integer"}, {"minimum", 0}, {"maximum", 120}}},
        {"color", {{"type", "string"}, {"enum", {"red", "blue", "green", "yellow"}}}}}},
      {"required", {"name", "age", "color"}},
      {"additionalProperties", false}};
  return p;
}

ProbePrompt MakeMalformedProbe(Rng& rng) {
  static const char* kVariants[] = {"invalid_json", "wrong_type",   "missing_field",
                                    "deep_nesting", "invalid_utf8", "out_of_range"};
  ProbePrompt p;
  p.probe.kind = ProbeKind::kMalformed;
  p.probe.variant = kVariants[std::uniform_int_distribution<size_t>(0, std::size(kVariants) - 1)(rng)];
  return p;
}

RecallFact MakeRecallFact(Rng& rng) {
  const std::string& name = GivenNames()[std::uniform_int_distribution<size_t>(0, GivenNames().size() - 1)(rng)];
  const std::string value = Digits(rng, std::uniform_int_distribution<int>(3, 5)(rng));
  RecallFact f;
  f.fact = fmt::format("The secret number of {} is {}.", name, value);
  f.question.text = fmt::format("What is the secret number of {}?", name);
  f.question.probe.kind = ProbeKind::kRecall;
  f.question.probe.max_tokens = 24;
  f.question.probe.expected = value;
  f.answer_prefix = fmt::format("The secret number of {} is", name);
  return f;
}

Probe MakeCancelProbe() {
  Probe p;
  p.kind = ProbeKind::kCancel;
  return p;
}

Probe MakeOverLengthProbe() {
  Probe p;
  p.kind = ProbeKind::kOverLength;
  p.max_tokens = 16;
  return p;
}

std::string MalformedBody(const Probe& p, const std::string& model, bool chat) {
  nlohmann::json b = {{"model", model}, {"max_tokens", 8}};
  if (chat) {
    b["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", "Hello"}}});
  } else {
    b["prompt"] = "Hello";
  }
  if (p.variant == "wrong_type") {
    b["max_tokens"] = "eight";
  } else if (p.variant == "missing_field") {
    b.erase(chat ? "messages" : "prompt");
  } else if (p.variant == "out_of_range") {
    b["max_tokens"] = -5;
  } else if (p.variant == "deep_nesting") {
    // Valid JSON a recursive parser would overflow its stack on.
    const std::string s = b.dump();
    return s.substr(0, s.size() - 1) + ",\"x\":" + std::string(10000, '[') + std::string(10000, ']') + "}";
  } else if (p.variant == "invalid_utf8") {
    std::string s = b.dump();
    const size_t at = s.find("Hello");
    s.replace(at, 5, "He\xff\xfe\xc0lo");
    return s;
  } else {
    // Invalid JSON: the body cut in the middle of a string.
    const std::string s = b.dump();
    return s.substr(0, s.size() - 5);
  }
  return b.dump();
}

std::vector<std::string> FirstSentenceNumbers(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') break;
    if ((c == '.' || c == '!' || c == '?') &&
        (i + 1 == text.size() || std::isspace(static_cast<unsigned char>(text[i + 1])))) {
      break;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
      std::string n(text.substr(i, j - i));
      n.erase(0, std::min(n.find_first_not_of('0'), n.size() - 1));
      out.push_back(n);
      i = j - 1;
    }
  }
  return out;
}

namespace {

ProbeVerdict Miss(std::string miss, std::string detail) {
  ProbeVerdict v;
  v.miss = std::move(miss);
  v.detail = std::move(detail);
  return v;
}

ProbeVerdict ScoreNumber(const Probe& p, const std::string& answer) {
  const std::vector<std::string> nums = FirstSentenceNumbers(answer);
  const bool has = std::find(nums.begin(), nums.end(), p.expected) != nums.end();
  std::vector<std::string> others;
  for (const std::string& n : nums) {
    if (n != p.expected && std::find(p.allowed.begin(), p.allowed.end(), n) == p.allowed.end()) others.push_back(n);
  }
  if (has && others.empty()) {
    ProbeVerdict v;
    v.ok = true;
    v.detail = Head(answer);
    return v;
  }
  if (nums.empty() || (!has && others.empty())) {
    return Miss("no_number", fmt::format("expected {}: \"{}\"", p.expected, Head(answer)));
  }
  return Miss("wrong_number", fmt::format("expected {}, got {}: \"{}\"", p.expected, fmt::join(others, ", "),
                                          Head(answer)));
}

ProbeVerdict ScoreJson(const Probe& p, const ProbeOutcome& o) {
  auto doc = nlohmann::json::parse(o.answer, nullptr, false);
  if (doc.is_discarded()) {
    if (o.finish_reason == "length") {
      return Miss("truncated", fmt::format("the answer hit max_tokens before the JSON closed: \"{}\"", Head(o.answer)));
    }
    return Miss("invalid_json", fmt::format("not JSON: \"{}\"", Head(o.answer)));
  }
  valijson::Schema schema;
  valijson::SchemaParser parser;
  valijson::adapters::NlohmannJsonAdapter schema_doc(p.schema);
  parser.populateSchema(schema_doc, schema);
  valijson::Validator validator;
  valijson::ValidationResults results;
  valijson::adapters::NlohmannJsonAdapter target(doc);
  if (validator.validate(schema, target, &results)) {
    ProbeVerdict v;
    v.ok = true;
    v.detail = Head(o.answer);
    return v;
  }
  valijson::ValidationResults::Error e;
  std::string why;
  while (results.popError(e)) {
    std::string where;
    for (const std::string& c : e.context) where += c;
    why = where + ": " + e.description;  // the innermost error comes last
  }
  return Miss("schema", fmt::format("{} in \"{}\"", why, Head(o.answer)));
}

bool HasErrorMessage(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return false;
  if (j.contains("error")) {
    const auto& e = j["error"];
    if (e.is_string()) return !e.get<std::string>().empty();
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      return !e["message"].get<std::string>().empty();
    }
  }
  return j.contains("message") && j["message"].is_string() && !j["message"].get<std::string>().empty();
}

}  // namespace

ProbeVerdict ScoreProbe(const Probe& p, const ProbeOutcome& o) {
  if (p.kind == ProbeKind::kCancel) {
    if (o.status >= 500 && o.status != 503) return Miss("server_error", fmt::format("HTTP {} before the hang-up", o.status));
    ProbeVerdict v;
    v.ok = true;
    v.detail = o.cancelled ? "the client went away after the first chunk" : fmt::format("HTTP {}, ended first", o.status);
    return v;
  }
  if (o.transport_error || o.status == 0) return Miss("transport", "no complete response");
  if (ExpectsError(p.kind)) {
    const std::string body = Head(o.error_body, 160);
    if (o.status == 200 && p.variant == "deep_nesting") {
      // Valid JSON with a field no API reads: ignoring it is fine; what
      // must not happen is a crash, a hang or a 5xx.
      ProbeVerdict v;
      v.ok = true;
      v.detail = "HTTP 200: the deeply nested extra field was ignored";
      return v;
    }
    if (o.status == 200) return Miss("accepted", "HTTP 200 to a request that must be refused");
    if (o.status >= 500) return Miss("server_error", fmt::format("HTTP {}: {}", o.status, body));
    const bool right = o.status == 400 || (p.kind == ProbeKind::kOverLength ? o.status == 413 : o.status == 422);
    if (!right) return Miss("wrong_status", fmt::format("HTTP {}: {}", o.status, body));
    if (!HasErrorMessage(o.error_body)) {
      return Miss("no_error_message", fmt::format("HTTP {} without a JSON error message: {}", o.status, body));
    }
    ProbeVerdict v;
    v.ok = true;
    v.detail = fmt::format("HTTP {}: {}", o.status, body);
    return v;
  }
  if (o.status != 200) return Miss("http_error", fmt::format("HTTP {}: {}", o.status, Head(o.error_body, 160)));
  switch (p.kind) {
    case ProbeKind::kArithmetic:
    case ProbeKind::kRecall: return ScoreNumber(p, o.answer);
    case ProbeKind::kJson: return ScoreJson(p, o);
    default: break;
  }
  return Miss("unknown", "not a probe");
}

}  // namespace kvs::bench
