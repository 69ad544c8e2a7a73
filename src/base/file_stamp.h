// FileStamp: what changes when a file is rewritten or replaced (a rename
// onto it, as `mv`, editors and Kubernetes Secret updates do): its
// modification time and size. The processes that re-read a file when it
// changes (key files, TLS certificates) poll it with this.
// Thread-safety: a pure function over the file system; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvs {

struct FileStamp {
  int64_t mtime_ns = 0;
  int64_t size = 0;
  bool operator==(const FileStamp&) const = default;
};

// nullopt when the file cannot be stat'ed (missing, no permission).
std::optional<FileStamp> StampOf(const std::string& path);

}  // namespace kvs
