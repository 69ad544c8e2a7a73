#include "base/log_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvs {

StatusOr<FILE*> LogFile::OpenPath(const std::string& path, std::string_view what) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return IoError("{}: cannot open \"{}\" for appending: {}", what, path, std::strerror(errno));
  // An existing file keeps its owner; its mode is narrowed to the owner's.
  struct stat st {};
  if (::fstat(fd, &st) == 0 && (st.st_mode & 077) != 0) (void)::fchmod(fd, st.st_mode & 0700);
  FILE* f = ::fdopen(fd, "a");
  if (!f) {
    const int err = errno;
    ::close(fd);
    return IoError("{}: cannot open \"{}\": {}", what, path, std::strerror(err));
  }
  return f;
}

StatusOr<std::unique_ptr<LogFile>> LogFile::Open(const std::string& where, std::string_view what) {
  if (where == "off") return std::unique_ptr<LogFile>(new LogFile(Kind::kOff, "", std::string(what), nullptr));
  if (where == "stdout") return std::unique_ptr<LogFile>(new LogFile(Kind::kStdout, "", std::string(what), stdout));
  if (where == "stderr") return std::unique_ptr<LogFile>(new LogFile(Kind::kStderr, "", std::string(what), stderr));
  KVS_ASSIGN_OR_RETURN(FILE * f, OpenPath(where, what));
  return std::unique_ptr<LogFile>(new LogFile(Kind::kFile, where, std::string(what), f));
}

LogFile::~LogFile() {
  if (kind_ == Kind::kFile && file_) std::fclose(file_);
}

void LogFile::WriteLine(std::string_view line) {
  if (kind_ == Kind::kOff) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::fwrite(line.data(), 1, line.size(), file_);
  std::fputc('\n', file_);
  std::fflush(file_);
}

Status LogFile::Reopen() {
  if (kind_ != Kind::kFile) return Status::Ok();
  KVS_ASSIGN_OR_RETURN(FILE * f, OpenPath(path_, what_));
  std::lock_guard<std::mutex> lock(mu_);
  std::fclose(file_);
  file_ = f;
  return Status::Ok();
}

}  // namespace kvs
