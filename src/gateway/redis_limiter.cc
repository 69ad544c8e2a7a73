#include "gateway/redis_limiter.h"

#include <cctype>
#include <charconv>
#include <cmath>

#include <boost/asio.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvs::gateway {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

// One connection with its own io_context: each command runs the async ops
// under run_for(timeout), which gives blocking calls a deadline.
class RespClient::Conn {
 public:
  Conn() : stream_(ioc_) {}

  // TCP connect, TLS handshake (rediss) and AUTH, all within timeout.
  Status Connect(const RedisAddress& address, const std::shared_ptr<http::SslContext>& tls,
                 std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    boost::system::error_code ec;
    tcp::resolver resolver(ioc_);
    auto results = resolver.resolve(address.url.host, std::to_string(address.url.port), ec);
    if (ec) return Status(StatusCode::kUnavailable, "cannot resolve Redis host: " + ec.message());
    bool done = false;
    asio::async_connect(stream_.socket(), results, [&](boost::system::error_code e, const tcp::endpoint&) {
      ec = e;
      done = true;
    });
    Run(timeout, &done);
    if (!done) return Status(StatusCode::kDeadlineExceeded, "connecting to Redis timed out");
    if (ec) return Status(StatusCode::kUnavailable, "cannot connect to Redis: " + ec.message());
    stream_.socket().set_option(tcp::no_delay(true), ec);
    if (tls) {
      KVS_RETURN_IF_ERROR(stream_.StartTls(tls, address.url.host));
      done = false;
      stream_.tls().async_handshake(asio::ssl::stream_base::client, [&](boost::system::error_code e) {
        ec = e;
        done = true;
      });
      Run(Left(end), &done);
      if (!done) return Status(StatusCode::kDeadlineExceeded, "the TLS handshake with Redis timed out");
      if (ec) {
        return Status(StatusCode::kUnavailable,
                      "TLS handshake with Redis failed: " + http::TlsErrorMessage(ec, stream_.tls().native_handle()));
      }
    }
    if (!address.password.empty()) {
      std::vector<std::string> auth = {"AUTH"};
      if (!address.user.empty()) auth.push_back(address.user);
      auth.push_back(address.password);
      auto r = Command(EncodeRespCommand(auth), Left(end));
      if (!r.ok()) return r.status();
      // The reply names no secret ("WRONGPASS invalid username-password pair").
      if (r->type == RespValue::Type::kError) return Status(StatusCode::kUnavailable, "Redis refused AUTH: " + r->str);
    }
    return Status::Ok();
  }

  StatusOr<RespValue> Command(const std::string& wire, std::chrono::milliseconds timeout) {
    const auto end = std::chrono::steady_clock::now() + timeout;
    boost::system::error_code ec;
    bool done = false;
    stream_.With([&](auto& s) {
      asio::async_write(s, asio::buffer(wire), [&](boost::system::error_code e, size_t) {
        ec = e;
        done = true;
      });
    });
    Run(std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now()), &done);
    if (!done) return Status(StatusCode::kDeadlineExceeded, "Redis did not take the command in time");
    if (ec) return Status(StatusCode::kUnavailable, "writing to Redis: " + ec.message());
    for (;;) {
      RespValue v;
      size_t used = 0;
      const int r = ParseResp(buf_, &used, &v);
      if (r < 0) return DataLoss("Redis sent something that is not RESP");
      if (r > 0) {
        buf_.erase(0, used);
        return v;
      }
      char tmp[4096];
      size_t n = 0;
      done = false;
      stream_.With([&](auto& s) {
        s.async_read_some(asio::buffer(tmp), [&](boost::system::error_code e, size_t got) {
          ec = e;
          n = got;
          done = true;
        });
      });
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
      Run(left, &done);
      if (!done) return Status(StatusCode::kDeadlineExceeded, "Redis did not answer in time");
      if (ec) return Status(StatusCode::kUnavailable, "reading from Redis: " + ec.message());
      buf_.append(tmp, n);
    }
  }

 private:
  // Runs the io_context until *done or the timeout; on timeout the pending
  // operation is cancelled (and the connection must not be reused).
  void Run(std::chrono::milliseconds timeout, bool* done) {
    ioc_.restart();
    if (timeout.count() > 0) {
      const auto end = std::chrono::steady_clock::now() + timeout;
      while (!*done && std::chrono::steady_clock::now() < end) {
        ioc_.run_one_until(end);
      }
    }
    if (!*done) {
      boost::system::error_code ec;
      stream_.socket().close(ec);
      ioc_.restart();
      ioc_.poll();  // let the cancelled handler run while its captures live
    }
  }

  static std::chrono::milliseconds Left(std::chrono::steady_clock::time_point end) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
  }

  asio::io_context ioc_;
  http::ClientStream stream_;
  std::string buf_;
};

namespace {

// %XX escapes (a password may hold ':' or '@'); others are kept as written.
std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

StatusOr<RedisAddress> RedisAddress::Parse(std::string_view s) {
  RedisAddress a;
  std::string_view rest;
  if (s.rfind("redis://", 0) == 0) {
    rest = s.substr(8);
  } else if (s.rfind("rediss://", 0) == 0) {
    rest = s.substr(9);
    a.url.tls = true;
  } else {
    return InvalidArgument("expected redis://[USER:PASSWORD@]HOST:PORT or rediss://...");
  }
  // The last '@' ends the credentials (a password may contain one).
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    const std::string_view cred = rest.substr(0, at);
    rest = rest.substr(at + 1);
    const size_t colon = cred.find(':');
    if (colon == std::string_view::npos) {
      a.password = PercentDecode(cred);  // redis://PASSWORD@HOST:PORT
    } else {
      a.user = PercentDecode(cred.substr(0, colon));
      a.password = PercentDecode(cred.substr(colon + 1));
    }
  }
  auto u = http::Url::Parse("http://" + std::string(rest));
  if (!u.ok() || !u->base_path.empty()) {
    return InvalidArgument("expected redis://[USER:PASSWORD@]HOST:PORT or rediss://... (the host and port: {})",
                           u.ok() ? "no path is allowed" : u.status().message());
  }
  a.url.host = u->host;
  a.url.port = u->port;
  const size_t bracket = rest.rfind(']');
  if (rest.find(':', bracket == std::string_view::npos ? 0 : bracket) == std::string_view::npos) a.url.port = 6379;
  return a;
}

std::string RedisAddress::Redacted() const {
  std::string out = url.tls ? "rediss://" : "redis://";
  if (!user.empty() || !password.empty()) out += user + (password.empty() ? "" : ":<redacted>") + "@";
  return out + url.HostPort();
}

RespClient::RespClient(RedisAddress address, std::shared_ptr<http::SslContext> tls, std::chrono::milliseconds timeout)
    : address_(std::move(address)), tls_(std::move(tls)), timeout_(timeout) {}

RespClient::~RespClient() = default;

StatusOr<RespValue> RespClient::Command(const std::vector<std::string>& args) {
  std::unique_ptr<Conn> conn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      conn = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!conn) {
    conn = std::make_unique<Conn>();
    KVS_RETURN_IF_ERROR(conn->Connect(address_, tls_, timeout_));
  }
  auto r = conn->Command(EncodeRespCommand(args), timeout_);
  if (r.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(conn));
  }
  return r;
}

// ---------------------------------------------------------------------------
// The limiter's scripts. KEYS[1] = "kvsgw:{tenant}:", KEYS[2] = the global
// bucket. Numbers travel as strings; Redis's clock decides the time.

namespace {

constexpr std::string_view kAdmitScript = R"lua(
local t = redis.call('TIME')
local sec = tonumber(t[1])
local now = sec + tonumber(t[2]) / 1000000
local p = KEYS[1]
local tokens = tonumber(ARGV[1])
local rps, burst = tonumber(ARGV[2]), tonumber(ARGV[3])
local tpm, maxc = tonumber(ARGV[4]), tonumber(ARGV[5])
local grps, lease, lease_s = tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
local window = tonumber(ARGV[9])
local function refill(key, rate, size)
  local v = redis.call('HMGET', key, 'tokens', 'ts')
  local tok, ts = tonumber(v[1]), tonumber(v[2])
  if tok == nil then return size end
  return math.min(size, tok + math.max(0, now - ts) * rate)
end
local keys = {}
for s = sec - window + 1, sec do keys[#keys + 1] = p .. 'tpm:' .. s end
local vals = redis.call('MGET', unpack(keys))
local used = 0
for i = 1, #vals do used = used + (tonumber(vals[i]) or 0) end
local g = 0
if grps > 0 then
  g = refill(KEYS[2], grps, math.max(1, grps))
  if g < 1 then return {0, 1, tostring((1 - g) / grps), used, sec} end
end
redis.call('ZREMRANGEBYSCORE', p .. 'leases', '-inf', now)
if maxc > 0 and redis.call('ZCARD', p .. 'leases') >= maxc then return {0, 2, '1', used, sec} end
local b = 0
if rps > 0 then
  b = refill(p .. 'rps', rps, burst)
  if b < 1 then return {0, 3, tostring((1 - b) / rps), used, sec} end
end
if tpm > 0 and used + tokens > tpm then
  local need, freed = used + tokens - tpm, 0
  for i = 1, #vals do
    freed = freed + (tonumber(vals[i]) or 0)
    if freed >= need then return {0, 4, tostring(sec - window + i + window - now), used, sec} end
  end
  return {0, 4, tostring(window), used, sec}
end
if grps > 0 then
  redis.call('HSET', KEYS[2], 'tokens', tostring(g - 1), 'ts', tostring(now))
  redis.call('EXPIRE', KEYS[2], 3600)
end
if rps > 0 then
  redis.call('HSET', p .. 'rps', 'tokens', tostring(b - 1), 'ts', tostring(now))
  redis.call('EXPIRE', p .. 'rps', 3600)
end
redis.call('ZADD', p .. 'leases', now + lease_s, lease)
redis.call('EXPIRE', p .. 'leases', math.ceil(lease_s) + 60)
redis.call('INCRBY', p .. 'tpm:' .. sec, tokens)
redis.call('EXPIRE', p .. 'tpm:' .. sec, window + 1)
return {1, 0, '0', used, sec}
)lua";

constexpr std::string_view kReleaseScript = R"lua(
local p = KEYS[1]
redis.call('ZREM', p .. 'leases', ARGV[1])
local key = p .. 'tpm:' .. ARGV[2]
if redis.call('EXISTS', key) == 1 then
  local v = redis.call('INCRBY', key, tonumber(ARGV[3]))
  if v < 0 then redis.call('SET', key, 0, 'KEEPTTL') end
end
return 1
)lua";

std::string TenantPrefix(const std::string& tenant) { return "kvsgw:{" + tenant + "}:"; }

}  // namespace

RedisRateLimiter::RedisRateLimiter(RedisLimiterOptions options)
    : options_(std::move(options)), client_(options_.address, options_.tls, options_.timeout) {}

StatusOr<RespValue> RedisRateLimiter::Eval(const std::string& script, std::string* sha, std::vector<std::string> keys,
                                           std::vector<std::string> args) {
  std::string cur;
  {
    std::lock_guard<std::mutex> lock(sha_mu_);
    cur = *sha;
  }
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (cur.empty()) {
      KVS_ASSIGN_OR_RETURN(RespValue loaded, client_.Command({"SCRIPT", "LOAD", script}));
      if (loaded.type != RespValue::Type::kString) return Internal("SCRIPT LOAD failed: {}", loaded.str);
      cur = loaded.str;
      std::lock_guard<std::mutex> lock(sha_mu_);
      *sha = cur;
    }
    std::vector<std::string> cmd = {"EVALSHA", cur, std::to_string(keys.size())};
    cmd.insert(cmd.end(), keys.begin(), keys.end());
    cmd.insert(cmd.end(), args.begin(), args.end());
    KVS_ASSIGN_OR_RETURN(RespValue v, client_.Command(cmd));
    if (v.type == RespValue::Type::kError && v.str.rfind("NOSCRIPT", 0) == 0) {
      cur.clear();  // Redis restarted (scripts are not persistent): load again
      continue;
    }
    if (v.type == RespValue::Type::kError) return Internal("Redis script error: {}", v.str);
    return v;
  }
  return Internal("Redis keeps forgetting the script");
}

AdmitResult RedisRateLimiter::OnFailure(const AdmitRequest& req, const Status& s) {
  if (errors_) errors_->Inc();
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  if (down_until_ns_.exchange(now + 1000000000) < now) {
    spdlog::warn("gateway: Redis at {} failed ({}); shared_state_failure: {}", options_.address.url.HostPort(),
                 s.message(), options_.failure);
  }
  AdmitResult r;
  if (options_.failure == "open") {
    r.admitted = true;
    r.lease = Lease{req.tenant, req.lease_id, req.tokens, 0, /*counted=*/false, false};
  } else if (options_.failure == "closed") {
    r.reason = LimitReason::kUnavailable;
    r.retry_after_seconds = 1;
  } else {
    r = local_.Admit(req);
    r.lease.local = true;
  }
  return r;
}

AdmitResult RedisRateLimiter::Admit(const AdmitRequest& req) {
  const TenantLimits& l = req.limits;
  AdmitResult r;
  if (l.tokens_per_minute > 0 && req.tokens > l.tokens_per_minute) {
    r.reason = LimitReason::kTooLarge;
    return r;
  }
  if (std::chrono::steady_clock::now().time_since_epoch().count() < down_until_ns_.load()) {
    return OnFailure(req, Status(StatusCode::kUnavailable, "Redis failed less than a second ago"));
  }
  const double burst = l.burst > 0 ? l.burst : std::max(1.0, l.requests_per_second);
  auto v = Eval(std::string(kAdmitScript), &admit_sha_, {TenantPrefix(req.tenant), "kvsgw:global:rps"},
                {std::to_string(req.tokens), fmt::format("{}", l.requests_per_second), fmt::format("{}", burst),
                 std::to_string(l.tokens_per_minute), std::to_string(l.max_concurrent),
                 fmt::format("{}", req.global_rps), req.lease_id, fmt::format("{}", req.lease_seconds),
                 std::to_string(kTokenWindowBuckets)});
  if (!v.ok()) return OnFailure(req, v.status());
  const RespValue& a = *v;
  if (a.type != RespValue::Type::kArray || a.elems.size() != 5) {
    return OnFailure(req, Internal("unexpected reply from the admission script"));
  }
  static const LimitReason kReasons[] = {LimitReason::kNone, LimitReason::kGlobalRequests, LimitReason::kConcurrency,
                                         LimitReason::kRequests, LimitReason::kTokens};
  const int64_t code = a.elems[1].integer;
  r.admitted = a.elems[0].integer == 1;
  r.reason = code >= 0 && code < 5 ? kReasons[code] : LimitReason::kUnavailable;
  double retry = 0;
  const std::string& rs = a.elems[2].str;
  std::from_chars(rs.data(), rs.data() + rs.size(), retry);
  r.retry_after_seconds = std::max(0.0, retry);
  r.tokens_used = a.elems[3].integer;
  if (r.admitted) r.lease = Lease{req.tenant, req.lease_id, req.tokens, a.elems[4].integer, true, false};
  return r;
}

void RedisRateLimiter::Release(const Lease& lease, int64_t actual_tokens) {
  if (!lease.counted) return;
  if (lease.local) return local_.Release(lease, actual_tokens);
  auto v = Eval(std::string(kReleaseScript), &release_sha_, {TenantPrefix(lease.tenant)},
                {lease.id, std::to_string(lease.bucket), std::to_string(actual_tokens - lease.tokens)});
  if (!v.ok()) {
    // The lease expires on its own; the charge stays at the reservation.
    if (errors_) errors_->Inc();
    spdlog::debug("gateway: Redis release of {} failed: {}", lease.id, v.status().message());
  }
}

}  // namespace kvs::gateway
