// Line-oriented text files written by people (warm-up prompt lists): one
// entry a line, blank lines and '#' comments allowed, Windows line ends
// tolerated. Thread-safety: a function over its arguments.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"

namespace kvs {

// Calls fn(line, first, line_no) for each line of the file at `path` that is
// neither blank nor a '#' comment (both judged after leading spaces and
// tabs), without a trailing '\r'; `first` is the index of its first byte that
// is not a space or tab, line_no counts from 1. Stops at fn's first error and
// returns it. NotFound "cannot read \"path\"" when the file cannot be opened
// or reading it fails.
Status ForEachContentLine(const std::string& path,
                          const std::function<Status(const std::string& line, size_t first, int line_no)>& fn);

// The keys of an API key file (`kvserve serve`'s server.api_key_file, which
// the gateway's pools[].api_key_file may share): one key a line, spaces
// around it dropped; '#' starts a comment at the start of a line or after a
// space or tab (inside a key, "abc#def", it is part of the key). NotFound
// "cannot read \"path\"", InvalidArgument when the file holds no key.
StatusOr<std::vector<std::string>> ReadApiKeyFile(const std::string& path);

}  // namespace kvs
