// Helpers for tests: where ../shared and the build tree are.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <unistd.h>
#include <vector>

namespace kvs::testing {

// Path of a file under ../shared, or "" when ../shared (or the file) is absent.
inline std::string SharedPath(const std::string& rel) {
  const char* dir = std::getenv("KVSERVE_SHARED_DIR");
  std::filesystem::path p = dir ? std::filesystem::path(dir) : std::filesystem::path("../shared");
  p /= rel;
  return std::filesystem::exists(p) ? p.string() : std::string();
}

inline std::string SourceDir() {
  const char* dir = std::getenv("KVSERVE_SOURCE_DIR");
  return dir ? dir : ".";
}

inline std::string BinaryDir() {
  const char* dir = std::getenv("KVSERVE_BINARY_DIR");
  return dir ? dir : ".";
}

// Whether the tests run under ASan/UBSan or TSan (scripts/test.sh sets
// KVSERVE_SANITIZED=1 there). Differential tests that compare many random
// cases against an oracle run a sample of them under a sanitizer, which is
// there to catch memory and threading errors, not wrong answers; the
// Release stage runs every case.
inline bool Sanitized() { return std::getenv("KVSERVE_SANITIZED") != nullptr; }

// n, or n / divisor (at least 1) under a sanitizer.
inline int SanitizerSample(int n, int divisor = 4) { return Sanitized() ? std::max(1, n / divisor) : n; }

// The directories TempDir made in this process; the destructor (at normal
// exit) removes them, so a test run leaves nothing in $TMPDIR (the model tests
// write ~0.8 GB of random models per ctest run, enough to fill a small CI disk).
// A process that crashes leaves its directories behind for a post-mortem.
class TempDirRegistry {
 public:
  static TempDirRegistry& Get() {
    static TempDirRegistry registry;
    return registry;
  }
  void Add(const std::filesystem::path& p) {
    std::lock_guard<std::mutex> lock(mu_);
    if (std::find(dirs_.begin(), dirs_.end(), p) == dirs_.end()) dirs_.push_back(p);
  }
  ~TempDirRegistry() {
    for (const auto& p : dirs_) {
      std::error_code ec;  // best effort: never throw from a destructor at exit
      std::filesystem::remove_all(p, ec);
    }
  }

 private:
  TempDirRegistry() = default;
  std::mutex mu_;
  std::vector<std::filesystem::path> dirs_;  // guarded by mu_
};

// A fresh temporary directory for one test, removed when the process exits.
inline std::filesystem::path TempDir(const std::string& name) {
  auto p = std::filesystem::temp_directory_path() / ("kvserve_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(p);
  TempDirRegistry::Get().Add(p);
  return p;
}

}  // namespace kvs::testing

// Skips the test cleanly with a message when a ../shared file is missing.
#define KVS_REQUIRE_SHARED(var, rel)                                              \
  const std::string var = ::kvs::testing::SharedPath(rel);                        \
  if (var.empty()) GTEST_SKIP() << "../shared/" << (rel) << " is absent; skipping"
