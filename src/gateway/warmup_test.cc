// Warm-up of joining replicas: the prompt file (formats, errors naming the
// line), its validation as a pool key, the replica's warming state, and
// Warmer replaying to a scripted upstream (every prompt reaches it with
// max_tokens 1, bounded concurrency, the replica is held out until the end;
// a hung upstream releases the replica at warm_timeout_seconds; failures
// are counted, not fatal).
#include "gateway/warmup.h"

#include <algorithm>
#include <atomic>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/test_util.h"
#include "gateway/cache_salt.h"
#include "gateway/config.h"
#include "gateway/router.h"
#include "gateway/routing.h"
#include "http/http_server.h"

namespace kvs::gateway {
namespace {

using namespace std::chrono_literals;

std::string WriteWarmFile(const std::string& name, const std::string& text) {
  const auto path = (kvs::testing::TempDir("warmup") / name).string();
  std::ofstream(path) << text;
  return path;
}

TEST(WarmPromptsTest, ReadsTheServersFormat) {
  const std::string path = WriteWarmFile("ok.txt",
                                         "# hot prefixes\n"
                                         "\n"
                                         "You are a helpful assistant. Answer briefly.\r\n"
                                         "  {\"prompt\": \"Once upon a time\"}\n"
                                         "{\"messages\": [{\"role\": \"system\", \"content\": \"Be terse.\"}]}\n");
  auto prompts = LoadWarmPrompts(path);
  ASSERT_TRUE(prompts.ok()) << prompts.status().message();
  ASSERT_EQ(prompts->size(), 3u);
  EXPECT_EQ((*prompts)[0].line, 3);
  EXPECT_FALSE((*prompts)[0].chat);
  EXPECT_FALSE((*prompts)[1].chat);
  EXPECT_TRUE((*prompts)[2].chat);

  const auto plain = nlohmann::json::parse(WarmRequestBody((*prompts)[0], "my \"model\""));
  EXPECT_EQ(plain["model"], "my \"model\"");
  EXPECT_EQ(plain["prompt"], "You are a helpful assistant. Answer briefly.");  // the \r is dropped
  EXPECT_EQ(plain["max_tokens"], 1);
  EXPECT_EQ(nlohmann::json::parse(WarmRequestBody((*prompts)[1], "m"))["prompt"], "Once upon a time");
  const auto chat = nlohmann::json::parse(WarmRequestBody((*prompts)[2], "m"));
  EXPECT_EQ(chat["messages"][0]["content"], "Be terse.");
  EXPECT_EQ(chat["max_tokens"], 1);
  EXPECT_FALSE(chat.contains("stream"));
}

// Under prefix_cache_scope "tenant" each replay carries the cache_salt of
// the tenant it warms (the proxy's TenantCacheSalt), "anonymous" by default.
TEST(WarmPromptsTest, TenantScopeWarmsEachPromptsTenant) {
  const std::string path = WriteWarmFile("tenants.txt",
                                         "Plain text\n"
                                         "{\"prompt\": \"For acme\", \"tenant\": \"acme\"}\n"
                                         "{\"messages\": [{\"role\": \"system\", \"content\": \"Hi\"}], \"tenant\": \"zeta\"}\n");
  auto scoped = LoadWarmPrompts(path, /*tenant_scope=*/true);
  ASSERT_TRUE(scoped.ok()) << scoped.status().message();
  ASSERT_EQ(scoped->size(), 3u);
  EXPECT_EQ(nlohmann::json::parse(WarmRequestBody((*scoped)[0], "m"))["cache_salt"], TenantCacheSalt("anonymous", ""));
  EXPECT_EQ(nlohmann::json::parse(WarmRequestBody((*scoped)[1], "m"))["cache_salt"], TenantCacheSalt("acme", ""));
  EXPECT_EQ(nlohmann::json::parse(WarmRequestBody((*scoped)[2], "m"))["cache_salt"], TenantCacheSalt("zeta", ""));
  EXPECT_NE(TenantCacheSalt("acme", ""), TenantCacheSalt("zeta", ""));
  EXPECT_EQ(TenantCacheSalt("acme", "x").size(), 66u);
  auto shared = LoadWarmPrompts(path, /*tenant_scope=*/false);
  ASSERT_TRUE(shared.ok());
  EXPECT_FALSE(nlohmann::json::parse(WarmRequestBody((*shared)[1], "m")).contains("cache_salt"));
  const std::string bad = WriteWarmFile("badtenant.txt", "{\"prompt\": \"x\", \"tenant\": 5}\n");
  EXPECT_FALSE(LoadWarmPrompts(bad, true).ok());
}

TEST(WarmPromptsTest, BadFilesGetClearErrors) {
  struct Case {
    const char* text;
    const char* needle;
  };
  const Case cases[] = {
      {"fine\n{not json\n", ":2: not a JSON object"},
      {"[1, 2]\n", "text"},  // not an object: plain text, fine (checked below)
      {"{\"prompt\": 3}\n", ":1: expected {\"prompt\": string} or {\"messages\": [...]}"},
      {"{\"messages\": []}\n", ":1: expected"},
      {"{\"messages\": [\"hi\"]}\n", ":1: each message needs a \"role\""},
      {"# only a comment\n\n", "no prompts"},
  };
  int i = 0;
  for (const Case& c : cases) {
    const std::string path = WriteWarmFile("bad" + std::to_string(i++) + ".txt", c.text);
    auto prompts = LoadWarmPrompts(path);
    if (std::string_view(c.needle) == "text") {
      EXPECT_TRUE(prompts.ok()) << c.text;
      continue;
    }
    ASSERT_FALSE(prompts.ok()) << c.text;
    EXPECT_NE(prompts.status().message().find(c.needle), std::string::npos) << prompts.status().message();
    EXPECT_NE(prompts.status().message().find(path), std::string::npos) << prompts.status().message();
  }
  auto missing = LoadWarmPrompts("/nonexistent/warm.txt");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cannot read \"/nonexistent/warm.txt\""), std::string::npos);
}

TEST(WarmPromptsTest, PoolKeysLoadAndValidate) {
  const std::string good = WriteWarmFile("pool.txt", "Once upon a time\n");
  GatewayConfig c;
  const std::string yaml = "gateway: {allow_anonymous: true}\npools:\n  - name: chat\n    max_context: 2048\n"
                           "    warm_prompts_file: " + good + "\n    warm_timeout_seconds: 5\n    warm_concurrency: 4\n"
                           "    replicas: [http://127.0.0.1:8001]\n";
  ASSERT_TRUE(LoadGatewayConfigYaml(yaml, &c).ok());
  EXPECT_EQ(c.pools[0].warm_prompts_file, good);
  EXPECT_EQ(c.pools[0].warm_timeout_seconds, 5);
  EXPECT_EQ(c.pools[0].warm_concurrency, 4);
  EXPECT_TRUE(ValidateGatewayConfig(c).ok());

  c.pools[0].warm_prompts_file = "/nonexistent/warm.txt";
  Status s = ValidateGatewayConfig(c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("pools[0] (chat).warm_prompts_file: cannot read \"/nonexistent/warm.txt\""),
            std::string::npos)
      << s.message();

  GatewayConfig d;
  Status range = LoadGatewayConfigYaml("pools:\n  - {name: a, max_context: 1, warm_concurrency: 0, replicas: [x]}\n", &d);
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.message().find("warm_concurrency: expected an integer in [1, 64]"), std::string::npos)
      << range.message();
  Status timeout = LoadGatewayConfigYaml("pools:\n  - {name: a, max_context: 1, warm_timeout_seconds: 0, replicas: [x]}\n", &d);
  ASSERT_FALSE(timeout.ok());
  EXPECT_NE(timeout.message().find("warm_timeout_seconds"), std::string::npos) << timeout.message();
}

TEST(WarmPromptsTest, JoiningReplicaWarmsBeforeItIsAvailable) {
  Replica r("p", *http::Url::Parse("http://127.0.0.1:1"), 1);
  r.set_warm_on_join(true);
  EXPECT_EQ(r.OnProbe(true, false, 2), 0);
  EXPECT_EQ(r.health(), Replica::Health::kHealthy);
  EXPECT_TRUE(r.warming());
  EXPECT_FALSE(r.available());
  EXPECT_EQ(r.joins(), 1u);
  r.EndWarmup();
  EXPECT_TRUE(r.available());
  // Ejected and re-admitted: warming again.
  EXPECT_EQ(r.OnProbe(false, false, 2), -1);
  EXPECT_EQ(r.OnProbe(true, false, 2), 0);
  EXPECT_FALSE(r.warming());  // not yet re-admitted
  EXPECT_EQ(r.OnProbe(true, false, 2), 1);
  EXPECT_TRUE(r.warming());
  EXPECT_EQ(r.joins(), 2u);
  EXPECT_FALSE(r.available());
  // Good probes while warming change nothing.
  EXPECT_EQ(r.OnProbe(true, false, 2), 0);
  EXPECT_EQ(r.joins(), 2u);
  r.EndWarmup();
  EXPECT_TRUE(r.available());

  Replica plain("p", *http::Url::Parse("http://127.0.0.1:1"), 1);
  plain.OnProbe(true, false, 2);
  EXPECT_FALSE(plain.warming());
  EXPECT_TRUE(plain.available());
}

// A replica that answers completions after `delay` (or never, with hang),
// failing those whose prompt contains "FAIL".
class WarmUpstream {
 public:
  WarmUpstream(std::chrono::milliseconds delay, bool hang) : delay_(delay), hang_(hang), server_(http::ServerOptions{}) {
    EXPECT_TRUE(server_.Start([this](std::shared_ptr<http::Exchange> ex) { Handle(std::move(ex)); }).ok());
  }
  ~WarmUpstream() { server_.Stop(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  int max_concurrent() const { return max_concurrent_.load(); }

 private:
  void Handle(std::shared_ptr<http::Exchange> ex) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      bodies_.push_back(ex->request().body);
      held_.push_back(ex);
    }
    const int now = concurrent_.fetch_add(1) + 1;
    int seen = max_concurrent_.load();
    while (now > seen && !max_concurrent_.compare_exchange_weak(seen, now)) {
    }
    if (hang_) return;
    server_.RunAfter(delay_, [this, ex] {
      concurrent_.fetch_sub(1);
      http::HttpResponse res;
      res.SetHeader("Content-Type", "application/json");
      const bool fail = ex->request().body.find("FAIL") != std::string::npos;
      res.status = fail ? 400 : 200;
      res.body = fail ? R"({"error":{"message":"prompt too long"}})" : R"({"choices":[]})";
      ex->Respond(std::move(res));
    });
  }

  const std::chrono::milliseconds delay_;
  const bool hang_;
  http::HttpServer server_;
  std::atomic<int> concurrent_{0}, max_concurrent_{0};
  std::mutex mu_;
  std::vector<std::string> bodies_;                     // guarded by mu_
  std::vector<std::shared_ptr<http::Exchange>> held_;  // guarded by mu_
};

double Count(metrics::Family<metrics::Counter>& f, std::vector<std::string> labels) {
  return f.With(std::move(labels)).Value();
}

void WaitUntilReleased(const Replica& r) {
  for (int i = 0; i < 3000 && r.warming(); ++i) std::this_thread::sleep_for(10ms);
}

struct WarmFixture {
  WarmFixture(const std::string& url, const std::string& file, double timeout_seconds) {
    PoolConfig pc;
    pc.name = "p";
    pc.max_context = 1024;
    pc.warm_concurrency = 2;
    pc.warm_timeout_seconds = timeout_seconds;
    pc.replicas.push_back({url, 1});
    router = std::make_unique<Router>(std::vector<PoolConfig>{pc});
    auto prompts = LoadWarmPrompts(file);
    EXPECT_TRUE(prompts.ok());
    std::map<std::string, std::vector<WarmPrompt>> m;
    m["p"] = *prompts;
    warmer = std::make_unique<Warmer>(router.get(), &client, &metrics, std::move(m));
    r = router->AllReplicas().front();
    r->set_warm_on_join(true);
    r->set_models({"tiny"});
    r->OnProbe(true, false, 2);
  }
  ~WarmFixture() { client.Stop(); }

  http::HttpClient client;
  GatewayMetrics metrics;
  std::unique_ptr<Router> router;
  std::unique_ptr<Warmer> warmer;
  Replica* r = nullptr;
};

TEST(WarmerTest, ReplaysEveryPromptThenReleasesTheReplica) {
  WarmUpstream up(30ms, false);
  std::string text;
  for (int i = 0; i < 7; ++i) text += "prompt number " + std::to_string(i) + "\n";
  text += "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}]}\n";
  WarmFixture f(up.url(), WriteWarmFile("replay.txt", text), 60);
  ASSERT_TRUE(f.r->warming());
  f.warmer->Begin(f.r);
  f.warmer->Begin(f.r);  // one warm-up at a time: the second call is a no-op
  EXPECT_FALSE(f.r->available());
  WaitUntilReleased(*f.r);
  EXPECT_FALSE(f.r->warming());
  EXPECT_TRUE(f.r->available());
  const auto bodies = up.bodies();
  ASSERT_EQ(bodies.size(), 8u);
  int chats = 0;
  for (const auto& b : bodies) {
    const auto j = nlohmann::json::parse(b);
    EXPECT_EQ(j["model"], "tiny");
    EXPECT_EQ(j["max_tokens"], 1);
    chats += j.contains("messages") ? 1 : 0;
  }
  EXPECT_EQ(chats, 1);
  EXPECT_LE(up.max_concurrent(), 2);  // warm_concurrency
  EXPECT_EQ(Count(f.metrics.warmups_started, {"p", f.r->name()}), 1);
  EXPECT_EQ(Count(f.metrics.warmups_finished, {"p", f.r->name(), "completed"}), 1);
  EXPECT_EQ(Count(f.metrics.warm_prompts, {"p", f.r->name(), "ok"}), 8);
  EXPECT_EQ(Count(f.metrics.warm_prompts, {"p", f.r->name(), "error"}), 0);
  EXPECT_EQ(f.metrics.replica_warming.With({"p", f.r->name()}).Value(), 0);
}

TEST(WarmerTest, FailedPromptsAreCountedAndDoNotKeepTheReplicaOut) {
  WarmUpstream up(1ms, false);
  WarmFixture f(up.url(), WriteWarmFile("fail.txt", "good one\nFAIL this\ngood two\n"), 60);
  f.warmer->Begin(f.r);
  WaitUntilReleased(*f.r);
  EXPECT_TRUE(f.r->available());
  EXPECT_EQ(up.bodies().size(), 3u);
  EXPECT_EQ(Count(f.metrics.warmups_finished, {"p", f.r->name(), "failed"}), 1);
  EXPECT_EQ(Count(f.metrics.warm_prompts, {"p", f.r->name(), "ok"}), 2);
  EXPECT_EQ(Count(f.metrics.warm_prompts, {"p", f.r->name(), "error"}), 1);
}

TEST(WarmerTest, AHungReplicaIsReleasedAtTheTimeout) {
  WarmUpstream up(0ms, true);
  WarmFixture f(up.url(), WriteWarmFile("hang.txt", "a\nb\nc\nd\n"), 0.3);
  f.warmer->Begin(f.r);
  WaitUntilReleased(*f.r);
  EXPECT_TRUE(f.r->available());
  EXPECT_LE(up.bodies().size(), 2u);  // the first two hung (warm_concurrency); the rest were never sent
  EXPECT_EQ(Count(f.metrics.warmups_finished, {"p", f.r->name(), "failed"}), 1);
  EXPECT_EQ(Count(f.metrics.warm_prompts, {"p", f.r->name(), "error"}), 2);
}

TEST(WarmerTest, NoKnownModelFailsAtOnce) {
  WarmUpstream up(0ms, false);
  WarmFixture f(up.url(), WriteWarmFile("nomodel.txt", "a\n"), 60);
  f.r->set_models({});
  f.warmer->Begin(f.r);
  WaitUntilReleased(*f.r);
  EXPECT_TRUE(f.r->available());
  EXPECT_TRUE(up.bodies().empty());
  EXPECT_EQ(Count(f.metrics.warmups_finished, {"p", f.r->name(), "failed"}), 1);
}

}  // namespace
}  // namespace kvs::gateway
