// Random identifiers for requests and responses ("req-…", "gw-…"): unique
// enough to tell requests apart in logs and headers; not for secrets.
// Thread-safety: thread-safe (each thread has its own generator).
#pragma once

#include <cstddef>
#include <string>

namespace kvs {

// n random lowercase hex digits.
std::string RandomHex(size_t n);

}  // namespace kvs
