#include "bench/stats.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include "base/strings.h"

namespace kvs::bench {

double Percentile(std::span<const double> sorted, double p) {
  if (sorted.empty()) return 0;
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

ProportionInterval WilsonInterval(int64_t hits, int64_t n, double z) {
  if (n <= 0) return {};
  const double nn = static_cast<double>(n), p = static_cast<double>(hits) / nn, z2 = z * z;
  const double centre = (p + z2 / (2 * nn)) / (1 + z2 / nn);
  const double half = z / (1 + z2 / nn) * std::sqrt(p * (1 - p) / nn + z2 / (4 * nn * nn));
  // At 0 or n hits the bound is exactly 0 or 1 (rounding leaves 1 - 1e-16).
  return {hits <= 0 ? 0.0 : std::max(0.0, centre - half), hits >= n ? 1.0 : std::min(1.0, centre + half)};
}

Summary Summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<int64_t>(values.size());
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  s.min = values.front();
  s.max = values.back();
  s.p50 = Percentile(values, 50);
  s.p90 = Percentile(values, 90);
  s.p99 = Percentile(values, 99);
  if (values.size() > 1) {
    double ss = 0;
    for (double v : values) ss += (v - s.mean) * (v - s.mean);
    s.stddev = std::sqrt(ss / static_cast<double>(values.size() - 1));
  }
  s.sorted = std::move(values);
  return s;
}

std::vector<std::pair<double, double>> Cdf(std::vector<double> values, size_t max_points) {
  std::vector<std::pair<double, double>> out;
  if (values.empty()) return out;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  max_points = std::max<size_t>(max_points, 2);
  if (n <= max_points) {
    for (size_t i = 0; i < n; ++i) {
      // Equal values: only the last of a run carries its full fraction.
      if (i + 1 < n && values[i + 1] == values[i]) continue;
      out.emplace_back(values[i], static_cast<double>(i + 1) / static_cast<double>(n));
    }
    return out;
  }
  for (size_t k = 0; k < max_points; ++k) {
    const size_t i = (k * (n - 1)) / (max_points - 1);
    size_t j = i;
    while (j + 1 < n && values[j + 1] == values[i]) ++j;
    if (!out.empty() && out.back().first == values[j]) continue;
    out.emplace_back(values[j], static_cast<double>(j + 1) / static_cast<double>(n));
  }
  return out;
}

const char* SloMetricName(SloMetric m) {
  switch (m) {
    case SloMetric::kTtft: return "ttft";
    case SloMetric::kTpot: return "tpot";
    case SloMetric::kItl: return "itl";
    case SloMetric::kE2e: return "e2e";
  }
  return "?";
}

std::string Slo::ToString() const {
  std::string s = fmt::format("{}<={}", SloMetricName(metric), FormatSeconds(limit_seconds));
  s.erase(std::remove(s.begin(), s.end(), ' '), s.end());
  if (max_prompt_tokens) s += fmt::format("@{}", *max_prompt_tokens);
  return s;
}

namespace {

// "2s", "500ms", "500" (ms), "1.5 s", "250us".
std::optional<double> ParseDuration(std::string_view s) {
  std::string t = AsciiLower(s);
  t.erase(std::remove(t.begin(), t.end(), ' '), t.end());
  double scale = 1e-3;  // a plain number is milliseconds
  auto ends = [&](std::string_view suf) {
    return t.size() > suf.size() && t.compare(t.size() - suf.size(), suf.size(), suf) == 0;
  };
  if (ends("ms")) {
    t.resize(t.size() - 2);
  } else if (ends("us")) {
    scale = 1e-6;
    t.resize(t.size() - 2);
  } else if (ends("s")) {
    scale = 1;
    t.resize(t.size() - 1);
  }
  if (t.empty()) return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(t, &used);
  } catch (...) {
    return std::nullopt;
  }
  if (used != t.size() || !std::isfinite(v) || v <= 0) return std::nullopt;
  return v * scale;
}

std::optional<int64_t> ParseTokens(std::string_view s) {
  std::string t = AsciiLower(s);
  int64_t scale = 1;
  if (!t.empty() && t.back() == 'k') {
    scale = 1024;
    t.pop_back();
  }
  if (t.empty() || t.size() > 12 || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  const int64_t v = std::stoll(t) * scale;
  if (v <= 0) return std::nullopt;
  return v;
}

}  // namespace

StatusOr<Slo> ParseSlo(std::string_view spec) {
  const std::string orig(spec);
  auto bad = [&](std::string_view why) {
    return InvalidArgument(
        "bad SLO '{}': {} (expected METRIC:LIMIT[@MAX_PROMPT_TOKENS], e.g. ttft:2s@4096 or tpot:50ms; metrics: ttft, "
        "tpot, itl, e2e; a plain number is milliseconds)",
        orig, why);
  };
  Slo slo;
  std::string_view rest = spec;
  if (const size_t at = rest.find('@'); at != std::string_view::npos) {
    std::string_view len = rest.substr(at + 1);
    if (len.substr(0, 2) == "<=") len.remove_prefix(2);
    auto n = ParseTokens(len);
    if (!n) return bad("the prompt bound after '@' is not a positive token count");
    slo.max_prompt_tokens = *n;
    rest = rest.substr(0, at);
  }
  size_t sep = rest.find("<=");
  size_t sep_len = 2;
  if (sep == std::string_view::npos) {
    sep = rest.find(':');
    sep_len = 1;
  }
  if (sep == std::string_view::npos) return bad("no ':' between metric and limit");
  const std::string metric = AsciiLower(rest.substr(0, sep));
  if (metric == "ttft") {
    slo.metric = SloMetric::kTtft;
  } else if (metric == "tpot") {
    slo.metric = SloMetric::kTpot;
  } else if (metric == "itl") {
    slo.metric = SloMetric::kItl;
  } else if (metric == "e2e" || metric == "e2el") {
    slo.metric = SloMetric::kE2e;
  } else {
    return bad("unknown metric '" + metric + "'");
  }
  auto limit = ParseDuration(rest.substr(sep + sep_len));
  if (!limit) return bad("the limit is not a positive duration");
  slo.limit_seconds = *limit;
  return slo;
}

bool MeetsSlos(const SloInput& r, std::span<const Slo> slos) {
  if (!r.ok) return false;
  for (const Slo& s : slos) {
    if (s.max_prompt_tokens && r.prompt_tokens > *s.max_prompt_tokens) continue;
    std::optional<double> v;
    switch (s.metric) {
      case SloMetric::kTtft: v = r.ttft; break;
      case SloMetric::kTpot: v = r.tpot; break;
      case SloMetric::kItl: v = r.max_itl; break;
      case SloMetric::kE2e: v = r.e2e; break;
    }
    if (v && *v > s.limit_seconds) return false;
  }
  return true;
}

std::string FormatSeconds(double s) {
  const double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a >= 100) return fmt::format("{:.0f} s", s);
  if (a >= 1) return fmt::format("{:.3g} s", s);
  if (a >= 1e-3) return fmt::format("{:.3g} ms", s * 1e3);
  return fmt::format("{:.3g} us", s * 1e6);
}

}  // namespace kvs::bench
