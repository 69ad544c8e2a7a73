// The status page: one self-contained HTML document (no external
// resources) that polls the JSON document `status` beside it and renders
// it generically (title, state, facts, stat cards, a breakdown bar, time
// series, a table; the schema is in status_page.html's header comment).
// `kvserve serve` serves it at GET / with its document at GET /status
// (src/server/status.h); the gateway can mount the same page with a
// document of its own in the same schema (status_frame.h builds what the
// two documents share).
#pragma once

#include <chrono>
#include <cmath>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvs::metrics {

std::string_view StatusPageHtml();

// Helpers for the documents the page renders (the server's and the
// gateway's use the same schema).

// Seconds since the Unix epoch: the documents' time axis.
inline double UnixNowSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A JSON number, or null where the value is NaN or infinite (the page draws
// a gap; JSON has no such numbers).
inline nlohmann::json NumberOrNull(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

}  // namespace kvs::metrics
