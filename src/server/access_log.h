// AccessLog: one JSON object per line per HTTP request, to stdout, stderr or
// an append-only file. Fields (docs/api.md): ts, id, key_id (a short hash of
// the API key, never the key), method, path, status, prompt_tokens,
// cached_tokens, completion_tokens, ttft_ms, duration_ms, finish_reason,
// remote, and upstream_id (the caller's X-Request-Id, when it sent one).
// Thread-safety: Write is thread-safe; each line is written whole.
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/log_file.h"
#include "base/status.h"

namespace kvs::server {

struct AccessRecord {
  std::string id;
  std::string key_id;  // "" when unauthenticated
  std::string method;
  std::string path;
  int status = 0;
  int64_t prompt_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t completion_tokens = 0;
  std::optional<double> ttft_ms;
  double duration_ms = 0;
  std::string finish_reason;  // "" for non-generation requests
  std::string remote;
  // The X-Request-Id the caller sent (the gateway's id for the request, so
  // one request is found in both logs); "" when none. At most 128 printable
  // ASCII characters are kept.
  std::string request_id_in;

  nlohmann::json ToJson() const;
};

class AccessLog {
 public:
  // "stdout", "stderr", "off" or a file path (created 0600 or appended:
  // base/log_file.h).
  static StatusOr<std::unique_ptr<AccessLog>> Open(const std::string& where);

  void Write(const AccessRecord& r);
  bool enabled() const { return file_->enabled(); }
  // SIGHUP: a file is opened again at its path (log rotation).
  Status Reopen() { return file_->Reopen(); }

 private:
  explicit AccessLog(std::unique_ptr<LogFile> f) : file_(std::move(f)) {}
  std::unique_ptr<LogFile> file_;
};

}  // namespace kvs::server
