#include "gateway/canary.h"

namespace kvs::gateway {

namespace {
constexpr size_t kMaxOutcomes = 1 << 20;
}

Canary::Canary(const PoolConfig& pc)
    : version_(pc.canary_version),
      enabled_(!pc.canary_version.empty()),
      margin_(pc.canary_max_error_rate_margin),
      window_(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(pc.canary_window_seconds))),
      min_requests_(pc.canary_min_requests),
      weight_(pc.canary_version.empty() ? 0 : pc.canary_weight) {}

double Canary::Bucket(std::string_view key) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a 64
  for (unsigned char c : key) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return static_cast<double>(h % 10000) / 100.0;
}

void Canary::Prune(Clock::time_point now) {
  while (!outcomes_.empty() && (now - outcomes_.front().at > window_ || outcomes_.size() > kMaxOutcomes)) {
    const Outcome& o = outcomes_.front();
    (o.canary ? rates_.canary_attempts : rates_.stable_attempts) -= 1;
    if (!o.ok) (o.canary ? rates_.canary_errors : rates_.stable_errors) -= 1;
    outcomes_.pop_front();
  }
}

bool Canary::Record(bool canary, bool ok, Clock::time_point now) {
  if (!enabled()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  outcomes_.push_back({now, canary, ok});
  (canary ? rates_.canary_attempts : rates_.stable_attempts) += 1;
  if (!ok) (canary ? rates_.canary_errors : rates_.stable_errors) += 1;
  Prune(now);
  if (margin_ <= 0 || weight_.load() <= 0 || rates_.canary_attempts < min_requests_) return false;
  const double canary_rate = static_cast<double>(rates_.canary_errors) / static_cast<double>(rates_.canary_attempts);
  const double stable_rate = rates_.stable_attempts == 0 ? 0.0
                                                         : static_cast<double>(rates_.stable_errors) /
                                                               static_cast<double>(rates_.stable_attempts);
  if (canary_rate <= stable_rate + margin_) return false;
  MarkRolledBack();
  return true;
}

void Canary::Reset(std::string version, double percent) {
  std::lock_guard<std::mutex> lock(mu_);
  enabled_.store(!version.empty());
  version_ = std::move(version);
  weight_.store(version_.empty() ? 0 : percent);
  rolled_back_.store(false);
  outcomes_.clear();
  rates_ = Rates{};
}

void Canary::Acknowledge() {
  std::lock_guard<std::mutex> lock(mu_);
  weight_.store(0);
  rolled_back_.store(false);
  outcomes_.clear();
  rates_ = Rates{};
}

Canary::Rates Canary::Window(Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  Prune(now);
  return rates_;
}

}  // namespace kvs::gateway
