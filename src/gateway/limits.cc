#include "gateway/limits.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace kvs::gateway {

const char* LimitReasonName(LimitReason r) {
  switch (r) {
    case LimitReason::kNone: return "none";
    case LimitReason::kGlobalRequests: return "global_requests";
    case LimitReason::kRequests: return "requests";
    case LimitReason::kConcurrency: return "concurrency";
    case LimitReason::kTokens: return "tokens";
    case LimitReason::kTooLarge: return "too_large";
    case LimitReason::kUnavailable: return "unavailable";
  }
  return "?";
}

LocalRateLimiter::LocalRateLimiter() = default;

double LocalRateLimiter::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Refills b to now; takes one token if there is one, else says when there
// will be.
bool LocalRateLimiter::Take(Bucket& b, double rate, double burst, double now, double* retry_after) {
  if (b.tokens < 0) {
    b.tokens = burst;
    b.last = now;
  }
  b.tokens = std::min(burst, b.tokens + std::max(0.0, now - b.last) * rate);
  b.last = now;
  if (b.tokens >= 1) return true;
  *retry_after = (1 - b.tokens) / rate;
  return false;
}

void LocalRateLimiter::Prune(TenantState& t, int64_t now_sec) {
  while (!t.token_buckets.empty() && t.token_buckets.begin()->first <= now_sec - kTokenWindowBuckets) {
    t.token_buckets.erase(t.token_buckets.begin());
  }
}

AdmitResult LocalRateLimiter::Admit(const AdmitRequest& req) { return AdmitAt(req, Now()); }

AdmitResult LocalRateLimiter::AdmitAt(const AdmitRequest& req, double now) {
  AdmitResult r;
  const TenantLimits& l = req.limits;
  if (l.tokens_per_minute > 0 && req.tokens > l.tokens_per_minute) {
    r.reason = LimitReason::kTooLarge;
    return r;
  }
  std::lock_guard<std::mutex> lock(mu_);
  TenantState& t = tenants_[req.tenant];
  const int64_t sec = static_cast<int64_t>(std::floor(now));
  Prune(t, sec);
  int64_t used = 0;
  for (const auto& [s, n] : t.token_buckets) used += n;
  r.tokens_used = used;

  // Check everything first (on copies of the buckets), then commit.
  Bucket global = global_, mine = t.requests;
  double wait = 0;
  if (req.global_rps > 0 && !Take(global, req.global_rps, std::max(1.0, req.global_rps), now, &wait)) {
    r.reason = LimitReason::kGlobalRequests;
    r.retry_after_seconds = wait;
    return r;
  }
  if (l.max_concurrent > 0 && t.in_flight >= l.max_concurrent) {
    r.reason = LimitReason::kConcurrency;
    r.retry_after_seconds = 1;
    return r;
  }
  const double burst = l.burst > 0 ? l.burst : std::max(1.0, l.requests_per_second);
  if (l.requests_per_second > 0 && !Take(mine, l.requests_per_second, burst, now, &wait)) {
    r.reason = LimitReason::kRequests;
    r.retry_after_seconds = wait;
    return r;
  }
  if (l.tokens_per_minute > 0 && used + req.tokens > l.tokens_per_minute) {
    // Wait until enough old charges leave the window.
    int64_t freed = 0;
    const int64_t need = used + req.tokens - l.tokens_per_minute;
    r.retry_after_seconds = kTokenWindowBuckets;
    for (const auto& [s, n] : t.token_buckets) {
      freed += n;
      if (freed >= need) {
        r.retry_after_seconds = std::max(0.0, static_cast<double>(s + kTokenWindowBuckets) - now);
        break;
      }
    }
    r.reason = LimitReason::kTokens;
    return r;
  }
  if (req.global_rps > 0) {
    global.tokens -= 1;
    global_ = global;
  }
  if (l.requests_per_second > 0) {
    mine.tokens -= 1;
    t.requests = mine;
  }
  ++t.in_flight;
  t.token_buckets[sec] += req.tokens;
  r.admitted = true;
  r.lease = Lease{req.tenant, req.lease_id, req.tokens, sec, true};
  return r;
}

void LocalRateLimiter::Release(const Lease& lease, int64_t actual_tokens) {
  if (!lease.counted) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tenants_.find(lease.tenant);
  if (it == tenants_.end()) return;
  TenantState& t = it->second;
  if (t.in_flight > 0) --t.in_flight;
  auto b = t.token_buckets.find(lease.bucket);
  if (b != t.token_buckets.end()) b->second = std::max<int64_t>(0, b->second + actual_tokens - lease.tokens);
}

int64_t LocalRateLimiter::TokensInWindow(const std::string& tenant, double now) {
  std::lock_guard<std::mutex> lock(mu_);
  TenantState& t = tenants_[tenant];
  Prune(t, static_cast<int64_t>(std::floor(now)));
  int64_t used = 0;
  for (const auto& [s, n] : t.token_buckets) used += n;
  return used;
}

}  // namespace kvs::gateway
