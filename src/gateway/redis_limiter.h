// Rate-limit counters in Redis, so several gateways enforce one budget.
//
// RespClient: a small blocking Redis client (RESP2 over TCP on Asio) with a
// timeout per command and a pool of connections; a connection that failed
// is dropped. Enough for the limiter's scripts, not a general client.
// RedisAddress: redis://[USER:PASSWORD@]HOST:PORT, or rediss:// for TLS (the
// server's certificate verified against a CA file and HOST). With a
// password, every new connection sends AUTH [USER] PASSWORD first (within
// the same timeout); a refused AUTH is a failed call like any other. The
// password never appears in messages (Redacted()).
//
// RedisRateLimiter: the same rules as LocalRateLimiter (limits.h), each
// admission and release one Lua script (EVALSHA), which Redis runs
// atomically, using Redis's clock (TIME) so gateways need no synchronized
// clocks. Keys (one hash tag per tenant): kvsgw:{T}:rps (hash: tokens, ts),
// kvsgw:{T}:tpm:SECOND (string, expires after the window), kvsgw:{T}:leases
// (sorted set of lease ids by expiry: the concurrency count; a crashed
// gateway's leases expire), kvsgw:global:rps.
//
// When Redis fails (error, timeout, refused), gateway.shared_state_failure
// decides: "open" admits without counting, "closed" refuses (503), "local"
// counts in this process. After a failure Redis is not asked again for a
// second, so an outage costs at most one timeout per second.
// Thread-safety: both classes are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "gateway/limits.h"
#include "http/tls.h"
#include "gateway/resp.h"
#include "http/http_client.h"
#include "metrics/metrics.h"

namespace kvs::gateway {

struct RedisAddress {
  http::Url url;         // host, port; tls (rediss) with url.tls_ca_file ("" : the system's CAs)
  std::string user;      // "" : AUTH with the password only (the default user)
  std::string password;  // "" : no AUTH

  // redis://[[USER]:PASSWORD@]HOST:PORT or rediss://...; the user and
  // password are percent-decoded.
  static StatusOr<RedisAddress> Parse(std::string_view s);
  std::string Redacted() const;  // the URL with "<redacted>" for the password
};

class RespClient {
 public:
  // tls: the verifying context (rediss), made by the caller so that a bad CA
  // file stops start-up; null for redis://.
  RespClient(RedisAddress address, std::shared_ptr<http::SslContext> tls, std::chrono::milliseconds timeout);
  ~RespClient();
  // One command; a RESP error reply is a value of type kError, not a Status.
  StatusOr<RespValue> Command(const std::vector<std::string>& args);

 private:
  class Conn;
  RedisAddress address_;
  std::shared_ptr<http::SslContext> tls_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::vector<std::unique_ptr<Conn>> idle_;  // guarded by mu_
};

struct RedisLimiterOptions {
  RedisAddress address;
  std::shared_ptr<http::SslContext> tls;  // rediss: see RespClient
  std::chrono::milliseconds timeout{250};
  std::string failure = "local";  // open, closed, local
};

class RedisRateLimiter : public RateLimiter {
 public:
  explicit RedisRateLimiter(RedisLimiterOptions options);
  AdmitResult Admit(const AdmitRequest& req) override;
  void Release(const Lease& lease, int64_t actual_tokens) override;
  const char* name() const override { return "redis"; }
  void set_error_counter(metrics::Counter* c) { errors_ = c; }

 private:
  StatusOr<RespValue> Eval(const std::string& script, std::string* sha, std::vector<std::string> keys,
                           std::vector<std::string> args);
  AdmitResult OnFailure(const AdmitRequest& req, const Status& s);

  RedisLimiterOptions options_;
  RespClient client_;
  LocalRateLimiter local_;
  std::mutex sha_mu_;
  std::string admit_sha_, release_sha_;  // guarded by sha_mu_
  std::atomic<int64_t> down_until_ns_{0};
  metrics::Counter* errors_ = nullptr;
};

}  // namespace kvs::gateway
