// Self-contained SVG charts for the reports (no scripts, no fonts or styles
// fetched from anywhere): line/scatter charts with linear or log axes, step
// CDFs, and a heatmap. Every chart is a standalone <svg> element with its
// xmlns, so it is valid XML on its own and embeds inline in HTML.
//
// Text is XML-escaped; non-finite points are dropped; an empty chart says
// "no data" instead of failing.
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvs::bench::svg {

// &, <, >, " and ' escaped; bytes that are not allowed in XML 1.0 (control
// characters other than tab/newline/return) dropped.
std::string Escape(std::string_view s);

// A colour per series index from a fixed palette that stays distinguishable
// in print and for common colour blindness.
const char* PaletteColor(size_t i);

struct Axis {
  std::string label;
  bool log = false;                      // log10 scale (values <= 0 dropped)
  std::optional<double> min, max;        // default: from the data
  std::vector<double> ticks;             // default: "nice" ticks
  std::function<std::string(double)> format;  // tick labels; default %g
};

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
  std::string color;                              // default: palette
  bool line = true;
  bool markers = true;
  bool step = false;  // a CDF: horizontal then vertical segments
  bool dashed = false;
};

struct LineChart {
  std::string title;
  Axis x, y;
  std::vector<Series> series;
  int width = 540, height = 340;
  // Horizontal reference lines (e.g. a threshold), with a label each.
  std::vector<std::pair<double, std::string>> y_rules;
  // Vertical markers (e.g. where each run starts on a time axis), labelled.
  std::vector<std::pair<double, std::string>> x_rules;
};

std::string RenderLineChart(const LineChart& chart);

struct Heatmap {
  std::string title;
  std::string row_title, col_title;     // axis captions
  std::vector<std::string> rows, cols;  // labels
  // [rows][cols] in [0, 1] (recall); nullopt: not measured (grey).
  std::vector<std::vector<std::optional<double>>> values;
  // [rows][cols] text in each cell (default: the value as a percentage).
  std::vector<std::vector<std::string>> cell_text;
  std::string caption;
  int cell_width = 64, cell_height = 34;
};

// Red (0) through yellow to green (1).
std::string HeatColor(double v);
std::string RenderHeatmap(const Heatmap& map);

// Tick values for [lo, hi]: about `target` round numbers (1, 2, 5 x 10^k),
// or, for a log axis, powers of ten (with 2 and 5 multiples when the range
// spans less than three decades).
std::vector<double> NiceTicks(double lo, double hi, bool log, int target = 6);

}  // namespace kvs::bench::svg
