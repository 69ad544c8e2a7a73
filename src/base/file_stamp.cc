#include "base/file_stamp.h"

#include <sys/stat.h>

namespace kvs {

std::optional<FileStamp> StampOf(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec,
                   static_cast<int64_t>(st.st_size)};
}

}  // namespace kvs

namespace kvs {

bool FileWatch::Poll(const std::optional<FileStamp>& now) {
  if (!now || now == loaded_) {
    pending_.reset();
    return false;
  }
  if (now != pending_) {  // changed since the previous poll: it may still be being written
    pending_ = now;
    return false;
  }
  loaded_ = now;
  pending_.reset();
  return true;
}

}  // namespace kvs
