#include "server/access_log.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>

#include <fmt/format.h>

namespace kvs::server {

namespace {

// "2026-12-02T13:14:30.296Z"
std::string NowIso8601() {
  const auto now = std::chrono::system_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count();
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms % 1000));
}

}  // namespace

nlohmann::json AccessRecord::ToJson() const {
  nlohmann::json j;
  j["ts"] = NowIso8601();
  j["id"] = id;
  j["key_id"] = key_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(key_id);
  j["method"] = method;
  j["path"] = path;
  j["status"] = status;
  j["prompt_tokens"] = prompt_tokens;
  j["cached_tokens"] = cached_tokens;
  j["completion_tokens"] = completion_tokens;
  j["ttft_ms"] = ttft_ms ? nlohmann::json(*ttft_ms) : nlohmann::json(nullptr);
  j["duration_ms"] = duration_ms;
  j["finish_reason"] = finish_reason.empty() ? nlohmann::json(nullptr) : nlohmann::json(finish_reason);
  j["remote"] = remote;
  if (!request_id_in.empty()) j["upstream_id"] = request_id_in;
  return j;
}

StatusOr<std::unique_ptr<AccessLog>> AccessLog::Open(const std::string& where) {
  KVS_ASSIGN_OR_RETURN(std::unique_ptr<LogFile> f, LogFile::Open(where, "logging.access_log"));
  return std::unique_ptr<AccessLog>(new AccessLog(std::move(f)));
}

void AccessLog::Write(const AccessRecord& r) {
  if (!file_->enabled()) return;
  file_->WriteLine(r.ToJson().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

}  // namespace kvs::server
