// The Gateway in process, in front of scripted upstreams (HttpServers in this
// test), so the proxy's threads (I/O strands, prep pool, upstream client,
// health checker) run under the sanitizers: passthrough of whole and
// streamed answers, retry before the first byte, in-band error after it,
// client disconnect cancelling the upstream, auth and limits, the status
// page and its document against /metrics, the warm-up of a joining replica.
#include "gateway/gateway.h"

#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "base/test_util.h"
#include "gateway/prompt_counter.h"
#include "http/sse.h"
#include "http/sse_parser.h"

namespace kvs::gateway {
namespace {

using namespace std::chrono_literals;

std::string ModelPath() {
  const char* src = std::getenv("KVSERVE_SOURCE_DIR");
  const std::string p = std::string(src ? src : ".") + "/models/kvserve-tiny.gguf";
  return std::filesystem::exists(p) ? p : "";
}

// An upstream replica whose completions behave as `mode` says.
class Upstream {
 public:
  enum class Mode { kOk, kFail500, kDieMidStream, kSlowStream };
  explicit Upstream(Mode mode) : mode_(mode), server_(http::ServerOptions{}) {
    EXPECT_TRUE(server_.Start([this](std::shared_ptr<http::Exchange> ex) { Handle(std::move(ex)); }).ok());
  }
  ~Upstream() { server_.Stop(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_.port()); }
  int completions() const { return completions_.load(); }
  std::string last_body() {
    std::lock_guard<std::mutex> lock(mu_);
    return last_body_;
  }
  std::future<void> closed() { return closed_.get_future(); }
  http::HttpServer& server() { return server_; }

 private:
  void Handle(std::shared_ptr<http::Exchange> ex) {
    const std::string& path = ex->request().path;
    http::HttpResponse res;
    res.SetHeader("Content-Type", "application/json");
    if (path == "/ready" || path == "/metrics") {
      res.body = path == "/ready" ? R"({"status":"ready"})" : "kvserve:num_requests_waiting 0\n";
      return ex->Respond(std::move(res));
    }
    if (path == "/v1/models") {
      res.body = R"({"data":[{"id":"m"}]})";
      return ex->Respond(std::move(res));
    }
    ++completions_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      last_body_ = ex->request().body;
    }
    const bool stream = ex->request().body.find("\"stream\":true") != std::string::npos;
    if (mode_ == Mode::kFail500) {
      res.status = 500;
      res.body = R"({"error":{"message":"boom","type":"internal_error","param":null,"code":"internal_error"}})";
      return ex->Respond(std::move(res));
    }
    if (!stream) {
      res.body = R"({"id":"x","choices":[{"index":0,"text":" hi","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})";
      return ex->Respond(std::move(res));
    }
    http::HttpResponse h;
    h.SetHeader("Content-Type", "text/event-stream");
    ex->StartStream(std::move(h));
    ex->Write(http::SseData(R"({"choices":[{"index":0,"text":" a","finish_reason":null}],"usage":null})"));
    if (mode_ == Mode::kDieMidStream) {
      held_ = ex;  // not ended: the connection just breaks
      server_.RunAfter(20ms, [this] { server_.CloseAll(); });
      return;
    }
    if (mode_ == Mode::kSlowStream) {
      ex->SetCloseHandler([this] { closed_.set_value(); });
      held_ = ex;  // never ends by itself
      return;
    }
    ex->Write(http::SseData(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})"));
    ex->Write(std::string(http::kSseDone));
    ex->EndStream();
  }

  Mode mode_;
  http::HttpServer server_;
  std::atomic<int> completions_{0};
  std::mutex mu_;
  std::string last_body_;  // guarded by mu_
  std::promise<void> closed_;
  std::shared_ptr<http::Exchange> held_;
};

// A POST /v1/completions with this body.
http::ClientRequest CompletionRequest(std::string body) {
  http::ClientRequest r;
  r.method = "POST";
  r.target = "/v1/completions";
  r.body = std::move(body);
  return r;
}

struct Fixture {
  Fixture(std::vector<std::string> replicas, std::string key_file = "",
          std::function<void(GatewayConfig&)> tweak = nullptr) {
    cfg.gateway.port = 0;
    cfg.gateway.admin_port = 0;
    cfg.gateway.allow_anonymous = key_file.empty();
    cfg.gateway.key_file = key_file;
    cfg.gateway.health_interval_seconds = 0.2;
    cfg.logging.audit_log = "off";
    cfg.model.path = ModelPath();
    PoolConfig p;
    p.name = "main";
    p.max_context = 4096;
    p.max_retries = 2;
    for (auto& r : replicas) p.replicas.push_back({r, 1});
    cfg.pools.push_back(p);
    if (tweak) tweak(cfg);
    auto parts = Gateway::BuildParts(cfg);
    EXPECT_TRUE(parts.ok()) << parts.status().message();
    gw = std::make_unique<Gateway>(cfg, std::move(*parts));
    EXPECT_TRUE(gw->Start().ok());
    url = *http::Url::Parse("http://127.0.0.1:" + std::to_string(gw->port()));
    admin_url = *http::Url::Parse("http://127.0.0.1:" + std::to_string(gw->admin_port()));
  }
  ~Fixture() {
    client.Stop();
    gw->Stop();
  }
  // Admin paths (/metrics, /status, /) go to the admin listener.
  http::ClientResponse Get(const std::string& target) {
    http::ClientRequest r;
    r.method = "GET";
    r.target = target;
    r.timeouts.total = 20s;
    const bool admin = target == "/" || target == "/status" || target == "/metrics";
    auto res = client.Fetch(admin ? admin_url : url, r);
    EXPECT_TRUE(res.ok()) << res.status().message();
    return res.ok() ? *res : http::ClientResponse{};
  }
  http::ClientResponse Post(const std::string& body, std::string key = "") {
    http::ClientRequest r = CompletionRequest(body);
    r.headers = {{"Content-Type", "application/json"}};
    if (!key.empty()) r.headers.emplace_back("Authorization", "Bearer " + key);
    r.timeouts.total = 20s;
    auto res = client.Fetch(url, r);
    EXPECT_TRUE(res.ok()) << res.status().message();
    return res.ok() ? *res : http::ClientResponse{};
  }
  GatewayConfig cfg;
  std::unique_ptr<Gateway> gw;
  http::HttpClient client;
  http::Url url;
  http::Url admin_url;
};

constexpr const char* kBody = R"({"model":"m","prompt":"Once upon a time","max_tokens":4})";
constexpr const char* kStream = R"({"model":"m","prompt":"Once upon a time","max_tokens":4,"stream":true})";

// The counter renders as the replica does: with the replicas' template
// override (model.chat_template) and with the request's template variables
// (chat_template_kwargs), so a variable the template prints is counted.
TEST(GatewayTest, PromptCounterUsesTheTemplateOverrideAndTheRequestsTemplateVariables) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("kvs-counter-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "t.jinja").string();
  std::ofstream(file) << "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}"
                         "{% if note is defined %}[note: {{ note }}]{% endif %}<assistant>";
  auto counter = PromptCounter::Load(ModelPath(), file);
  ASSERT_TRUE(counter.ok()) << counter.status().message();
  auto count = [&](const std::string& body) {
    CountedRequest out;
    auto e = (*counter)->Count(api::Endpoint::kChatCompletions, api::Json::parse(body), &out);
    EXPECT_FALSE(e.has_value()) << (e ? e->message : "");
    return out;
  };
  const CountedRequest plain = count(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}]})");
  EXPECT_EQ(plain.prompt_text, "<user>hi<assistant>");
  const CountedRequest noted = count(R"({"model": "m", "messages": [{"role": "user", "content": "hi"}],
      "chat_template_kwargs": {"note": "a variable the template prints"}})");
  EXPECT_EQ(noted.prompt_text, "<user>hi[note: a variable the template prints]<assistant>");
  EXPECT_GT(noted.max_prompt_tokens, plain.max_prompt_tokens);
  // A missing override file is an error at load, naming it.
  auto missing = PromptCounter::Load(ModelPath(), (dir / "nope.jinja").string());
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.jinja"), std::string::npos) << missing.status().message();
  std::filesystem::remove_all(dir);
}

TEST(GatewayTest, PassesAnswersThroughAndRetriesBeforeTheFirstByte) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  Upstream bad(Upstream::Mode::kFail500), good(Upstream::Mode::kOk);
  Fixture f({bad.url(), good.url()});
  for (int i = 0; i < 6; ++i) {
    auto r = f.Post(kBody);
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_NE(r.body.find("\"text\":\" hi\""), std::string::npos);
    auto s = f.Post(kStream);
    EXPECT_EQ(s.status, 200);
    EXPECT_NE(s.body.find("data: [DONE]"), std::string::npos);
    EXPECT_EQ(s.body.find("usage"), std::string::npos) << "usage was not asked for";
  }
  EXPECT_GE(bad.completions(), 1);
  EXPECT_EQ(good.completions(), 12);
  EXPECT_GE(f.gw->metrics().retries.With({"main"}).Value(), 1);
}

// A pool with warm prompts: the replica gets them (with the model id its
// /v1/models gave) before the gateway reports ready and routes to it.
TEST(GatewayTest, JoiningReplicaIsWarmedBeforeItTakesTraffic) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  const auto dir = kvs::testing::TempDir("gw_warm");
  const std::string file = (dir / "warm.txt").string();
  std::ofstream(file) << "first hot prefix\n{\"prompt\": \"second hot prefix\"}\n";
  Upstream up(Upstream::Mode::kOk);
  Fixture f({up.url()}, "", [&](GatewayConfig& c) { c.pools[0].warm_prompts_file = file; });
  for (int i = 0; i < 1000 && f.Get("/ready").status != 200; ++i) std::this_thread::sleep_for(10ms);
  EXPECT_EQ(f.Get("/ready").status, 200);
  EXPECT_EQ(up.completions(), 2) << "both warm prompts, nothing else";
  EXPECT_NE(up.last_body().find("\"model\":\"m\""), std::string::npos) << up.last_body();
  EXPECT_NE(up.last_body().find("\"max_tokens\":1"), std::string::npos) << up.last_body();
  auto r = f.Post(kBody);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(up.completions(), 3);
  const std::string name = f.gw->router().AllReplicas().front()->name();
  EXPECT_EQ(f.gw->metrics().warmups_finished.With({"main", name, "completed"}).Value(), 1);
  EXPECT_EQ(f.gw->metrics().warm_prompts.With({"main", name, "ok"}).Value(), 2);
}

TEST(GatewayTest, StreamFailingAfterTheFirstByteEndsWithAnInBandError) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  Upstream dying(Upstream::Mode::kDieMidStream);
  Fixture f({dying.url()});
  auto s = f.Post(kStream);
  EXPECT_EQ(s.status, 200);
  http::SseParser p;
  auto events = p.Feed(s.body);
  ASSERT_GE(events.size(), 3u) << s.body;
  EXPECT_NE(events[0].data.find("\" a\""), std::string::npos);
  EXPECT_EQ(events[events.size() - 2].event, "error");
  EXPECT_EQ(events.back().data, "[DONE]");
  EXPECT_EQ(f.gw->metrics().stream_errors.Value(), 1);
}

TEST(GatewayTest, ClientDisconnectCancelsTheUpstream) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  Upstream slow(Upstream::Mode::kSlowStream);
  auto closed = slow.closed();
  Fixture f({slow.url()});
  const http::ClientRequest r = CompletionRequest(kStream);
  std::promise<void> got;
  std::atomic<bool> once{false};
  auto call = f.client.Start(f.url, r,
                             {nullptr,
                              [&](std::string_view) {
                                if (!once.exchange(true)) got.set_value();
                              },
                              nullptr});
  ASSERT_EQ(got.get_future().wait_for(10s), std::future_status::ready);
  call.Cancel();
  EXPECT_EQ(closed.wait_for(10s), std::future_status::ready) << "the upstream saw its connection close";
  for (int i = 0; i < 100 && f.gw->in_flight() > 0; ++i) std::this_thread::sleep_for(20ms);
  EXPECT_EQ(f.gw->in_flight(), 0);
  EXPECT_EQ(f.gw->metrics().client_disconnects.Value(), 1);
}

TEST(GatewayTest, KeysAndTokenLimits) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  const std::string path = (kvs::testing::TempDir("gw_keys") / "keys.yaml").string();
  KeyFile kf;
  kf.tenants["t"].tokens_per_minute = 30;
  KeyEntry e{KeyIdOfDigest(KeyDigest("sk-t")), "t", KeyDigest("sk-t"), "now"};
  kf.keys.push_back(e);
  ASSERT_TRUE(kf.Save(path).ok());
  Upstream good(Upstream::Mode::kOk);
  Fixture f({good.url()}, path);
  EXPECT_EQ(f.Post(kBody).status, 401);
  EXPECT_EQ(f.Post(kBody, "sk-x").status, 401);
  EXPECT_EQ(good.completions(), 0);
  // Each request reserves prompt + 4; the budget of 30 admits a few, then 429.
  int ok = 0, limited = 0;
  for (int i = 0; i < 10; ++i) {
    auto r = f.Post(kBody, "sk-t");
    if (r.status == 200) ++ok;
    if (r.status == 429) {
      ++limited;
      EXPECT_FALSE(r.Header("Retry-After").empty());
    }
  }
  EXPECT_GE(ok, 1);
  EXPECT_EQ(ok + limited, 10);
  EXPECT_GE(limited, 1);
}

// With the only replica at max_requests_per_replica, a request waits in the
// fair queue; when nothing frees the replica in queue_timeout_seconds it
// gets 503 queue_timeout, and the queue is empty again.
TEST(GatewayTest, AWaiterTimesOutWith503) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  Upstream slow(Upstream::Mode::kSlowStream);
  Fixture f({slow.url()}, "", [](GatewayConfig& c) {
    c.pools[0].max_requests_per_replica = 1;
    c.pools[0].queue_timeout_seconds = 0.3;
  });
  const http::ClientRequest r = CompletionRequest(kStream);
  std::promise<void> got;
  std::atomic<bool> once{false};
  auto call = f.client.Start(f.url, r, {nullptr, [&](std::string_view) {
                                          if (!once.exchange(true)) got.set_value();
                                        }, nullptr});
  ASSERT_EQ(got.get_future().wait_for(5s), std::future_status::ready);  // the slot is taken
  auto waited = f.Post(kBody);
  EXPECT_EQ(waited.status, 503);
  EXPECT_NE(waited.body.find("queue_timeout"), std::string::npos) << waited.body;
  EXPECT_EQ(f.gw->metrics().queue_timeouts.With({"main"}).Value(), 1);
  EXPECT_EQ(f.gw->metrics().queued_requests.With({"main"}).Value(), 0);
  EXPECT_EQ(slow.completions(), 1);  // the waiter never reached the replica
  call.Cancel();
}

// A tenant's priority class bounds the `priority` its requests run at on
// the replicas (lower first): raised to the class, never lowered.
TEST(GatewayTest, TenantPriorityClassBoundsTheReplicasPriority) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  const std::string path = (kvs::testing::TempDir("gw_prio") / "keys.yaml").string();
  KeyFile kf;
  kf.tenants["batch"].priority = 5;
  kf.tenants["interactive"];  // no limits: priority 0
  kf.keys.push_back({KeyIdOfDigest(KeyDigest("sk-b")), "batch", KeyDigest("sk-b"), "now"});
  kf.keys.push_back({KeyIdOfDigest(KeyDigest("sk-i")), "interactive", KeyDigest("sk-i"), "now"});
  ASSERT_TRUE(kf.Save(path).ok());
  Upstream good(Upstream::Mode::kOk);
  Fixture f({good.url()}, path);
  auto priority = [&] {
    auto j = nlohmann::json::parse(good.last_body(), nullptr, false);
    return j.is_object() && j.contains("priority") ? j["priority"].get<int>() : 0;
  };
  ASSERT_EQ(f.Post(R"({"model":"m","prompt":"hi","max_tokens":4})", "sk-b").status, 200);
  EXPECT_EQ(priority(), 5);
  ASSERT_EQ(f.Post(R"({"model":"m","prompt":"hi","max_tokens":4,"priority":1})", "sk-b").status, 200);
  EXPECT_EQ(priority(), 5);
  ASSERT_EQ(f.Post(R"({"model":"m","prompt":"hi","max_tokens":4,"priority":9})", "sk-b").status, 200);
  EXPECT_EQ(priority(), 9);
  ASSERT_EQ(f.Post(R"({"model":"m","prompt":"hi","max_tokens":4})", "sk-i").status, 200);
  EXPECT_EQ(priority(), 0);
}

TEST(GatewayTest, AuditLinesNeverHoldTheKeyAndHoldThePromptOnlyWhenAsked) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  const std::string dir = kvs::testing::TempDir("gw_audit").string();
  KeyFile kf;
  kf.tenants["t"];
  kf.keys.push_back({KeyIdOfDigest(KeyDigest("sk-secret")), "t", KeyDigest("sk-secret"), "now"});
  ASSERT_TRUE(kf.Save(dir + "/keys.yaml").ok());
  Upstream good(Upstream::Mode::kOk);
  for (bool prompts : {false, true}) {
    const std::string log = dir + (prompts ? "/with.log" : "/without.log");
    {
      Fixture f({good.url()}, dir + "/keys.yaml", [&](GatewayConfig& c) {
        c.logging.audit_log = log;
        c.logging.audit_prompts = prompts;
      });
      EXPECT_EQ(f.Post(kBody, "sk-secret").status, 200);
      EXPECT_EQ(f.Post(kBody, "sk-wrong").status, 401);
      for (int i = 0; i < 100 && f.gw->in_flight() > 0; ++i) std::this_thread::sleep_for(10ms);
    }
    std::ifstream in(log);
    std::vector<nlohmann::json> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(nlohmann::json::parse(l));
    ASSERT_EQ(lines.size(), 2u);
    EXPECT_EQ(lines[0]["key_id"], KeyIdOfDigest(KeyDigest("sk-secret")));
    EXPECT_EQ(lines[0]["tenant"], "t");
    EXPECT_EQ(lines[0]["pool"], "main");
    EXPECT_EQ(lines[0]["status"], 200);
    EXPECT_EQ(lines[1]["status"], 401);
    EXPECT_EQ(lines[0].contains("prompt"), prompts);
    if (prompts) {
      EXPECT_EQ(lines[0]["prompt"], "Once upon a time");
    }
    for (const auto& l : lines) {
      EXPECT_EQ(l.dump().find("sk-secret"), std::string::npos);
      EXPECT_EQ(l.dump().find("sk-wrong"), std::string::npos);
    }
  }
}

TEST(GatewayTest, ReloadShiftsReplicaWeights) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  Upstream a(Upstream::Mode::kOk), b(Upstream::Mode::kOk);
  Fixture f({a.url(), b.url()});
  GatewayConfig fresh = f.cfg;
  fresh.pools[0].replicas[1].weight = 5;
  EXPECT_TRUE(f.gw->ReloadConfig(fresh).empty());
  EXPECT_EQ(f.gw->router().pools()[0]->replicas[1]->weight(), 5);
  fresh.pools[0].replicas.push_back({"http://127.0.0.1:1", 1});
  EXPECT_EQ(f.gw->ReloadConfig(fresh).size(), 1u);  // a new replica needs a restart
  fresh.pools[0].replicas.resize(1);
  EXPECT_EQ(f.gw->ReloadConfig(fresh).size(), 1u);  // so does a removed one
}

// "name{labels} value" lines of a Prometheus exposition -> value by series.
std::map<std::string, double> ParseExposition(const std::string& text) {
  std::map<std::string, double> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t sp = line.rfind(' ');
    out[line.substr(0, sp)] = std::stod(line.substr(sp + 1));
  }
  return out;
}

// What a stat's `metric` names, evaluated on an exposition: one series,
// sum(family) or count(family) - sum(family).
std::optional<double> Evaluate(const std::string& metric, const std::map<std::string, double>& m) {
  auto family = [&](const std::string& name, double* sum, double* count) {
    *sum = *count = 0;
    for (const auto& [series, v] : m) {
      if (series.substr(0, series.find('{')) == name) {
        *sum += v;
        *count += 1;
      }
    }
  };
  double sum = 0, count = 0;
  // sum(NAME{status=~"D.."}): the series of one status class.
  if (const size_t brace = metric.find("{status=~\""); metric.rfind("sum(", 0) == 0 && brace != std::string::npos) {
    const std::string name = metric.substr(4, brace - 4);
    const char cls = metric[brace + 10];  // after {status=~"
    EXPECT_EQ(metric, "sum(" + name + "{status=~\"" + cls + "..\"})");
    for (const auto& [series, v] : m) {
      const size_t at = series.find("status=\"");
      if (series.substr(0, series.find('{')) == name && at != std::string::npos && series[at + 8] == cls) sum += v;
    }
    return sum;
  }
  if (metric.rfind("count(", 0) == 0) {
    const std::string name = metric.substr(6, metric.find(')') - 6);
    family(name, &sum, &count);
    EXPECT_EQ(metric, "count(" + name + ") - sum(" + name + ")");
    return count - sum;
  }
  if (metric.rfind("sum(", 0) == 0) {
    family(metric.substr(4, metric.size() - 5), &sum, &count);
    return sum;
  }
  auto it = m.find(metric);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

TEST(GatewayTest, StatusPageAndItsDocumentAgreeWithMetrics) {
  if (ModelPath().empty()) GTEST_SKIP() << "models/kvserve-tiny.gguf is missing";
  Upstream bad(Upstream::Mode::kFail500), good(Upstream::Mode::kOk);
  Fixture f({bad.url(), good.url()});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(f.Post(kBody).status, 200);
  EXPECT_EQ(f.Post(R"({"model":"m","prompt":"x","max_tokens":100000})").status, 400);

  auto page = f.Get("/");
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.Header("Content-Type").find("text/html"), std::string_view::npos);
  EXPECT_NE(page.body.find("fetch(\"status\""), std::string::npos) << "the page polls its document";

  // The first history sample comes 2 s after the start.
  nlohmann::json st;
  for (int i = 0; i < 100; ++i) {
    st = nlohmann::json::parse(f.Get("/status").body);
    if (!st["series"][0]["points"].empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  const auto before = ParseExposition(f.Get("/metrics").body);
  const auto res = f.Get("/status");
  EXPECT_EQ(res.status, 200);
  st = nlohmann::json::parse(res.body);
  const auto after = ParseExposition(f.Get("/metrics").body);

  EXPECT_EQ(st["title"], "kvserve gateway");
  EXPECT_EQ(st["state"], "ready");
  EXPECT_GE(st["uptime_seconds"].get<double>(), 0);
  std::map<std::string, std::string> facts;
  for (const auto& row : st["facts"]) facts[row[0]] = row[1];
  EXPECT_EQ(facts["Pools"], "main (up to 4096 tokens, 2 replicas)");
  EXPECT_EQ(facts["Routing"], "main: least_load");
  EXPECT_EQ(facts["API keys"], "none (anonymous access)");
  EXPECT_EQ(facts["Rate-limit counters"], "local");
  // Every number tied to a series equals it on /metrics (read just before
  // or just after: the health checker runs meanwhile).
  int checked = 0;
  auto check = [&](const nlohmann::json& item) {
    const std::string metric = item["metric"];
    const double value = item["value"];
    auto b = Evaluate(metric, before), a = Evaluate(metric, after);
    ASSERT_TRUE(b && a) << metric << " is not on /metrics";
    EXPECT_TRUE(value == *b || value == *a) << metric << ": page " << value << ", /metrics " << *b << " / " << *a;
    ++checked;
  };
  for (const auto& s : st["stats"]) check(s);
  for (const auto& p : st["breakdown"]["parts"]) check(p);
  EXPECT_GE(checked, 13);
  std::map<std::string, double> stat;
  for (const auto& s : st["stats"]) stat[s["label"]] = s["value"];
  EXPECT_EQ(stat["Requests"], 5);  // 4 answered, 1 refused as too long
  EXPECT_GE(stat["Upstream errors"], 1);
  EXPECT_GE(stat["Retries"], 1);
  // The replicas table: one row per replica.
  ASSERT_EQ(st["table"]["rows"].size(), 2u);
  std::set<std::string> names;
  for (const auto& r : st["table"]["rows"]) names.insert(r[1].get<std::string>());
  EXPECT_EQ(names, (std::set<std::string>{bad.url(), good.url()}));
  // History: the first sample saw the requests.
  ASSERT_EQ(st["series"].size(), 8u);
  EXPECT_EQ(st["series"][0]["label"], "Requests/s");
  EXPECT_GT(st["series"][0]["points"][0][1].get<double>(), 0);
  // By status: the 500s were retried (the clients got 200), the over-long
  // request was refused.
  EXPECT_EQ(st["series"][1]["label"], "Failed (5xx)/s");
  EXPECT_EQ(st["series"][1]["points"][0][1].get<double>(), 0);
  EXPECT_EQ(st["series"][2]["label"], "Refused (4xx)/s");
  EXPECT_GT(st["series"][2]["points"][0][1].get<double>(), 0);
  EXPECT_LT(st["series"][2]["points"][0][1].get<double>(), st["series"][0]["points"][0][1].get<double>());
  // The conventions of docs/metrics.md: the standard process collector,
  // build info and readiness.
  EXPECT_GT(after.at("process_cpu_seconds_total"), 0);
  EXPECT_GT(after.at("process_start_time_seconds"), 0);
  EXPECT_EQ(after.at("kvserve_gateway:ready"), 1);
  // Ejection series exist before the first ejection (at 0), so Prometheus'
  // increase() sees the first one.
  EXPECT_EQ(after.at("kvserve_gateway:replica_ejections_total{pool=\"main\",replica=\"" + good.url() + "\",cause=\"probe\"}"), 0);
  bool build_info = false;
  for (const auto& [series, v] : after) build_info |= series.rfind("kvserve_gateway:build_info{version=", 0) == 0 && v == 1;
  EXPECT_TRUE(build_info);
}

}  // namespace
}  // namespace kvs::gateway
