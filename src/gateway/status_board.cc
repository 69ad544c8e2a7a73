#include "gateway/status_board.h"

#include <fmt/format.h>

namespace kvs::gateway {

using nlohmann::json;

namespace {

const char* StateName(const Replica& r) {
  switch (r.health()) {
    case Replica::Health::kUnknown:
      return "not probed";
    case Replica::Health::kEjected:
      return "ejected";
    case Replica::Health::kHealthy:
      break;
  }
  if (r.draining()) return "draining";
  return r.warming() ? "warming up" : "healthy";
}

// The series name of one child of a {pool, replica} family, as /metrics
// writes it (replica names are URLs: no character needs escaping).
std::string Series(const char* family, const Replica& r) {
  return fmt::format("{}{{pool=\"{}\",replica=\"{}\"}}", family, metrics::EscapeLabelValue(r.pool()),
                     metrics::EscapeLabelValue(r.name()));
}

}  // namespace

double SumCounter(const metrics::Family<metrics::Counter>& f) {
  double s = 0;
  for (const auto& [labels, c] : f.Children()) s += c->Value();
  return s;
}

double SumGauge(const metrics::Family<metrics::Gauge>& f) {
  double s = 0;
  for (const auto& [labels, g] : f.Children()) s += g->Value();
  return s;
}

metrics::Histogram::Snapshot MergedSnapshot(const metrics::Family<metrics::Histogram>& f) {
  metrics::Histogram::Snapshot out;
  for (const auto& [labels, h] : f.Children()) {
    metrics::Histogram::Snapshot s = h->Read();
    if (out.cumulative.empty()) {
      out = std::move(s);
      continue;
    }
    for (size_t i = 0; i < out.cumulative.size() && i < s.cumulative.size(); ++i) out.cumulative[i] += s.cumulative[i];
    out.sum += s.sum;
    out.count += s.count;
  }
  return out;
}

StatusBoard::StatusBoard(GatewayMetrics* metrics)
    : metrics_(metrics),
      frame_("kvserve gateway", &metrics->process,
             {{"Requests/s", "rate"},
              {"Failed (5xx)/s", "rate"},
              {"Refused (4xx)/s", "rate"},
              {"Rate-limited/s", "rate"},
              {"Upstream TTFT p50", "seconds"},
              {"Upstream TTFT p95", "seconds"},
              {"Requests in flight", "int"},
              {"Healthy replicas", "int"}}) {}

void StatusBoard::Sample() {
  const GatewayMetrics& m = *metrics_;
  const metrics::Histogram::Snapshot ttft = MergedSnapshot(m.upstream_first_byte);
  const double requests = SumCounter(m.requests);
  const double failed = metrics::StatusFrame::StatusClassSum(m.requests, '5');
  const double refused = metrics::StatusFrame::StatusClassSum(m.requests, '4');
  const double limited = SumCounter(m.rate_limited);
  const double in_flight = m.in_flight.Value();
  const double healthy = SumGauge(m.replica_healthy);
  frame_.Sample([&](metrics::StatusFrame::Interval& in) {
    return std::vector<double>{in.Rate("requests", requests), in.Rate("failed", failed), in.Rate("refused", refused),
                               in.Rate("rate_limited", limited),
                               in.Quantile("ttft", 0.5, ttft), in.Quantile("ttft", 0.95, ttft), in_flight, healthy};
  });
}

json StatusBoard::ToJson(const std::string& state, const std::vector<std::pair<std::string, std::string>>& facts,
                         const std::vector<Replica*>& replicas) {
  GatewayMetrics& m = *metrics_;
  json j = frame_.Document(state, facts);
  const auto stat = &metrics::StatusFrame::Stat;
  const auto sum = [](const char* family) { return fmt::format("sum({})", family); };
  // Healthy replicas below all of them is a warning; none is critical (the
  // page flags values above warn/crit, so the stat is the unhealthy count).
  json unhealthy = stat("Replicas out of rotation", static_cast<double>(replicas.size()) - SumGauge(m.replica_healthy),
                        "int", fmt::format("count({}) - sum({})", "kvserve_gateway:replica_healthy",
                                           "kvserve_gateway:replica_healthy"));
  unhealthy["warn"] = 0;
  unhealthy["crit"] = static_cast<double>(replicas.size()) - 1;
  j["stats"] = json::array({
      stat("Requests in flight", m.in_flight.Value(), "int", "kvserve_gateway:requests_in_flight"),
      stat("Healthy replicas", SumGauge(m.replica_healthy), "int", sum("kvserve_gateway:replica_healthy")),
      unhealthy,
      stat("Requests", SumCounter(m.requests), "int", sum("kvserve_gateway:requests_total")),
      metrics::StatusFrame::StatusClassStat("Failed (5xx)", m.requests, "kvserve_gateway:requests_total", '5'),
      metrics::StatusFrame::StatusClassStat("Refused (4xx)", m.requests, "kvserve_gateway:requests_total", '4'),
      stat("Rate-limited", SumCounter(m.rate_limited), "int", sum("kvserve_gateway:rate_limited_requests_total")),
      stat("Upstream errors", SumCounter(m.upstream_errors), "int", sum("kvserve_gateway:upstream_errors_total")),
      stat("Retries", SumCounter(m.retries), "int", sum("kvserve_gateway:retries_total")),
      stat("Ejections", SumCounter(m.ejections), "int", sum("kvserve_gateway:replica_ejections_total")),
      stat("Streams ended by an error", m.stream_errors.Value(), "int", "kvserve_gateway:stream_errors_total"),
      stat("Client disconnects", m.client_disconnects.Value(), "int", "kvserve_gateway:client_disconnects_total"),
      stat("Tokens reserved", SumCounter(m.tokens_reserved), "int", sum("kvserve_gateway:tokens_reserved_total")),
  });

  json parts = json::array();
  json rows = json::array();
  for (const Replica* r : replicas) {
    const std::string label = r->pool() + " " + r->name();
    parts.push_back({{"label", label},
                     {"value", static_cast<double>(r->outstanding_tokens())},
                     {"metric", Series("kvserve_gateway:replica_outstanding_tokens", *r)}});
    double ejections = 0;
    for (const auto& [labels, c] : m.ejections.Children()) {
      if (labels.size() == 3 && labels[0] == r->pool() && labels[1] == r->name()) ejections += c->Value();
    }
    rows.push_back(json::array({r->pool(), r->name(), StateName(*r), r->weight(), r->outstanding_tokens(),
                                r->outstanding_requests(), r->queue_length(), r->running(),
                                fmt::format("{:.1f} %", 100 * r->kv_usage()), ejections}));
  }
  j["breakdown"] = metrics::StatusFrame::Breakdown("Outstanding tokens by replica", "int", std::move(parts));
  j["table"] = metrics::StatusFrame::Table("Replicas",
                                           {"pool", "replica", "state", "weight", "outstanding tokens",
                                            "outstanding requests", "queue (scraped)", "running (scraped)",
                                            "KV watermark (scraped)", "ejections"},
                                           std::move(rows));
  return j;
}

}  // namespace kvs::gateway
