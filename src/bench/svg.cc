#include "bench/svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace kvs::bench::svg {

std::string Escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        if (c < 0x20 && ch != '\t' && ch != '\n' && ch != '\r') break;  // not XML 1.0
        out += ch;
    }
  }
  return out;
}

const char* PaletteColor(size_t i) {
  // Okabe-Ito palette (colour-blind safe), black last.
  static const char* kColors[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"};
  return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))];
}

std::vector<double> NiceTicks(double lo, double hi, bool log, int target) {
  std::vector<double> out;
  if (!std::isfinite(lo) || !std::isfinite(hi)) return out;
  if (hi < lo) std::swap(lo, hi);
  if (log) {
    if (hi <= 0) return out;
    lo = std::max(lo, hi * 1e-12);
    const int e0 = static_cast<int>(std::floor(std::log10(lo)));
    const int e1 = static_cast<int>(std::ceil(std::log10(hi)));
    const bool fine = e1 - e0 < 3;
    for (int e = e0; e <= e1; ++e) {
      for (double m : fine ? std::vector<double>{1, 2, 5} : std::vector<double>{1}) {
        const double v = m * std::pow(10.0, e);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) out.push_back(v);
      }
    }
    if (out.size() < 2) {
      out = {lo, hi};
    }
    return out;
  }
  if (hi == lo) {
    out.push_back(lo);
    return out;
  }
  const double raw = (hi - lo) / std::max(target, 2);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  }
  const double first = std::ceil(lo / step - 1e-9) * step;
  for (double v = first; v <= hi + step * 1e-9; v += step) out.push_back(std::fabs(v) < step * 1e-9 ? 0.0 : v);
  return out;
}

namespace {

std::string Num(double v) { return fmt::format("{:.1f}", v); }

std::string DefaultFormat(double v) {
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e6 || a < 1e-3)) return fmt::format("{:.2g}", v);
  return fmt::format("{:g}", v);
}

struct Scale {
  double lo = 0, hi = 1;
  bool log = false;
  double p0 = 0, p1 = 1;  // pixel range
  double T(double v) const { return log ? std::log10(v) : v; }
  double operator()(double v) const {
    const double a = T(lo), b = T(hi);
    const double f = b == a ? 0.5 : (T(v) - a) / (b - a);
    return p0 + f * (p1 - p0);
  }
};

// Data range of one axis over all series (log: positive values only).
void Range(const LineChart& c, bool x_axis, double* lo, double* hi) {
  const Axis& ax = x_axis ? c.x : c.y;
  *lo = HUGE_VAL;
  *hi = -HUGE_VAL;
  for (const Series& s : c.series) {
    for (auto [x, y] : s.points) {
      const double v = x_axis ? x : y;
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      if (ax.log && v <= 0) continue;
      *lo = std::min(*lo, v);
      *hi = std::max(*hi, v);
    }
  }
  for (auto& [v, label] : x_axis ? c.x_rules : c.y_rules) {
    if (std::isfinite(v) && (!ax.log || v > 0)) {
      *lo = std::min(*lo, v);
      *hi = std::max(*hi, v);
    }
  }
  if (ax.min) *lo = *ax.min;
  if (ax.max) *hi = *ax.max;
  if (*lo > *hi) {  // no data
    *lo = ax.log ? 1 : 0;
    *hi = ax.log ? 10 : 1;
  }
  if (*lo == *hi) {
    if (ax.log) {
      *lo /= 2;
      *hi *= 2;
    } else {
      *lo -= 0.5 * (std::fabs(*lo) + 1);
      *hi += 0.5 * (std::fabs(*hi) + 1);
    }
  }
  // Linear axes of non-negative data start at 0 (honest bars and lines).
  if (!ax.log && !ax.min && *lo > 0 && *lo < *hi * 0.5) *lo = 0;
}

}  // namespace

std::string RenderLineChart(const LineChart& c) {
  const int W = c.width;
  const int left = 70, right = 20, top = 34, bottom = 52;
  const bool legend = c.series.size() > 1 || (c.series.size() == 1 && !c.series[0].name.empty());
  // As many legend columns as the longest name allows (~6.5 px a character).
  size_t longest_name = 1;
  for (const Series& s : c.series) longest_name = std::max(longest_name, s.name.size());
  const int legend_cols = std::clamp(
      static_cast<int>((W - left - right) / (6.5 * static_cast<double>(longest_name) + 34)), 1, 3);
  const int legend_h =
      legend ? 18 * static_cast<int>((c.series.size() + static_cast<size_t>(legend_cols) - 1) / legend_cols) : 0;
  const int H = c.height + legend_h;  // the legend adds height; the plot keeps its size
  Scale xs, ys;
  Range(c, true, &xs.lo, &xs.hi);
  Range(c, false, &ys.lo, &ys.hi);
  xs.log = c.x.log;
  ys.log = c.y.log;
  std::vector<double> xt = c.x.ticks.empty() ? NiceTicks(xs.lo, xs.hi, xs.log) : c.x.ticks;
  std::vector<double> yt = c.y.ticks.empty() ? NiceTicks(ys.lo, ys.hi, ys.log) : c.y.ticks;
  // Widen the range to the outer ticks so lines never leave the plot.
  if (!xt.empty() && !c.x.min && !c.x.max) {
    xs.lo = std::min(xs.lo, xt.front());
    xs.hi = std::max(xs.hi, xt.back());
  }
  if (!yt.empty() && !c.y.min && !c.y.max) {
    ys.lo = std::min(ys.lo, yt.front());
    ys.hi = std::max(ys.hi, yt.back());
  }
  xs.p0 = left;
  xs.p1 = W - right;
  ys.p0 = H - bottom - legend_h;
  ys.p1 = top;
  auto fx = c.x.format ? c.x.format : DefaultFormat;
  auto fy = c.y.format ? c.y.format : DefaultFormat;

  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n",
      W, H, W, H);
  o += fmt::format("<title>{}</title>\n", Escape(c.title));
  o += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", W, H);
  o += fmt::format("<text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
                   W / 2, Escape(c.title));
  // Grid and ticks.
  for (double t : yt) {
    if ((ys.log && t <= 0) || t < std::min(ys.lo, ys.hi) - 1e-12 || t > std::max(ys.lo, ys.hi) + 1e-12) continue;
    const double y = ys(t);
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#e0e0e0\"/>\n", left, Num(y), W - right,
                     Num(y));
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 6, Num(y + 4), Escape(fy(t)));
  }
  for (double t : xt) {
    if ((xs.log && t <= 0) || t < xs.lo - 1e-12 || t > xs.hi + 1e-12) continue;
    const double x = xs(t);
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#e0e0e0\"/>\n", Num(x), top, Num(x),
                     Num(ys.p0));
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", Num(x), Num(ys.p0 + 16),
                     Escape(fx(t)));
  }
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888888\"/>\n", left,
                   top, W - right - left, Num(ys.p0 - top));
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", (left + W - right) / 2,
                   Num(ys.p0 + 34), Escape(c.x.label));
  o += fmt::format("<text x=\"16\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {})\">{}</text>\n",
                   Num((top + ys.p0) / 2), Num((top + ys.p0) / 2), Escape(c.y.label));
  for (const auto& [v, label] : c.y_rules) {
    if (!std::isfinite(v) || (ys.log && v <= 0)) continue;
    const double y = ys(v);
    o += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#B00020\" stroke-dasharray=\"6 4\"/>\n"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#B00020\">{}</text>\n",
        left, Num(y), W - right, Num(y), W - right - 4, Num(y - 4), Escape(label));
  }
  for (const auto& [v, label] : c.x_rules) {
    if (!std::isfinite(v) || (xs.log && v <= 0)) continue;
    const double x = xs(v);
    o += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#777777\" stroke-dasharray=\"2 3\"/>\n"
        "<text x=\"{}\" y=\"{}\" fill=\"#555555\" font-size=\"10\">{}</text>\n",
        Num(x), top, Num(x), Num(ys.p0), Num(x + 3), top + 11, Escape(label));
  }
  bool any = false;
  for (size_t si = 0; si < c.series.size(); ++si) {
    const Series& s = c.series[si];
    const std::string color = s.color.empty() ? PaletteColor(si) : s.color;
    std::vector<std::pair<double, double>> pts;
    for (auto [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y) || (xs.log && x <= 0) || (ys.log && y <= 0)) continue;
      pts.emplace_back(xs(x), ys(y));
    }
    if (pts.empty()) continue;
    any = true;
    if (s.line && pts.size() > 1) {
      std::string d = fmt::format("M{} {}", Num(pts[0].first), Num(pts[0].second));
      for (size_t i = 1; i < pts.size(); ++i) {
        if (s.step) d += fmt::format(" H{}", Num(pts[i].first));
        d += fmt::format(" L{} {}", Num(pts[i].first), Num(pts[i].second));
      }
      o += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", d, color,
                       s.dashed ? " stroke-dasharray=\"5 3\"" : "");
    }
    if (s.markers || pts.size() == 1) {
      for (auto [x, y] : pts) {
        o += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3\" fill=\"{}\"/>\n", Num(x), Num(y), color);
      }
    }
  }
  if (!any) {
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#888888\">no data</text>\n",
                     (left + W - right) / 2, Num((top + ys.p0) / 2));
  }
  if (legend) {
    for (size_t si = 0; si < c.series.size(); ++si) {
      const int col = static_cast<int>(si % static_cast<size_t>(legend_cols));
      const int row = static_cast<int>(si / static_cast<size_t>(legend_cols));
      const int lx = (legend_cols == 1 ? 16 : left) + col * ((W - left - right) / legend_cols);
      const int ly = H - legend_h + 4 + 18 * row;
      const std::string color = c.series[si].color.empty() ? PaletteColor(si) : c.series[si].color;
      o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"14\" height=\"4\" fill=\"{}\"/>\n", lx, ly, color);
      o += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", lx + 20, ly + 6, Escape(c.series[si].name));
    }
  }
  o += "</svg>\n";
  return o;
}

std::string HeatColor(double v) {
  v = std::clamp(v, 0.0, 1.0);
  // 0: red (215,48,39), 0.5: yellow (254,224,139), 1: green (26,152,80).
  auto mix = [](double a, double b, double t) { return static_cast<int>(std::lround(a + (b - a) * t)); };
  int r, g, b;
  if (v < 0.5) {
    const double t = v / 0.5;
    r = mix(215, 254, t);
    g = mix(48, 224, t);
    b = mix(39, 139, t);
  } else {
    const double t = (v - 0.5) / 0.5;
    r = mix(254, 26, t);
    g = mix(224, 152, t);
    b = mix(139, 80, t);
  }
  return fmt::format("#{:02x}{:02x}{:02x}", r, g, b);
}

std::string RenderHeatmap(const Heatmap& m) {
  const int left = 110, top = 58;
  const int cw = m.cell_width, ch = m.cell_height;
  const int ncol = static_cast<int>(m.cols.size()), nrow = static_cast<int>(m.rows.size());
  // Wide enough for the grid and for the longest caption line (SVG text
  // does not wrap; ~6.5 px per character at 12 px).
  const size_t longest = std::max({m.caption.size(), m.col_title.size(), m.title.size() + 4});
  const int W = std::max({left + cw * ncol + 20, static_cast<int>(6.5 * static_cast<double>(longest)) + 40, 320});
  const int H = top + ch * nrow + 60;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" "
      "font-family=\"sans-serif\" font-size=\"12\" role=\"img\">\n",
      W, H, W, H);
  o += fmt::format("<title>{}</title>\n", Escape(m.title));
  o += fmt::format("<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>\n", W, H);
  o += fmt::format("<text x=\"{}\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
                   W / 2, Escape(m.title));
  o += fmt::format("<text x=\"{}\" y=\"38\" text-anchor=\"middle\">{}</text>\n",
                   std::max(left + cw * ncol / 2, W / 2), Escape(m.col_title));
  for (int j = 0; j < ncol; ++j) {
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + cw * j + cw / 2, top - 6,
                     Escape(m.cols[static_cast<size_t>(j)]));
  }
  o += fmt::format("<text x=\"14\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 14 {})\">{}</text>\n",
                   top + ch * nrow / 2, top + ch * nrow / 2, Escape(m.row_title));
  for (int i = 0; i < nrow; ++i) {
    const int y = top + ch * i;
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", left - 8, y + ch / 2 + 4,
                     Escape(m.rows[static_cast<size_t>(i)]));
    for (int j = 0; j < ncol; ++j) {
      std::optional<double> v;
      if (static_cast<size_t>(i) < m.values.size() && static_cast<size_t>(j) < m.values[static_cast<size_t>(i)].size()) {
        v = m.values[static_cast<size_t>(i)][static_cast<size_t>(j)];
      }
      std::string text;
      if (static_cast<size_t>(i) < m.cell_text.size() &&
          static_cast<size_t>(j) < m.cell_text[static_cast<size_t>(i)].size()) {
        text = m.cell_text[static_cast<size_t>(i)][static_cast<size_t>(j)];
      } else if (v) {
        text = fmt::format("{:.0f}%", *v * 100);
      } else {
        text = "-";
      }
      const int x = left + cw * j;
      const std::string fill = v ? HeatColor(*v) : std::string("#d0d0d0");
      const char* ink = v && (*v < 0.25 || *v > 0.8) ? "#ffffff" : "#000000";
      o += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#ffffff\"><title>{} / {}: {}</title>"
          "</rect>\n",
          x, y, cw, ch, fill, Escape(m.rows[static_cast<size_t>(i)]), Escape(m.cols[static_cast<size_t>(j)]),
          Escape(text));
      o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n", x + cw / 2,
                       y + ch / 2 + 4, ink, Escape(text));
    }
  }
  if (!m.caption.empty()) {
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"11\">{}</text>\n", W / 2, H - 16,
                     Escape(m.caption));
  }
  o += "</svg>\n";
  return o;
}

}  // namespace kvs::bench::svg
