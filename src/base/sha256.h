// SHA-256 helpers (OpenSSL EVP): of a string, and of a file read in 4 MiB
// pieces (weights are verified and fingerprinted at load).
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace kvs {

std::string Sha256Hex(std::string_view data);  // 64 lowercase hex digits
StatusOr<std::string> Sha256File(const std::string& path);

}  // namespace kvs
