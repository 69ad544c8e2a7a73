// A go-live check's verdict: PASS, FAIL or SKIP (no data: never PASS),
// with the numbers that decided it. Shared by the benchmark's reports.
// Thread-safety: a value type.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace kvs::bench {

enum class CheckStatus { kPass, kFail, kSkip };
const char* CheckStatusName(CheckStatus s);  // "PASS", "FAIL", "SKIP"

struct Check {
  std::string name;
  CheckStatus status = CheckStatus::kSkip;
  std::string detail;  // the numbers
  std::optional<double> value, threshold;
  std::string Line() const;  // "PASS kv_watermark: peak KV use 41.2 % <= 90 %"
  nlohmann::json ToJson() const;
};

}  // namespace kvs::bench
