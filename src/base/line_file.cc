#include "base/line_file.h"

#include <fstream>

namespace kvs {

Status ForEachContentLine(const std::string& path,
                          const std::function<Status(const std::string& line, size_t first, int line_no)>& fn) {
  std::ifstream in(path);
  if (!in) return NotFound("cannot read \"{}\"", path);
  int line_no = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    KVS_RETURN_IF_ERROR(fn(line, first, line_no));
  }
  if (in.bad()) return NotFound("cannot read \"{}\"", path);
  return Status::Ok();
}

StatusOr<std::vector<std::string>> ReadApiKeyFile(const std::string& path) {
  std::vector<std::string> keys;
  KVS_RETURN_IF_ERROR(ForEachContentLine(path, [&](const std::string& line, size_t first, int) {
    size_t end = line.size();
    for (size_t i = first + 1; i < line.size(); ++i) {
      if (line[i] == '#' && (line[i - 1] == ' ' || line[i - 1] == '\t')) {
        end = i;
        break;
      }
    }
    const size_t last = line.find_last_not_of(" \t", end - 1);
    keys.push_back(line.substr(first, last - first + 1));
    return Status::Ok();
  }));
  if (keys.empty()) return InvalidArgument("\"{}\" holds no key (one key per line)", path);
  return keys;
}

}  // namespace kvs
