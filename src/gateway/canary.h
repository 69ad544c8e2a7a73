// Canary: the release split of one pool between its stable replicas and
// those of PoolConfig::canary_version, and the automatic rollback.
//
// A request's sticky key (its tenant, or the value of the pool's
// sticky_header) hashes (FNV-1a, the same in every gateway process) to a
// bucket in [0, 100); buckets below canary_weight go to the canary. Raising
// the weight only adds buckets, so a tenant on the canary stays there, and
// the weight changes at once on reload (set_weight) without touching
// requests in flight.
//
// Record takes each attempt's outcome (ok, or an error: 5xx, no answer,
// broken stream) with the version it ran on; over the last window_seconds,
// when the canary has min_requests attempts and its error rate exceeds the
// stable version's by more than the margin, the weight drops to 0 (rolled
// back) and Record returns true once.
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>

#include "gateway/config.h"

namespace kvs::gateway {

class Canary {
 public:
  using Clock = std::chrono::steady_clock;
  explicit Canary(const PoolConfig& pc);

  bool enabled() const { return enabled_.load(); }
  // "" when disabled.
  std::string version() const {
    std::lock_guard<std::mutex> lock(mu_);
    return version_;
  }
  // A reload named another canary_version (a new release, or
  // scripts/bluegreen.sh moving the label to the slot it deploys): a new
  // canary at `percent`, with an empty window and no rollback on record.
  void Reset(std::string version, double percent);
  double weight() const { return weight_.load(); }
  void set_weight(double percent) { weight_.store(percent); }
  // Whether this canary version was rolled back (by Record, or restored from
  // the gateway's state file): a reload keeps its weight at 0 until the
  // configuration itself says 0 (Acknowledge).
  bool rolled_back() const { return rolled_back_.load(); }
  void MarkRolledBack() {
    weight_.store(0);
    rolled_back_.store(true);
  }
  // The configuration agrees with a rollback (its canary_weight is 0): the
  // record is cleared, with the window's outcomes, so that a later weight
  // (a new release on the same version label, as scripts/bluegreen.sh's
  // slots are) starts a fresh canary.
  void Acknowledge();
  // Bucket of a sticky key, [0, 100).
  static double Bucket(std::string_view key);
  bool ForCanary(std::string_view sticky_key) const { return enabled() && Bucket(sticky_key) < weight(); }

  // One attempt's outcome; true when this call rolled the canary back.
  bool Record(bool canary, bool ok, Clock::time_point now);
  // Error rates in the window (for tests and the status page): attempts and errors.
  struct Rates {
    int64_t canary_attempts = 0, canary_errors = 0, stable_attempts = 0, stable_errors = 0;
  };
  Rates Window(Clock::time_point now);

 private:
  struct Outcome {
    Clock::time_point at;
    bool canary;
    bool ok;
  };
  void Prune(Clock::time_point now);  // REQUIRES: mu_ held

  std::string version_;  // guarded by mu_
  std::atomic<bool> enabled_;  // !version_.empty()
  const double margin_;
  const Clock::duration window_;
  const int64_t min_requests_;
  std::atomic<double> weight_;
  std::atomic<bool> rolled_back_{false};
  mutable std::mutex mu_;
  std::deque<Outcome> outcomes_;  // guarded by mu_; in time order
  Rates rates_;                   // guarded by mu_; of outcomes_
};

}  // namespace kvs::gateway
