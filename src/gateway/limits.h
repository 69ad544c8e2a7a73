// Rate limits counted before admission.
//
// Per tenant: requests per second (token bucket of size `burst`), tokens per
// minute, requests in flight; plus a global requests-per-second bucket.
// Tokens are charged when a request is admitted, as prompt tokens +
// max_tokens (x n), and corrected when it ends with what it really used, so
// no burst can overrun the budget by more than what is reserved: admission
// requires used + reservation <= limit, where used sums the charges of the
// last 60 s (61 one-second buckets, so any 60 s window is covered). A request
// whose reservation alone exceeds the limit can never run and is refused as
// too large (OpenAI answers that case with 429 too).
//
// Implementations: LocalRateLimiter (this process) and RedisRateLimiter
// (redis_limiter.h: one budget for several gateways). Both apply the same
// rules; Admit is all-or-nothing.
// Thread-safety: every method is thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "gateway/keys.h"

namespace kvs::gateway {

inline constexpr int kTokenWindowBuckets = 61;  // seconds covered by tokens_per_minute

struct AdmitRequest {
  std::string tenant;
  TenantLimits limits;
  int64_t tokens = 0;             // reservation: prompt + max_tokens (x n)
  double global_rps = 0;          // gateway.rate_limit_per_second; 0: none
  std::string lease_id;           // unique per request
  double lease_seconds = 600;     // a lease not released by then is dropped (a crashed gateway's)
};

enum class LimitReason { kNone, kGlobalRequests, kRequests, kConcurrency, kTokens, kTooLarge, kUnavailable };
const char* LimitReasonName(LimitReason r);  // "global_requests", "requests", ...

struct Lease {
  std::string tenant;
  std::string id;
  int64_t tokens = 0;     // reserved
  int64_t bucket = 0;     // the second it was charged to
  bool counted = true;    // false when admitted without counting (fail-open)
  bool local = false;     // counted by a shared limiter's local fallback
};

struct AdmitResult {
  bool admitted = false;
  LimitReason reason = LimitReason::kNone;
  double retry_after_seconds = 0;  // when a retry could succeed
  int64_t tokens_used = 0;         // in the window, before this request
  Lease lease;                     // when admitted
};

class RateLimiter {
 public:
  virtual ~RateLimiter() = default;
  virtual AdmitResult Admit(const AdmitRequest& req) = 0;
  // Ends a lease: frees its concurrency slot and corrects its token charge
  // to `actual` (if its bucket is still in the window).
  virtual void Release(const Lease& lease, int64_t actual_tokens) = 0;
  virtual const char* name() const = 0;
};

class LocalRateLimiter : public RateLimiter {
 public:
  LocalRateLimiter();
  AdmitResult Admit(const AdmitRequest& req) override;
  void Release(const Lease& lease, int64_t actual_tokens) override;
  const char* name() const override { return "local"; }

  // For tests: admission at an explicit time (seconds on any monotonic scale).
  AdmitResult AdmitAt(const AdmitRequest& req, double now);
  int64_t TokensInWindow(const std::string& tenant, double now);

 private:
  struct Bucket {
    double tokens = -1;  // -1: not started (full)
    double last = 0;
  };
  struct TenantState {
    Bucket requests;
    std::map<int64_t, int64_t> token_buckets;  // second -> tokens charged
    int64_t in_flight = 0;
  };
  double Now() const;
  static bool Take(Bucket& b, double rate, double burst, double now, double* retry_after);
  static void Prune(TenantState& t, int64_t now_sec);

  std::mutex mu_;
  Bucket global_;
  std::map<std::string, TenantState> tenants_;
};

}  // namespace kvs::gateway
