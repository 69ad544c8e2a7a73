// The needle test's outputs: the recall heatmap (length x depth) as SVG,
// the stdout table with the effective context length and late-position
// warnings, the JSON (grid, every case with its expected values and
// answer), and a self-contained HTML report.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/needle.h"

namespace kvs::bench {

std::string NeedleHeatmapSvg(const NeedleSummary& s, const std::string& title);
std::string NeedleTable(const NeedleSummary& s);
nlohmann::json NeedleJson(const NeedleSummary& s, const std::vector<NeedleResult>& results, const nlohmann::json& meta);
std::string NeedleHtml(const NeedleSummary& s, const std::vector<NeedleResult>& results, const nlohmann::json& meta);

}  // namespace kvs::bench
