#include "server/reload.h"

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "http/http_server.h"
#include "server/server_metrics.h"
#include "server/service.h"

namespace kvs::server {

namespace {

// Leaf keys ("section.key") of a configuration document whose values differ.
void ChangedKeys(const nlohmann::json& a, const nlohmann::json& b, const std::string& prefix,
                 std::vector<std::string>* out) {
  if (a.is_object() && b.is_object()) {
    for (const auto& [k, v] : a.items()) {
      ChangedKeys(v, b.contains(k) ? b[k] : nlohmann::json(), prefix.empty() ? k : prefix + "." + k, out);
    }
    return;
  }
  if (a != b) out->push_back(prefix);
}

// "section.key" of a configuration document, as JSON text.
std::string ValueAt(const nlohmann::json& doc, const std::string& key) {
  const size_t dot = key.find('.');
  const nlohmann::json::json_pointer p("/" + key.substr(0, dot) + "/" + key.substr(dot + 1));
  if (!doc.contains(p)) return "(none)";
  return doc[p].is_string() ? doc[p].get<std::string>() : doc[p].dump();
}

http::ServerLimits LimitsOf(const ServeConfig& c) {
  http::ServerLimits l;
  l.max_body_bytes = static_cast<uint64_t>(c.server.max_body_bytes);
  l.max_connections = static_cast<int>(c.server.max_connections);
  l.max_connections_per_client = static_cast<int>(c.server.max_connections_per_client);
  l.keep_alive_timeout = std::chrono::milliseconds(static_cast<int64_t>(c.server.keep_alive_timeout_seconds * 1000));
  l.header_timeout = std::chrono::milliseconds(static_cast<int64_t>(c.server.header_timeout_seconds * 1000));
  return l;
}

enum class Effect { kLogLevel, kKeys, kHttpLimits, kRequestLimits };
struct LiveKey {
  const char* key;
  Effect effect;
  void (*copy)(ServeConfig& to, const ServeConfig& from);
};
// The keys a reload applies (each copied from the fresh configuration).
constexpr LiveKey kLiveKeys[] = {
    {"logging.level", Effect::kLogLevel, [](ServeConfig& t, const ServeConfig& f) { t.logging.level = f.logging.level; }},
    {"server.api_keys", Effect::kKeys, [](ServeConfig& t, const ServeConfig& f) { t.server.api_keys = f.server.api_keys; }},
    {"server.api_keys_env", Effect::kKeys,
     [](ServeConfig& t, const ServeConfig& f) { t.server.api_keys_env = f.server.api_keys_env; }},
    {"server.max_body_bytes", Effect::kHttpLimits,
     [](ServeConfig& t, const ServeConfig& f) { t.server.max_body_bytes = f.server.max_body_bytes; }},
    {"server.max_connections", Effect::kHttpLimits,
     [](ServeConfig& t, const ServeConfig& f) { t.server.max_connections = f.server.max_connections; }},
    {"server.max_connections_per_client", Effect::kHttpLimits,
     [](ServeConfig& t, const ServeConfig& f) {
       t.server.max_connections_per_client = f.server.max_connections_per_client;
     }},
    {"server.keep_alive_timeout_seconds", Effect::kHttpLimits,
     [](ServeConfig& t, const ServeConfig& f) {
       t.server.keep_alive_timeout_seconds = f.server.keep_alive_timeout_seconds;
     }},
    {"server.header_timeout_seconds", Effect::kHttpLimits,
     [](ServeConfig& t, const ServeConfig& f) { t.server.header_timeout_seconds = f.server.header_timeout_seconds; }},
    {"runtime.request_timeout_seconds", Effect::kRequestLimits,
     [](ServeConfig& t, const ServeConfig& f) {
       t.runtime.request_timeout_seconds = f.runtime.request_timeout_seconds;
     }},
    {"runtime.max_concurrent_requests", Effect::kRequestLimits,
     [](ServeConfig& t, const ServeConfig& f) {
       t.runtime.max_concurrent_requests = f.runtime.max_concurrent_requests;
     }},
};

}  // namespace

ConfigReloader::ConfigReloader(const ServeConfig& started, Service* service, http::HttpServer* server,
                               ServerMetrics* metrics)
    : started_max_concurrent_requests_(started.runtime.max_concurrent_requests),
      service_(service),
      server_(server),
      metrics_(metrics),
      applied_(started) {
  for (const char* outcome : {"ok", "failed"}) metrics_->api_key_reloads.With({outcome});  // exported at 0
}

void ConfigReloader::OnSighup(const std::function<StatusOr<ServeConfig>()>& reread) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reread) {
    StatusOr<ServeConfig> fresh = reread();
    if (fresh.ok()) {
      ApplyLocked(*fresh);
    } else {
      spdlog::error("SIGHUP: configuration not re-read (what was in force stays): {}", fresh.status().message());
    }
  }
  ReloadKeysLocked("SIGHUP");
}

void ConfigReloader::ReloadKeys(const char* why) {
  std::lock_guard<std::mutex> lock(mu_);
  ReloadKeysLocked(why);
}

void ConfigReloader::ApplyLocked(const ServeConfig& fresh) {
  const nlohmann::json before = ConfigToJson(applied_);
  const nlohmann::json now = ConfigToJson(fresh);
  std::vector<std::string> changed;
  ChangedKeys(before, now, "", &changed);
  // The document shows the inline keys as a count only.
  if (fresh.server.api_keys != applied_.server.api_keys &&
      std::find(changed.begin(), changed.end(), "server.api_keys") == changed.end()) {
    changed.push_back("server.api_keys");
  }
  if (changed.empty()) {
    spdlog::info("SIGHUP: configuration unchanged");
    return;
  }
  ServeConfig next = applied_;
  bool http_limits = false, request_limits = false;
  for (const std::string& key : changed) {
    const LiveKey* live = nullptr;
    for (const LiveKey& k : kLiveKeys) live = key == k.key ? &k : live;
    if (live && key == "runtime.max_concurrent_requests" &&
        fresh.runtime.max_concurrent_requests > started_max_concurrent_requests_) {
      spdlog::warn("SIGHUP: runtime.max_concurrent_requests {} is above the {} this server started with (its KV "
                   "plan and engine queue are sized for that); it takes effect at the next restart",
                   fresh.runtime.max_concurrent_requests, started_max_concurrent_requests_);
      continue;
    }
    if (!live) {
      spdlog::warn("SIGHUP: {} changed; it takes effect at the next restart", key);
      continue;
    }
    live->copy(next, fresh);
    if (live->effect == Effect::kKeys) {
      spdlog::info("SIGHUP: {} changed; the keys are read again", key);  // never printed
    } else {
      spdlog::info("SIGHUP: {} {} -> {}", key, ValueAt(before, key), ValueAt(now, key));
    }
    if (live->effect == Effect::kLogLevel) spdlog::set_level(spdlog::level::from_str(next.logging.level));
    http_limits |= live->effect == Effect::kHttpLimits;
    request_limits |= live->effect == Effect::kRequestLimits;
  }
  applied_ = next;
  if (http_limits) server_->SetLimits(LimitsOf(applied_));
  if (request_limits) {
    service_->SetRequestLimits(applied_.runtime.max_concurrent_requests, applied_.runtime.request_timeout_seconds);
  }
}

void ConfigReloader::ReloadKeysLocked(const char* why) {
  auto fresh = LoadApiKeys(applied_);
  if (!fresh.ok()) {
    metrics_->api_key_reloads.With({"failed"}).Inc();
    spdlog::error("{}: API keys not reloaded (the loaded keys stay in force): {}", why, fresh.status().message());
    return;
  }
  service_->SetApiKeys(*fresh);
  metrics_->api_key_reloads.With({"ok"}).Inc();
  spdlog::info("{}: API keys reloaded: {} keys", why, fresh->size());
  if (fresh->empty()) spdlog::warn("{}: no API keys configured: the API is open to anyone who can reach it", why);
}

}  // namespace kvs::server
