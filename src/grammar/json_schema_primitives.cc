// Numbers with bounds and string formats as GBNF (json_schema_internal.h).
#include <algorithm>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace kvs::grammar::internal {

namespace {

constexpr int64_t kMaxMagnitude = 999999999999999;  // kMaxIntDigits nines

std::string Join(const std::vector<std::string>& alts) {
  if (alts.empty()) return "";
  if (alts.size() == 1) return alts[0];
  std::string s = "(";
  for (size_t i = 0; i < alts.size(); ++i) s += (i ? " | " : "") + alts[i];
  return s + ")";
}

std::string AnyDigits(size_t n) {
  if (n == 0) return "";
  return n == 1 ? "[0-9]" : "[0-9]{" + std::to_string(n) + "}";
}

std::string DigitClass(char lo, char hi) {
  if (lo == hi) return std::string("\"") + lo + "\"";
  return std::string("[") + lo + "-" + hi + "]";
}

// Seq of two GBNF pieces, either possibly empty.
std::string Cat(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + " " + b;
}

// Digit strings of length |s| that are >= s (as numbers).
std::string AtLeast(const std::string& s) {
  if (s.empty()) return "";
  if (s.find_first_not_of('0') == std::string::npos) return AnyDigits(s.size());
  std::vector<std::string> alts = {Cat(DigitClass(s[0], s[0]), AtLeast(s.substr(1)))};
  if (s[0] < '9') alts.push_back(Cat(DigitClass(static_cast<char>(s[0] + 1), '9'), AnyDigits(s.size() - 1)));
  return Join(alts);
}

// Digit strings of length |s| that are <= s.
std::string AtMost(const std::string& s) {
  if (s.empty()) return "";
  if (s.find_first_not_of('9') == std::string::npos) return AnyDigits(s.size());
  std::vector<std::string> alts = {Cat(DigitClass(s[0], s[0]), AtMost(s.substr(1)))};
  if (s[0] > '0') alts.push_back(Cat(DigitClass('0', static_cast<char>(s[0] - 1)), AnyDigits(s.size() - 1)));
  return Join(alts);
}

// Numbers in [x, y] written with the same number of digits.
std::string SameLength(const std::string& x, const std::string& y) {
  if (x == y) return "\"" + x + "\"";
  size_t i = 0;
  while (x[i] == y[i]) ++i;
  const std::string prefix = i > 0 ? "\"" + x.substr(0, i) + "\"" : "";
  const size_t k = x.size() - i - 1;
  std::vector<std::string> alts = {Cat(DigitClass(x[i], x[i]), AtLeast(x.substr(i + 1)))};
  if (x[i] + 1 <= y[i] - 1) {
    alts.push_back(Cat(DigitClass(static_cast<char>(x[i] + 1), static_cast<char>(y[i] - 1)), AnyDigits(k)));
  }
  alts.push_back(Cat(DigitClass(y[i], y[i]), AtMost(y.substr(i + 1))));
  return Cat(prefix, Join(alts));
}

// Non-negative integers in [a, b] (b <= kMaxMagnitude); "" when none.
std::string NonNegativeRange(int64_t a, int64_t b) {
  if (a > b) return "";
  std::vector<std::string> alts;
  int64_t p = 1;  // 10^(len-1)
  for (size_t len = 1; len <= static_cast<size_t>(kMaxIntDigits); ++len, p *= 10) {
    const int64_t lo = std::max(a, len == 1 ? 0 : p);
    const int64_t hi = std::min(b, p * 10 - 1);
    if (lo <= hi) alts.push_back(SameLength(std::to_string(lo), std::to_string(hi)));
  }
  return Join(alts);
}

}  // namespace

std::string IntegerRangeGbnf(std::optional<int64_t> lo_opt, std::optional<int64_t> hi_opt) {
  const int64_t lo = std::max(lo_opt.value_or(-kMaxMagnitude), -kMaxMagnitude);
  const int64_t hi = std::min(hi_opt.value_or(kMaxMagnitude), kMaxMagnitude);
  if (lo > hi) return "";
  std::vector<std::string> alts;
  if (hi >= 0) alts.push_back(NonNegativeRange(std::max<int64_t>(lo, 0), hi));
  if (lo < 0) {
    const std::string neg = NonNegativeRange(hi < 0 ? -hi : 1, -lo);
    if (!neg.empty()) alts.push_back("\"-\" " + neg);
  }
  alts.erase(std::remove(alts.begin(), alts.end(), std::string()), alts.end());
  return Join(alts);
}

std::string NumberRangeGbnf(std::optional<int64_t> lo_opt, bool loex, std::optional<int64_t> hi_opt, bool hiex) {
  const std::string any_frac = "(\".\" [0-9]{1,15})?";
  const std::string nonzero_frac = "\".\" [0-9]{0,14} [1-9]";
  const std::string zero_frac = "(\".\" \"0\"{1,15})?";
  if (lo_opt && *lo_opt < -kMaxMagnitude) lo_opt.reset();
  if (hi_opt && *hi_opt > kMaxMagnitude) hi_opt.reset();
  const int64_t lo = lo_opt.value_or(-kMaxMagnitude - 1);
  const int64_t hi = hi_opt.value_or(kMaxMagnitude + 1);
  std::vector<std::string> alts;
  auto add = [&](const std::string& digits, const std::string& frac, bool negative) {
    if (digits.empty()) return;
    alts.push_back((negative ? "\"-\" " : "") + digits + " " + frac);
  };
  // Non-negative values "n.f" lie in [n, n+1).
  if (hi > 0 || (hi == 0 && !hiex)) {
    const int64_t a = std::max<int64_t>(lo, 0);
    const bool a_excluded = loex && lo >= 0;
    add(NonNegativeRange(a + (a_excluded ? 1 : 0), std::min(hi - 1, kMaxMagnitude)), any_frac, false);
    if (a_excluded && a + 1 <= hi) add(NonNegativeRange(a, a), nonzero_frac, false);
    if (hi_opt && !hiex && hi >= a && !(a_excluded && hi == a)) add(NonNegativeRange(hi, hi), zero_frac, false);
  }
  // Negative values "-n.f" lie in (-(n+1), -n]; "-0" only with a nonzero fraction.
  if (lo < 0) {
    const int64_t b = -lo;                       // largest magnitude
    const int64_t c = hi < 0 ? -hi : 0;          // smallest magnitude
    const bool c_excluded = hiex && hi <= 0;     // -c itself is not allowed
    int64_t first = c + (c_excluded && c > 0 ? 1 : 0);
    const int64_t last = std::min(b - 1, kMaxMagnitude);
    if (first == 0 && last >= 0) {
      add("\"0\"", nonzero_frac, true);
      first = 1;
    }
    add(NonNegativeRange(first, last), any_frac, true);
    if (c_excluded && c > 0 && c <= b - 1) add(NonNegativeRange(c, c), nonzero_frac, true);
    if (lo_opt && !loex && b > 0 && !(hiex && b == c)) add(NonNegativeRange(b, b), zero_frac, true);
  }
  return Join(alts);
}

StatusOr<std::string> FormatGbnf(const std::string& format) {
  if (format == "date" || format == "date-time") {
    // Days per month, February 29 only in leap years (as ajv-formats checks).
    const std::string day28 = "(\"0\" [1-9] | \"1\" [0-9] | \"2\" [0-8])";
    const std::string leap = "([0-9]{2} (\"0\" [48] | [2468] [048] | [13579] [26]) | ([02468] [048] | [13579] [26]) \"00\")";
    const std::string date = "([0-9]{4} \"-\" ((\"01\" | \"03\" | \"05\" | \"07\" | \"08\" | \"10\" | \"12\") \"-\" (" + day28 +
                             " | \"29\" | \"30\" | \"31\") | (\"04\" | \"06\" | \"09\" | \"11\") \"-\" (" + day28 +
                             " | \"29\" | \"30\") | \"02-\" " + day28 + ") | " + leap + " \"-02-29\")";
    if (format == "date") return date;
    KVS_ASSIGN_OR_RETURN(std::string time, FormatGbnf("time"));
    return "(" + date + " \"T\" " + time + ")";
  }
  if (format == "time") {
    const std::string hh = "([01] [0-9] | \"2\" [0-3])", mm = "[0-5] [0-9]";
    return "(" + hh + " \":\" " + mm + " \":\" " + mm + " (\".\" [0-9]{1,9})? (\"Z\" | [+-] " + hh + " \":\" " + mm +
           "))";
  }
  if (format == "uuid") {
    return "([0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{12})";
  }
  const std::string label = "([a-zA-Z0-9] ([a-zA-Z0-9-]{0,61} [a-zA-Z0-9])?)";
  if (format == "email") {
    const std::string atom = "[a-zA-Z0-9_+-]+";
    return "(" + atom + " (\".\" " + atom + ")* \"@\" " + label + " (\".\" " + label + "){1,3})";
  }
  if (format == "hostname") return "(" + label + " (\".\" " + label + "){0,2})";
  if (format == "ipv4") {
    const std::string octet = "(\"25\" [0-5] | \"2\" [0-4] [0-9] | \"1\" [0-9] [0-9] | [1-9]? [0-9])";
    return "(" + octet + " \".\" " + octet + " \".\" " + octet + " \".\" " + octet + ")";
  }
  if (format == "uri") {
    return "(\"http\" \"s\"? \"://\" " + label + " (\".\" " + label +
           "){0,3} (\":\" [0-9]{1,5})? (\"/\" [a-zA-Z0-9._~!$&'()*+,;=:@-]*)*)";
  }
  return NotFound("format '{}' is not supported (supported: date, time, date-time, uuid, email, hostname, ipv4, uri)",
                  format);
}

}  // namespace kvs::grammar::internal
