// The service in-process (HttpServer + Service + FakeBackend over loopback
// sockets), so its threading runs under TSan: concurrent streams, client
// disconnects, timeouts, the queue bound, abort at drain.
#include "server/service.h"

#include <future>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <gtest/gtest.h>

#include "http/sse_parser.h"
#include "server/fake_backend.h"

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

}  // namespace
}  // namespace kvs::server
