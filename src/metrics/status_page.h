// The status page: one self-contained HTML document (no external
// resources) that polls the JSON document `status` beside it and renders
// it generically (title, state, facts, stat cards, a breakdown bar, time
// series, a table; the schema is in status_page.html's header comment).
// `kvserve serve` serves it at GET / with its document at GET /status
// (src/server/status.h); the gateway can mount the same page with a
// document of its own in the same schema.
#pragma once

#include <string_view>

namespace kvs::metrics {

std::string_view StatusPageHtml();

}  // namespace kvs::metrics
