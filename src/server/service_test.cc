// The service in-process (HttpServer + Service + FakeBackend over loopback
// sockets), so its threading runs under TSan: concurrent streams, client
// disconnects, timeouts, the queue bound, abort at drain.
#include "server/service.h"

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "http/sse_parser.h"
#include "server/testing/fake_backend.h"

namespace kvs::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;

struct Reply {
  int status = 0;
  std::string body;
  std::string retry_after;
  json Json() const { return json::parse(body, nullptr, false); }
};

Reply Send(uint16_t port, bhttp::verb verb, const std::string& target, const std::string& body = "",
           const std::string& key = "") {
  asio::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  bhttp::request<bhttp::string_body> req{verb, target, 11};
  req.set(bhttp::field::host, "localhost");
  req.set(bhttp::field::content_type, "application/json");
  if (!key.empty()) req.set(bhttp::field::authorization, "Bearer " + key);
  req.body() = body;
  req.prepare_payload();
  bhttp::write(s, req);
  beast::flat_buffer buf;
  bhttp::response_parser<bhttp::string_body> p;
  p.body_limit(64 << 20);
  bhttp::read(s, buf, p);
  Reply r;
  r.status = p.get().result_int();
  r.body = p.get().body();
  r.retry_after = std::string(p.get()[bhttp::field::retry_after]);
  return r;
}

Reply Post(uint16_t port, const std::string& target, const json& body, const std::string& key = "") {
  return Send(port, bhttp::verb::post, target, body.dump(), key);
}

class Harness {
 public:
  explicit Harness(ServeConfig cfg, FakeBackendOptions fo = {}, std::vector<std::string> keys = {}) : cfg_(cfg) {
    backend_ = std::make_unique<FakeBackend>(fo);
    service_ = std::make_unique<Service>(cfg, keys, &metrics_, nullptr);
    http::ServerOptions ho;
    ho.io_threads = 2;
    server_ = std::make_unique<http::HttpServer>(ho);
    EXPECT_TRUE(server_->Start([this](std::shared_ptr<http::Exchange> ex) { service_->Handle(std::move(ex)); }).ok());
    ModelCard card;
    card.id = "fake-model";
    card.max_context_length = fo.max_context_length;
    service_->SetReady(backend_.get(), card);
  }
  ~Harness() {
    server_->Stop();
    service_->StopPreparing();
    backend_->Shutdown();
  }
  uint16_t port() const { return server_->port(); }
  Service& service() { return *service_; }
  FakeBackend& backend() { return *backend_; }
  ServerMetrics& metrics() { return metrics_; }

  // Waits until nothing is in flight and the fake holds no KV.
  bool WaitIdle() {
    for (int i = 0; i < 500; ++i) {
      if (service_->sequences_in_flight() == 0 && backend_->Stats().engine.num_blocks_used == 0 &&
          server_->active_exchanges() == 0) {
        return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "not idle: sequences " << service_->sequences_in_flight() << ", KV blocks used "
                  << backend_->Stats().engine.num_blocks_used << ", exchanges " << server_->active_exchanges();
    return false;
  }

 private:
  ServeConfig cfg_;
  ServerMetrics metrics_;
  std::unique_ptr<FakeBackend> backend_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<http::HttpServer> server_;
};

FakeBackendOptions Fast() {
  FakeBackendOptions o;
  o.step_time = std::chrono::microseconds(500);
  return o;
}

TEST(ServiceTest, CompletionAndChatWithUsage) {
  Harness h(ServeConfig{}, Fast());
  Reply r = Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "hi"}, {"max_tokens", 3}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.Json();
  EXPECT_EQ(j["choices"][0]["text"], "Once upon a");
  EXPECT_EQ(j["usage"]["completion_tokens"], 3);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["total_tokens"], 6);
  r = Post(h.port(), "/v1/chat/completions",
           {{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 2}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.Json()["choices"][0]["message"]["content"], "Once upon");
  EXPECT_TRUE(h.WaitIdle());
}

TEST(ServiceTest, ConstraintsNeedABackendThatCanConstrain) {
  // The fake backend has no grammar vocabulary: a constraint is a 400 naming
  // its field, never silently ignored; a schema the converter refuses is a
  // 400 before that.
  Harness h(ServeConfig{}, Fast());
  Reply r = Post(h.port(), "/v1/chat/completions",
                 {{"model", "fake-model"},
                  {"messages", {{{"role", "user"}, {"content", "x"}}}},
                  {"response_format", {{"type", "json_object"}}}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.Json()["error"]["param"], "response_format");
  EXPECT_NE(r.body.find("cannot constrain"), std::string::npos) << r.body;
  r = Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"guided_regex", "(?=a)"}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.Json()["error"]["param"], "guided_regex");
  EXPECT_NE(r.body.find("lookaround"), std::string::npos) << r.body;
  // logit_bias ids are checked against the model's vocabulary.
  r = Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"logit_bias", {{"1000000", 1}}}});
  ASSERT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.Json()["error"]["param"], "logit_bias");
  EXPECT_TRUE(h.WaitIdle());
}

TEST(ServiceTest, StreamingFramesAndDone) {
  Harness h(ServeConfig{}, Fast());
  Reply r = Post(h.port(), "/v1/completions",
                 {{"model", "fake-model"}, {"prompt", "hi"}, {"max_tokens", 5}, {"temperature", 0}, {"stream", true},
                  {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  http::SseParser p;
  auto events = p.Feed(r.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back().data, "[DONE]");
  std::string text;
  json usage;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    json c = json::parse(events[i].data);
    EXPECT_EQ(c["object"], "text_completion");
    if (!c["usage"].is_null()) usage = c["usage"];
    for (const auto& ch : c["choices"]) text += ch["text"].get<std::string>();
  }
  EXPECT_EQ(text, "Once upon a time,");
  EXPECT_EQ(usage["completion_tokens"], 5);
}

TEST(ServiceTest, ConcurrentStreamsAllComplete) {
  ServeConfig cfg;
  FakeBackendOptions fo = Fast();
  fo.max_batch_size = 8;  // half of them wait for a slot
  Harness h(cfg, fo);
  std::vector<std::thread> clients;
  std::atomic<int> ok{0};
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      Reply r = Post(h.port(), i % 2 ? "/v1/completions" : "/v1/chat/completions",
                     i % 2 ? json{{"model", "fake-model"}, {"prompt", "p"}, {"max_tokens", 20}, {"stream", true},
                                  {"ignore_eos", true}, {"stream_options", {{"include_usage", true}}}}
                           : json{{"model", "fake-model"}, {"messages", {{{"role", "user"}, {"content", "x"}}}},
                                  {"max_tokens", 20}, {"stream", true}, {"ignore_eos", true},
                                  {"stream_options", {{"include_usage", true}}}});
      if (r.status != 200) return;
      http::SseParser p;
      auto events = p.Feed(r.body);
      if (events.size() < 2 || events.back().data != "[DONE]") return;
      json usage = json::parse(events[events.size() - 2].data)["usage"];
      if (usage["completion_tokens"] == 20) ++ok;
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(ok.load(), 16);
  EXPECT_TRUE(h.WaitIdle());
  EXPECT_EQ(h.metrics().finished.With({"length"}).Value(), 16);
}

TEST(ServiceTest, ClientDisconnectCancelsAndFreesKv) {
  FakeBackendOptions fo;
  fo.step_time = std::chrono::milliseconds(5);
  Harness h(ServeConfig{}, fo);
  for (int round = 0; round < 3; ++round) {
    asio::io_context ioc;
    tcp::socket s(ioc);
    s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), h.port()));
    const std::string body = json{{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 2000}, {"stream", true},
                                  {"ignore_eos", true}}
                                 .dump();
    const std::string req = "POST /v1/completions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    asio::write(s, asio::buffer(req));
    char buf[512];
    s.read_some(asio::buffer(buf));  // the stream has started
    for (int i = 0; i < 200 && h.backend().Stats().engine.num_blocks_used == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GT(h.backend().Stats().engine.num_blocks_used, 0);
    s.close();
    EXPECT_TRUE(h.WaitIdle()) << "round " << round;
  }
  EXPECT_EQ(h.metrics().finished.With({"cancelled"}).Value(), 3);
}

TEST(ServiceTest, TimeoutGives504AndFreesKv) {
  ServeConfig cfg;
  cfg.runtime.request_timeout_seconds = 0.1;
  FakeBackendOptions fo;
  fo.step_time = std::chrono::milliseconds(20);
  Harness h(cfg, fo);
  Reply r = Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 100}, {"ignore_eos", true}});
  EXPECT_EQ(r.status, 504) << r.body;
  EXPECT_EQ(r.Json()["error"]["code"], "request_timeout");
  EXPECT_TRUE(h.WaitIdle());
}

TEST(ServiceTest, QueueBoundGives429) {
  ServeConfig cfg;
  cfg.runtime.max_concurrent_requests = 1;
  FakeBackendOptions fo;
  fo.step_time = std::chrono::milliseconds(10);
  Harness h(cfg, fo);
  auto slow = std::async(std::launch::async, [&] {
    return Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 300}, {"ignore_eos", true}});
  });
  for (int i = 0; i < 500 && h.service().sequences_in_flight() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  Reply r = Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 1}});
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.retry_after, "1");
  EXPECT_EQ(slow.get().status, 200);
  EXPECT_TRUE(h.WaitIdle());
}

TEST(ServiceTest, AbortAllEndsRunningRequests) {
  FakeBackendOptions fo;
  fo.step_time = std::chrono::milliseconds(10);
  Harness h(ServeConfig{}, fo);
  auto plain = std::async(std::launch::async, [&] {
    return Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 1000}, {"ignore_eos", true}});
  });
  auto streamed = std::async(std::launch::async, [&] {
    return Post(h.port(), "/v1/completions",
                {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 1000}, {"ignore_eos", true}, {"stream", true}});
  });
  for (int i = 0; i < 500 && h.service().running_jobs() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  h.service().BeginDrain();
  Reply refused = Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}});
  EXPECT_EQ(refused.status, 503);
  api::ApiError e;
  e.status = 503;
  e.code = "server_shutting_down";
  e.message = "bye";
  h.service().AbortAll(e, "shutdown");
  Reply a = plain.get();
  EXPECT_EQ(a.status, 503);
  EXPECT_EQ(a.Json()["error"]["code"], "server_shutting_down");
  Reply b = streamed.get();
  EXPECT_EQ(b.status, 200);
  EXPECT_NE(b.body.find("event: error"), std::string::npos);
  EXPECT_TRUE(h.WaitIdle());
  EXPECT_EQ(h.metrics().finished.With({"shutdown"}).Value(), 2);
}

TEST(ServiceTest, ApiKeysAndKeyIds) {
  Harness h(ServeConfig{}, Fast(), {"secret"});
  EXPECT_EQ(Send(h.port(), bhttp::verb::get, "/v1/models").status, 401);
  EXPECT_EQ(Send(h.port(), bhttp::verb::get, "/v1/models", "", "wrong").status, 401);
  EXPECT_EQ(Send(h.port(), bhttp::verb::get, "/v1/models", "", "secret").status, 200);
  EXPECT_EQ(Send(h.port(), bhttp::verb::get, "/health").status, 200);  // open
  const std::string id = Service::KeyId("secret");
  EXPECT_EQ(id.size(), 10u);
  EXPECT_EQ(id.find("secret"), std::string::npos);
}

// GET with a raw Authorization header; returns the status.
int GetWithAuthorization(uint16_t port, const std::string& target, const std::string& authorization) {
  asio::io_context ioc;
  tcp::socket s(ioc);
  s.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));
  bhttp::request<bhttp::string_body> req{bhttp::verb::get, target, 11};
  req.set(bhttp::field::host, "localhost");
  req.set(bhttp::field::authorization, authorization);
  bhttp::write(s, req);
  beast::flat_buffer buf;
  bhttp::response<bhttp::string_body> res;
  bhttp::read(s, buf, res);
  return res.result_int();
}

// Issue 10 item 10: the auth-scheme is case-insensitive (RFC 9110), so
// "BEARER" and "bearer" work like "Bearer"; the key itself is not.
TEST(ServiceTest, BearerSchemeIsCaseInsensitive) {
  Harness h(ServeConfig{}, Fast(), {"Secret#1"});
  EXPECT_EQ(GetWithAuthorization(h.port(), "/v1/models", "Bearer Secret#1"), 200);
  EXPECT_EQ(GetWithAuthorization(h.port(), "/v1/models", "bearer Secret#1"), 200);
  EXPECT_EQ(GetWithAuthorization(h.port(), "/v1/models", "BEARER Secret#1"), 200);
  EXPECT_EQ(GetWithAuthorization(h.port(), "/v1/models", "bEaReR   Secret#1"), 200);
  EXPECT_EQ(GetWithAuthorization(h.port(), "/v1/models", "Bearer secret#1"), 401);
  EXPECT_EQ(GetWithAuthorization(h.port(), "/v1/models", "Basic Secret#1"), 401);
  EXPECT_EQ(GetWithAuthorization(h.port(), "/v1/models", "BearerSecret#1"), 401);
}

// Holds requests in preparation (inside the fake's Tokenize) until opened.
struct PrepGate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int entered = 0;
  std::function<void()> Hook() {
    return [this] {
      std::unique_lock<std::mutex> lock(mu);
      ++entered;
      cv.notify_all();
      cv.wait(lock, [this] { return open; });
    };
  }
  bool WaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return entered >= n; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

// Issue 10 item 2: requests being prepared (here: stuck tokenizing) must not
// hold the I/O threads; /health and /metrics answer meanwhile. Before the
// prep pool, two such requests took both I/O threads and /health waited.
TEST(ServiceTest, PreparationLeavesTheIoThreadsFree) {
  PrepGate gate;
  FakeBackendOptions fo = Fast();
  fo.before_tokenize = gate.Hook();
  Harness h(ServeConfig{}, fo);
  std::vector<std::future<Reply>> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(std::async(std::launch::async, [&] {
      return Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 2}});
    }));
  }
  ASSERT_TRUE(gate.WaitEntered(2));
  auto health = std::async(std::launch::async, [&] { return Send(h.port(), bhttp::verb::get, "/health"); });
  auto metrics = std::async(std::launch::async, [&] { return Send(h.port(), bhttp::verb::get, "/metrics"); });
  const bool answered = health.wait_for(std::chrono::seconds(10)) == std::future_status::ready &&
                        metrics.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(answered) << "/health or /metrics waited for request preparation";
  if (answered) {
    EXPECT_NE(metrics.get().body.find("kvserve:prep_requests_running 2"), std::string::npos);
  }
  gate.Open();
  EXPECT_EQ(health.get().status, 200);
  for (auto& f : slow) EXPECT_EQ(f.get().status, 200);
  EXPECT_TRUE(h.WaitIdle());
}

TEST(ServiceTest, FullPrepQueueGives503WithRetryAfter) {
  PrepGate gate;
  FakeBackendOptions fo = Fast();
  fo.before_tokenize = gate.Hook();
  ServeConfig cfg;
  cfg.server.prep_threads = 1;
  cfg.server.prep_queue = 1;
  Harness h(cfg, fo);
  auto post = [&] {
    return std::async(std::launch::async, [&] {
      return Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 2}});
    });
  };
  auto running = post();
  ASSERT_TRUE(gate.WaitEntered(1));
  auto waiting = post();
  for (int i = 0; i < 500; ++i) {
    Reply m = Send(h.port(), bhttp::verb::get, "/metrics");
    if (m.body.find("kvserve:prep_requests_waiting 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  Reply refused = Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 2}});
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.Json()["error"]["code"], "server_overloaded");
  EXPECT_EQ(refused.retry_after, "1");
  gate.Open();
  EXPECT_EQ(running.get().status, 200);
  EXPECT_EQ(waiting.get().status, 200);
  EXPECT_TRUE(h.WaitIdle());
}

// Issue 10 item 4: the cache_salt reaches the engine as one short digest
// (kept with every cached first block), not the client's bytes n times.
TEST(ServiceTest, CacheSaltReachesTheEngineAsOneShortDigest) {
  std::mutex mu;
  std::vector<std::string> salts;
  FakeBackendOptions fo = Fast();
  fo.on_submit = [&](const engine::Request& r) {
    std::lock_guard<std::mutex> lock(mu);
    salts.push_back(r.cache_salt);
  };
  Harness h(ServeConfig{}, fo);
  const std::string salt(200, 'q');
  auto post = [&](json extra) {
    json body = {{"model", "fake-model"}, {"prompt", "x"}, {"max_tokens", 1}};
    body.update(extra);
    EXPECT_EQ(Post(h.port(), "/v1/completions", body).status, 200);
  };
  post({{"cache_salt", salt}, {"n", 3}});
  post({{"cache_salt", salt}});
  post({{"cache_salt", "other"}});
  post(json::object());
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(salts.size(), 6u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(salts[i].size(), 32u) << salts[i];
    EXPECT_EQ(salts[i], salts[0]);
  }
  EXPECT_EQ(salts[4].size(), 32u);
  EXPECT_NE(salts[4], salts[0]);
  EXPECT_EQ(salts[5], "");  // no salt, no key: the one shared cache
}

// Issue 10 item 7: with API keys configured, tenants do not share cached
// prefixes (and cached_tokens tells one nothing about another's prompts);
// cache_salt subdivides a tenant's namespace.
TEST(ServiceTest, EachApiKeyIsItsOwnPrefixCacheNamespace) {
  Harness h(ServeConfig{}, Fast(), {"key-a", "key-b"});
  auto cached = [&](const std::string& key, json extra = json::object()) {
    json body = {{"model", "fake-model"}, {"prompt", std::string(40, 'x')}, {"max_tokens", 1}};
    body.update(extra);
    Reply r = Post(h.port(), "/v1/completions", body, key);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.Json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  };
  EXPECT_EQ(cached("key-a"), 0);
  EXPECT_EQ(cached("key-a"), 32);  // a's own prefix: two full blocks
  EXPECT_EQ(cached("key-b"), 0);   // never a's
  EXPECT_EQ(cached("key-b"), 32);
  EXPECT_EQ(cached("key-a", {{"cache_salt", "s"}}), 0);  // a salt subdivides a's namespace
  EXPECT_EQ(cached("key-a", {{"cache_salt", "s"}}), 32);
  EXPECT_EQ(cached("key-b", {{"cache_salt", "s"}}), 0);  // the same salt under another key
}

// The status page and its document, with a sampler thread adding history
// while requests run (as RunServe does), so TSan sees the sharing.
// GET /v1/cache/blocks: the event log's pages in the wire form of
// kvcache/cache_events_json.h; with a sliding window, the window group's
// set and events under their own keys (an older gateway ignores them).
TEST(ServiceTest, CacheBlocksPagesCarryTheWindowGroupUnderTheirOwnKeys) {
  const kvcache::BlockHash a{1, 2}, b{3, 4};
  {
    FakeBackendOptions fo = Fast();
    Harness h(ServeConfig{}, fo);
    EXPECT_EQ(Send(h.port(), bhttp::verb::get, "/v1/cache/blocks").status, 404);
  }
  kvcache::PrefixCacheEvents log;
  log.Stored(a);
  log.Stored(a, kvcache::CacheGroup::kWindow);
  FakeBackendOptions fo = Fast();
  fo.cache_events = &log;
  fo.window = 4096;
  Harness h(ServeConfig{}, fo);
  Reply r = Send(h.port(), bhttp::verb::get, "/v1/cache/blocks");
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.Json();
  EXPECT_EQ(j["object"], "cache.blocks");
  EXPECT_EQ(j["block_size"], 16);
  EXPECT_EQ(j["reset"], true);
  EXPECT_EQ(j["seq"], 2);
  EXPECT_EQ(j["blocks"], json::array({kvcache::BlockHashHex(a)}));
  EXPECT_EQ(j["events"], json::array());
  EXPECT_EQ(j["window"], 4096);
  EXPECT_EQ(j["window_blocks"], json::array({kvcache::BlockHashHex(a)}));
  EXPECT_EQ(j["window_events"], json::array());
  log.Stored(b);
  log.Evicted(a, kvcache::CacheGroup::kWindow);
  r = Send(h.port(), bhttp::verb::get, "/v1/cache/blocks?epoch=" + j["epoch"].get<std::string>() + "&since=2");
  ASSERT_EQ(r.status, 200) << r.body;
  j = r.Json();
  EXPECT_EQ(j["reset"], false);
  EXPECT_FALSE(j.contains("blocks"));
  EXPECT_FALSE(j.contains("window_blocks"));
  EXPECT_EQ(j["seq"], 4);
  EXPECT_EQ(j["events"], json::array({"+" + kvcache::BlockHashHex(b)}));
  EXPECT_EQ(j["window_events"], json::array({"-" + kvcache::BlockHashHex(a)}));
}

TEST(ServiceTest, StatusPageAndDocumentAgreeWithMetrics) {
  Harness h(ServeConfig{}, Fast());
  std::atomic<bool> stop{false};
  std::thread sampler([&] {
    while (!stop) {
      h.service().SampleStatus();
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  std::vector<std::thread> clients;
  for (int c = 0; c < 3; ++c) {
    clients.emplace_back([&h] {
      for (int i = 0; i < 4; ++i) {
        Reply r = Post(h.port(), "/v1/completions", {{"model", "fake-model"}, {"prompt", "hi"}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true}});
        EXPECT_EQ(r.status, 200) << r.body;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(Post(h.port(), "/v1/completions", {{"model", "nope"}, {"prompt", "hi"}}).status, 404);
  stop = true;
  sampler.join();
  EXPECT_TRUE(h.WaitIdle());

  Reply page = Send(h.port(), bhttp::verb::get, "/");
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("<!doctype html>"), std::string::npos);
  EXPECT_EQ(page.body.find("http://"), page.body.find("http://www.w3.org/2000/svg")) << "no external resources";
  EXPECT_EQ(page.body.find("https://"), std::string::npos);

  // A response reaches the client just before its access record is written:
  // poll until all 13 are in.
  json j;
  for (int i = 0; i < 200; ++i) {
    Reply st = Send(h.port(), bhttp::verb::get, "/status");
    ASSERT_EQ(st.status, 200) << st.body;
    j = st.Json();
    if (j["table"]["rows"].size() == 13u) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(j["state"], "ready");
  ASSERT_EQ(j["table"]["rows"].size(), 13u) << "12 completions and the 404";
  int not_found = 0;
  for (const auto& row : j["table"]["rows"]) not_found += row[3] == 404;
  EXPECT_EQ(not_found, 1);
  ASSERT_EQ(j["series"].size(), 9u);
  EXPECT_GT(j["series"][0]["points"].size(), 1u);
  // The API's requests by status over time: the completions were answered,
  // none failed.
  EXPECT_EQ(j["series"][0]["label"], "API requests/s");
  EXPECT_EQ(j["series"][1]["label"], "API failed (5xx)/s");
  double api = 0, failed = 0;
  for (const auto& p : j["series"][0]["points"]) api += p[1].is_number() ? p[1].get<double>() : 0;
  for (const auto& p : j["series"][1]["points"]) failed += p[1].is_number() ? p[1].get<double>() : 0;
  EXPECT_GT(api, 0);
  EXPECT_EQ(failed, 0);
  bool tokens_seen = false;
  for (const auto& s : j["stats"]) {
    if (s["metric"] == "kvserve:generation_tokens_total") {
      EXPECT_EQ(s["value"].get<double>(), 48.0);
      tokens_seen = true;
    }
  }
  EXPECT_TRUE(tokens_seen);
  EXPECT_EQ(h.metrics().errors.With({"invalid_request"}).Value(), 1);
  EXPECT_EQ(h.metrics().time_per_output_token.Read().count, 12u);
}

}  // namespace
}  // namespace kvs::server
