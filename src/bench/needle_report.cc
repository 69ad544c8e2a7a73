#include "bench/needle_report.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "bench/html.h"
#include "bench/svg.h"

namespace kvs::bench {

namespace {

// The kinds of misses and, with several needles, the chance level.
std::string MissLine(const NeedleSummary& s) {
  std::string o;
  if (!s.misses.empty()) {
    std::vector<std::string> parts;
    const std::map<std::string, std::string> what = {{"distractor", "answered another needle's value"},
                                                     {"none", "no needle's value"},
                                                     {"partial", "some of the values"},
                                                     {"error", "the request failed"}};
    for (const auto& [kind, n] : s.misses) {
      parts.push_back(fmt::format("{} {} ({})", n, kind, what.count(kind) ? what.at(kind) : kind));
    }
    o += fmt::format("misses: {}\n", fmt::join(parts, ", "));
  }
  if (s.chance_level) {
    const bool above = s.overall_interval.lo > *s.chance_level;
    o += fmt::format("chance level: {:.1f} % (one of the needles' values picked at random); recall is {} it\n",
                     *s.chance_level * 100, above ? "above" : "NOT shown above");
  }
  return o;
}

std::string DepthLabel(double d) { return fmt::format("{:g}%", std::round(d * 1000) / 10); }

std::string Field(const nlohmann::json& meta, const char* key) {
  if (!meta.contains(key)) return "";
  return meta[key].is_string() ? meta[key].get<std::string>() : meta[key].dump();
}

}  // namespace

std::string NeedleHeatmapSvg(const NeedleSummary& s, const std::string& title) {
  svg::Heatmap m;
  m.title = title;
  m.row_title = "context length (tokens)";
  m.col_title = "needle depth (0 % = start of the haystack, 100 % = its end, before the question)";
  for (int64_t l : s.lengths) m.rows.push_back(std::to_string(l));
  for (double d : s.depths) m.cols.push_back(DepthLabel(d));
  m.cell_width = s.depths.size() > 8 ? 56 : 80;
  for (size_t i = 0; i < s.lengths.size(); ++i) {
    std::vector<std::optional<double>> row;
    std::vector<std::string> text;
    for (const NeedleCell& c : s.cells[i]) {
      if (c.trials == 0) {
        row.push_back(std::nullopt);
        text.push_back("-");
      } else {
        row.push_back(c.recall());
        text.push_back(fmt::format("{:.0f}%", c.recall() * 100));
      }
    }
    m.values.push_back(row);
    m.cell_text.push_back(text);
  }
  m.caption = fmt::format("exact-match recall, {} cases; effective context length {} (every depth >= {:.0f} %)",
                          s.requests,
                          s.effective_length ? fmt::format("{} tokens", *s.effective_length) : std::string("none"),
                          s.threshold * 100);
  return svg::RenderHeatmap(m);
}

std::string NeedleTable(const NeedleSummary& s) {
  std::string o = fmt::format("=== needle recall (exact match), {} cases\n", s.requests);
  o += fmt::format("{:>8}", "length");
  for (double d : s.depths) o += fmt::format(" {:>5}", DepthLabel(d));
  o += fmt::format(" {:>6}\n", "all");
  for (size_t i = 0; i < s.lengths.size(); ++i) {
    o += fmt::format("{:>8}", s.lengths[i]);
    for (const NeedleCell& c : s.cells[i]) {
      o += c.trials ? fmt::format(" {:>4.0f}%", c.recall() * 100) : fmt::format(" {:>5}", "-");
    }
    o += fmt::format(" {:>5.1f}% [{:.0f}-{:.0f}]\n", s.recall_by_length[i] * 100, s.interval_by_length[i].lo * 100,
                     s.interval_by_length[i].hi * 100);
  }
  o += fmt::format("overall recall: {:.1f} % ({}/{}; 95 % interval {:.1f}-{:.1f} %)", s.overall * 100, s.hits,
                   s.requests, s.overall_interval.lo * 100, s.overall_interval.hi * 100);
  if (s.errors > 0) o += fmt::format(", {} requests failed", s.errors);
  o += "\n";
  o += MissLine(s);
  if (s.effective_length) {
    o += fmt::format(
        "effective context length: {} tokens (the largest tested length where no depth is below {:.0f} % at 95 % "
        "confidence: every depth's Wilson interval reaches it)\n",
        *s.effective_length, s.threshold * 100);
  } else {
    o += fmt::format("effective context length: none (at every tested length some depth is below {:.0f} % at 95 % "
                     "confidence)\n",
                     s.threshold * 100);
  }
  if (!s.failing_below_effective.empty()) {
    o += fmt::format("note: shorter lengths below the threshold: {}\n", fmt::join(s.failing_below_effective, ", "));
  }
  for (const std::string& w : s.late_position_warnings) o += "WARNING: " + w + "\n";
  // One miss in a cell of few trials is already below a high threshold.
  int min_trials = 0;
  for (const auto& row : s.cells) {
    for (const NeedleCell& c : row) {
      if (c.trials > 0 && (min_trials == 0 || c.trials < min_trials)) min_trials = c.trials;
    }
  }
  // Few trials: even a perfect cell cannot show the threshold is met.
  if (min_trials > 0 && WilsonInterval(min_trials, min_trials).lo < s.threshold) {
    int need = min_trials;
    while (need < 100000 && WilsonInterval(need, need).lo < s.threshold) ++need;
    o += fmt::format(
        "note: with {} trials per cell the intervals are wide (all {} hit: 95 % interval from {:.0f} %): the "
        "effective length says where recall is not shown below {:.0f} %, not that it is above; --trials {} lets a "
        "perfect cell show it\n",
        min_trials, min_trials, WilsonInterval(min_trials, min_trials).lo * 100, s.threshold * 100, need);
  }
  return o;
}

nlohmann::json NeedleJson(const NeedleSummary& s, const std::vector<NeedleResult>& results,
                          const nlohmann::json& meta) {
  nlohmann::json j = meta.is_object() ? meta : nlohmann::json::object();
  j["summary"] = s.ToJson();
  nlohmann::json cases = nlohmann::json::array();
  for (const NeedleResult& r : results) {
    cases.push_back({{"length", r.length},
                     {"depth", r.depth},
                     {"trial", r.trial},
                     {"prompt_tokens", r.prompt_tokens},
                     {"expected", r.expected},
                     {"others", r.others},
                     {"answer", r.answer},
                     {"hit", r.hit},
                     {"miss", r.MissKind()},
                     {"score", r.score},
                     {"error", r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error)},
                     {"latency_seconds", r.latency_seconds}});
  }
  j["cases"] = cases;
  return j;
}

std::string NeedleHtml(const NeedleSummary& s, const std::vector<NeedleResult>& results, const nlohmann::json& meta) {
  HtmlPage page("kvserve needle report");
  page.Raw(fmt::format("<p class=\"meta\">endpoint {} &middot; model {} &middot; {} cases in {:.1f} s</p>\n",
                       HtmlEscape(Field(meta, "url")), HtmlEscape(Field(meta, "model")), s.requests,
                       meta.contains("seconds") && meta["seconds"].is_number() ? meta["seconds"].get<double>() : 0.0));
  page.H2("Effective context length");
  page.P(s.effective_length
             ? fmt::format("{} tokens: the largest tested length at which no depth is recalled below {:.0f} % at 95 % "
                           "confidence (every depth's Wilson interval reaches it).",
                           *s.effective_length, s.threshold * 100)
             : fmt::format("None: at every tested length some depth is recalled below {:.0f} % at 95 % confidence.",
                           s.threshold * 100));
  page.P(fmt::format("Overall recall {:.1f} % ({}/{}), 95 % Wilson interval {:.1f}-{:.1f} %.", s.overall * 100, s.hits,
                     s.requests, s.overall_interval.lo * 100, s.overall_interval.hi * 100));
  if (!s.failing_below_effective.empty()) {
    page.P(fmt::format("Shorter lengths below the threshold: {}.", fmt::join(s.failing_below_effective, ", ")));
  }
  if (const std::string m = MissLine(s); !m.empty()) page.P(m);
  for (const std::string& w : s.late_position_warnings) page.Raw("<p><b>Warning:</b> " + HtmlEscape(w) + "</p>\n");
  page.H2("Recall by length and depth");
  page.Raw("<div class=\"charts\">\n");
  page.Raw(NeedleHeatmapSvg(s, "Needle recall: " + Field(meta, "model")));
  // Recall per length as a line (log length axis).
  svg::LineChart c;
  c.title = "Recall by context length (all depths)";
  c.x = {"context length (tokens)", true, {}, {}, {}, {}};
  c.y = {"recall", false, 0.0, 1.0, {0, 0.25, 0.5, 0.75, 0.9, 1.0},
         [](double v) { return fmt::format("{:.0f}%", v * 100); }};
  svg::Series line;
  line.name = "recall";
  for (size_t i = 0; i < s.lengths.size(); ++i) {
    line.points.emplace_back(static_cast<double>(s.lengths[i]), s.recall_by_length[i]);
    c.x.ticks.push_back(static_cast<double>(s.lengths[i]));
  }
  c.series.push_back(line);
  svg::Series lo, hi;
  lo.name = "95 % interval (low)";
  hi.name = "95 % interval (high)";
  lo.dashed = hi.dashed = true;
  lo.markers = hi.markers = false;
  lo.color = hi.color = "#999999";
  for (size_t i = 0; i < s.lengths.size(); ++i) {
    lo.points.emplace_back(static_cast<double>(s.lengths[i]), s.interval_by_length[i].lo);
    hi.points.emplace_back(static_cast<double>(s.lengths[i]), s.interval_by_length[i].hi);
  }
  c.series.push_back(lo);
  c.series.push_back(hi);
  c.y_rules.push_back({s.threshold, fmt::format("threshold {:.0f}%", s.threshold * 100)});
  page.Raw(svg::RenderLineChart(c));
  page.Raw("</div>\n");

  page.H2("Grid");
  std::vector<std::string> header = {"length"};
  for (double d : s.depths) header.push_back(DepthLabel(d));
  header.push_back("all depths");
  std::vector<std::vector<std::string>> rows;
  for (size_t i = 0; i < s.lengths.size(); ++i) {
    std::vector<std::string> row = {std::to_string(s.lengths[i])};
    for (const NeedleCell& cell : s.cells[i]) row.push_back(fmt::format("{}/{}", cell.hits, cell.trials));
    row.push_back(fmt::format("{:.1f}% [{:.0f}-{:.0f}]", s.recall_by_length[i] * 100, s.interval_by_length[i].lo * 100,
                              s.interval_by_length[i].hi * 100));
    rows.push_back(row);
  }
  page.Table(header, rows);

  page.H2("Misses");
  rows.clear();
  for (const NeedleResult& r : results) {
    if (r.hit || rows.size() >= 40) continue;
    std::string answer = r.error.empty() ? r.answer : "error: " + r.error;
    if (answer.size() > 120) answer = answer.substr(0, 120) + "...";
    rows.push_back({std::to_string(r.length), DepthLabel(r.depth), fmt::format("{}", fmt::join(r.expected, ", ")),
                    answer});
  }
  if (rows.empty()) {
    page.P("None.");
  } else {
    page.Table({"length", "depth", "expected", "answer"}, rows);
  }
  page.H2("Settings");
  if (meta.contains("spec")) page.Pre(meta["spec"].dump(2));
  page.P(
      "Each case hides fresh needles in the haystack at the given depth, has exactly the given number of prompt "
      "tokens (the endpoint's own tokenizer), and asks at temperature 0. A case counts when every expected value "
      "appears in the answer as a whole token. The JSON report has every case with its answer.");
  return page.Finish();
}

}  // namespace kvs::bench
