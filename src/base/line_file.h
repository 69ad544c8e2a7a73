// Line-oriented text files written by people (warm-up prompt lists): one
// entry a line, blank lines and '#' comments allowed, Windows line ends
// tolerated. Thread-safety: a function over its arguments.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

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

}  // namespace kvs
