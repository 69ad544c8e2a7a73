#include "base/random_id.h"

#include <chrono>
#include <cstdint>
#include <random>

namespace kvs {

std::string RandomHex(size_t n) {
  // Seeded per thread from the device and the clock: random_device alone may
  // be deterministic on some platforms.
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  s.reserve(n);
  for (size_t i = 0; i < n; ++i) s += kDigits[rng() & 15];
  return s;
}

}  // namespace kvs
