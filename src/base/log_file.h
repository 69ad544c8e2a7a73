// LogFile: where a line-per-record log goes (the server's access log, the
// gateway's audit log): "stdout", "stderr", "off", or a file path.
//
// A file is opened for appending with mode 0600 (these logs name keys,
// tenants and clients: never readable by other users, whatever the umask),
// without following a symlink at the path. Reopen() closes the file and
// opens the path again: after logrotate (or an operator) has moved the file
// away, SIGHUP makes the process write to a new file at the path instead of
// the moved one. Each line is written whole and flushed.
// Thread-safety: every method is thread-safe.
#pragma once

#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kvs {

class LogFile {
 public:
  // what: the configuration key, for error messages ("logging.access_log").
  static StatusOr<std::unique_ptr<LogFile>> Open(const std::string& where, std::string_view what);
  ~LogFile();
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  bool enabled() const { return kind_ != Kind::kOff; }
  // Appends line + '\n'.
  void WriteLine(std::string_view line);
  // Files only (a no-op for stdout, stderr, off): opens the path again. On
  // error the current file stays in use and the error is returned.
  Status Reopen();

 private:
  enum class Kind { kOff, kStdout, kStderr, kFile };
  LogFile(Kind kind, std::string path, std::string what, FILE* f)
      : kind_(kind), path_(std::move(path)), what_(std::move(what)), file_(f) {}
  static StatusOr<FILE*> OpenPath(const std::string& path, std::string_view what);

  const Kind kind_;
  const std::string path_;
  const std::string what_;
  std::mutex mu_;
  FILE* file_;  // guarded by mu_ for kFile
};

}  // namespace kvs
