// RESP parsing, and the Redis limiter against Debian's redis-server (started
// here on a free loopback port; skipped when redis-server is not installed):
// the same admission rules as the local limiter, one budget for two
// limiters, and each failure mode when Redis is unreachable.
#include "gateway/redis_limiter.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

extern char** environ;

namespace kvs::gateway {
namespace {

TEST(RedisAddressTest, ParsesSchemesAndCredentials) {
  auto a = RedisAddress::Parse("redis://127.0.0.1:6390");
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->url.tls);
  EXPECT_EQ(a->url.port, 6390);
  EXPECT_EQ(a->password, "");
  a = RedisAddress::Parse("rediss://app:p%40ss%3Aw@redis.test");
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->url.tls);
  EXPECT_EQ(a->url.host, "redis.test");
  EXPECT_EQ(a->url.port, 6379);
  EXPECT_EQ(a->user, "app");
  EXPECT_EQ(a->password, "p@ss:w");
  EXPECT_EQ(a->Redacted(), "rediss://app:<redacted>@redis.test:6379");
  a = RedisAddress::Parse("redis://:only@[::1]:7000");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->user, "");
  EXPECT_EQ(a->password, "only");
  EXPECT_EQ(a->url.port, 7000);
  EXPECT_EQ(a->Redacted(), "redis://:<redacted>@[::1]:7000");
  for (const char* bad : {"http://h:1", "redis://", "redis://h:1/0", "redis://u:p@", "rediss://h:99999"}) {
    EXPECT_FALSE(RedisAddress::Parse(bad).ok()) << bad;
  }
}

TEST(RespTest, ParsesEveryKindAndAsksForMoreWhenIncomplete) {
  RespValue v;
  size_t used = 0;
  ASSERT_EQ(ParseResp("+OK\r\n", &used, &v), 1);
  EXPECT_EQ(v.type, RespValue::Type::kString);
  EXPECT_EQ(v.str, "OK");
  EXPECT_EQ(used, 5u);
  ASSERT_EQ(ParseResp("-NOSCRIPT x\r\n", &used, &v), 1);
  EXPECT_EQ(v.type, RespValue::Type::kError);
  ASSERT_EQ(ParseResp(":-42\r\n", &used, &v), 1);
  EXPECT_EQ(v.integer, -42);
  ASSERT_EQ(ParseResp("$-1\r\n", &used, &v), 1);
  EXPECT_EQ(v.type, RespValue::Type::kNil);
  ASSERT_EQ(ParseResp("$5\r\na\r\nbc\r\n", &used, &v), 1);
  EXPECT_EQ(v.str, "a\r\nbc");
  ASSERT_EQ(ParseResp("*3\r\n:1\r\n$1\r\nx\r\n*1\r\n:2\r\n+rest", &used, &v), 1);
  ASSERT_EQ(v.elems.size(), 3u);
  EXPECT_EQ(v.elems[2].elems[0].integer, 2);
  EXPECT_EQ(used, 23u);
  for (const char* part : {"", "+OK", "$5\r\nab", "*2\r\n:1\r\n", ":1\r"}) {
    EXPECT_EQ(ParseResp(part, &used, &v), 0) << part;
  }
  // An empty line (no type byte), also inside an array: found by resp_fuzzer.
  for (const char* bad : {"?x\r\n", ":x\r\n", "$3\r\nabcd\r\n", "$-5\r\n", "*-7\r\n", "\r\n",
                          "*2\r\n\r\n*%2\r\n"}) {
    EXPECT_EQ(ParseResp(bad, &used, &v), -1) << bad;
  }
  EXPECT_EQ(EncodeRespCommand({"GET", "k"}), "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
}

uint16_t FreePort() {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor a(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

class RedisServer {
 public:
  bool Start() {
    if (!std::filesystem::exists("/usr/bin/redis-server")) return false;
    port_ = FreePort();
    dir_ = std::filesystem::temp_directory_path() / ("kvs-redis-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::vector<std::string> args = {"/usr/bin/redis-server", "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--dir", dir_.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) != 0) return false;
    RespClient c(*RedisAddress::Parse("redis://127.0.0.1:" + std::to_string(port_)), nullptr,
                 std::chrono::milliseconds(200));
    for (int i = 0; i < 100; ++i) {
      auto r = c.Command({"PING"});
      if (r.ok() && r->str == "PONG") return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  ~RedisServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  std::filesystem::path dir_;
};

RedisLimiterOptions Options(uint16_t port, std::string failure = "closed") {
  RedisLimiterOptions o;
  o.address = *RedisAddress::Parse("redis://127.0.0.1:" + std::to_string(port));
  o.timeout = std::chrono::milliseconds(500);
  o.failure = std::move(failure);
  return o;
}

AdmitRequest RedisReq(int64_t tokens, TenantLimits l, const std::string& tenant) {
  static int n = 0;
  AdmitRequest r;
  r.tenant = tenant;
  r.limits = l;
  r.tokens = tokens;
  r.lease_id = "lease-" + std::to_string(++n);
  r.lease_seconds = 60;
  return r;
}

TEST(RedisLimiterTest, TwoLimitersShareOneBudget) {
  RedisServer redis;
  if (!redis.Start()) GTEST_SKIP() << "redis-server is not installed (scripts/setup.sh installs it)";
  RedisRateLimiter a(Options(redis.port())), b(Options(redis.port()));
  TenantLimits l;
  l.tokens_per_minute = 2000;
  l.max_concurrent = 100;
  const std::string tenant = "t" + std::to_string(::getpid());
  std::vector<Lease> leases;
  int admitted = 0;
  for (int i = 0; i < 20; ++i) {
    AdmitResult r = (i % 2 ? a : b).Admit(RedisReq(300, l, tenant));
    if (r.admitted) {
      ++admitted;
      leases.push_back(r.lease);
    } else {
      EXPECT_EQ(r.reason, LimitReason::kTokens);
      EXPECT_GT(r.retry_after_seconds, 50);
      EXPECT_EQ(r.tokens_used, 1800);
    }
  }
  EXPECT_EQ(admitted, 6);
  // Correction by real usage frees budget for both.
  for (const Lease& le : leases) a.Release(le, 100);
  EXPECT_TRUE(b.Admit(RedisReq(1400, l, tenant)).admitted);
  EXPECT_FALSE(a.Admit(RedisReq(1, l, tenant)).admitted);
}

TEST(RedisLimiterTest, ConcurrencyAndRequestRate) {
  RedisServer redis;
  if (!redis.Start()) GTEST_SKIP() << "redis-server is not installed";
  RedisRateLimiter a(Options(redis.port())), b(Options(redis.port()));
  const std::string tenant = "c" + std::to_string(::getpid());
  TenantLimits l;
  l.max_concurrent = 2;
  AdmitResult r1 = a.Admit(RedisReq(1, l, tenant)), r2 = b.Admit(RedisReq(1, l, tenant));
  ASSERT_TRUE(r1.admitted && r2.admitted);
  AdmitResult r3 = a.Admit(RedisReq(1, l, tenant));
  EXPECT_FALSE(r3.admitted);
  EXPECT_EQ(r3.reason, LimitReason::kConcurrency);
  b.Release(r1.lease, 1);
  EXPECT_TRUE(a.Admit(RedisReq(1, l, tenant)).admitted);

  TenantLimits rate;
  rate.requests_per_second = 1;
  const std::string t2 = tenant + "r";
  EXPECT_TRUE(a.Admit(RedisReq(1, rate, t2)).admitted);
  AdmitResult r = b.Admit(RedisReq(1, rate, t2));
  EXPECT_FALSE(r.admitted);
  EXPECT_EQ(r.reason, LimitReason::kRequests);
  EXPECT_GT(r.retry_after_seconds, 0.5);
  EXPECT_LE(r.retry_after_seconds, 1.0);
}

TEST(RedisLimiterTest, FailureModesWhenRedisIsUnreachable) {
  const uint16_t dead = FreePort();  // nothing listens there
  TenantLimits l;
  l.tokens_per_minute = 100;
  RedisRateLimiter closed(Options(dead, "closed"));
  AdmitResult c = closed.Admit(RedisReq(10, l, "x"));
  EXPECT_FALSE(c.admitted);
  EXPECT_EQ(c.reason, LimitReason::kUnavailable);
  RedisRateLimiter open(Options(dead, "open"));
  for (int i = 0; i < 20; ++i) {
    AdmitResult o = open.Admit(RedisReq(10, l, "x"));
    EXPECT_TRUE(o.admitted);
    EXPECT_FALSE(o.lease.counted);
  }
  RedisRateLimiter local(Options(dead, "local"));
  int admitted = 0;
  for (int i = 0; i < 20; ++i) admitted += local.Admit(RedisReq(10, l, "x")).admitted ? 1 : 0;
  EXPECT_EQ(admitted, 10);  // counted in this process instead
}

}  // namespace
}  // namespace kvs::gateway
