#include "bench/probe_report.h"

#include <algorithm>

#include <fmt/format.h>

namespace kvs::bench {

std::string ProbeTally::Line() const {
  std::string s = fmt::format("{} {}/{} right ({:.0f}-{:.0f} %)", ProbeKindName(kind), ok, sent, interval.lo * 100,
                              interval.hi * 100);
  std::vector<std::string> parts;
  for (auto& [k, n] : misses) parts.push_back(fmt::format("{} x{}", k, n));
  if (!parts.empty()) s += fmt::format("; {}", fmt::join(parts, ", "));
  return s;
}

nlohmann::json ProbeTally::ToJson() const {
  return {{"kind", ProbeKindName(kind)},
          {"sent", sent},
          {"right", ok},
          {"share", Share()},
          {"wilson_95", {interval.lo, interval.hi}},
          {"misses", misses},
          {"examples", examples}};
}

std::vector<ProbeTally> TallyProbes(const std::vector<const RequestRecord*>& records) {
  std::map<ProbeKind, ProbeTally> by_kind;
  for (const RequestRecord* r : records) {
    if (r->probe.kind == ProbeKind::kNone || r->sent < 0) continue;
    ProbeTally& t = by_kind[r->probe.kind];
    t.kind = r->probe.kind;
    ++t.sent;
    if (r->verdict.ok) {
      ++t.ok;
    } else {
      ++t.misses[r->verdict.miss];
      if (t.examples.size() < 3) {
        t.examples.push_back(fmt::format("request {}: {}: {}", r->index, r->verdict.miss, r->verdict.detail));
      }
    }
  }
  std::vector<ProbeTally> out;
  for (auto& [k, t] : by_kind) {
    t.interval = WilsonInterval(t.ok, t.sent);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<Check> ProbeChecks(const std::vector<RunResult>& results, double answers_min) {
  std::vector<const RequestRecord*> all;
  for (const RunResult& run : results) {
    for (const RequestRecord& r : run.requests) all.push_back(&r);
  }
  const std::vector<ProbeTally> tallies = TallyProbes(all);
  auto check = [&](const char* name, bool errors, double min) {
    Check c;
    c.name = name;
    c.threshold = min;
    std::vector<std::string> parts;
    bool fail = false;
    double worst = 1;
    for (const ProbeTally& t : tallies) {
      if (ChecksAnswer(t.kind) == errors) continue;
      parts.push_back(t.Line());
      worst = std::min(worst, t.Share());
      // Answers: below the limit only when the interval says so (one miss
      // among 9 is 56-98 %, not shown below 90 %; 0 of 10 is). Refusals
      // are not a matter of chance: every one must be right.
      const bool below = errors ? t.ok < t.sent : t.interval.hi < min;
      if (below) {
        fail = true;
        if (!t.examples.empty()) parts.back() += fmt::format(" (e.g. {})", t.examples.front());
      }
    }
    if (parts.empty()) {
      c.status = CheckStatus::kSkip;
      c.detail = errors ? "no over-length, malformed or cancelled requests (--probes over-length:0.05,malformed:0.05)"
                        : "no answers checked (--probes recall:0.1,json:0.05,arithmetic:0.1)";
      return c;
    }
    c.value = worst;
    c.status = fail ? CheckStatus::kFail : CheckStatus::kPass;
    c.detail = errors ? fmt::format("{} (every one must be right)", fmt::join(parts, "; "))
                      : fmt::format("{} ({}: each kind's 95 % interval must reach {:.0f} %)", fmt::join(parts, "; "),
                                    fail ? "below" : "not shown below", min * 100);
    return c;
  };
  return {check("answers", false, answers_min), check("expected_errors", true, 1.0)};
}

}  // namespace kvs::bench
