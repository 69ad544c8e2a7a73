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

// FileWatch: when a polled file should be (re)loaded. A change is reported
// only once the file's stamp has held still for one poll: most tools
// rewrite a file in place (truncate, then write), and a poll that read it in
// between would load an empty or half-written file -- a key file with no
// keys, so every request gets 401 until the next change. A change is
// reported once (a file that fails to load is tried again when it changes
// again); a missing file reports nothing (what was loaded stays).
// Thread-safety: not thread-safe; one poller owns it.
class FileWatch {
 public:
  explicit FileWatch(std::optional<FileStamp> loaded) : loaded_(loaded) {}
  // Given the stamp seen now: true when the file should be loaded.
  bool Poll(const std::optional<FileStamp>& now);

 private:
  std::optional<FileStamp> loaded_;   // the stamp last reported (or seen at start)
  std::optional<FileStamp> pending_;  // a changed stamp seen at the previous poll
};

}  // namespace kvs
