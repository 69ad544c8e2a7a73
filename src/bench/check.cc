#include "bench/check.h"

#include <fmt/format.h>

namespace kvs::bench {

const char* CheckStatusName(CheckStatus s) {
  switch (s) {
    case CheckStatus::kPass: return "PASS";
    case CheckStatus::kFail: return "FAIL";
    case CheckStatus::kSkip: return "SKIP";
  }
  return "?";
}

std::string Check::Line() const { return fmt::format("{} {}: {}", CheckStatusName(status), name, detail); }

nlohmann::json Check::ToJson() const {
  return {{"name", name},
          {"status", CheckStatusName(status)},
          {"detail", detail},
          {"value", value ? nlohmann::json(*value) : nlohmann::json(nullptr)},
          {"threshold", threshold ? nlohmann::json(*threshold) : nlohmann::json(nullptr)}};
}

}  // namespace kvs::bench
