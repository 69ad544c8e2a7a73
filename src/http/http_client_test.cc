// HttpClient against the project's own HttpServer over loopback: bodies,
// keep-alive pooling, streaming delivery, timeouts, cancellation, stale
// pooled connections, concurrency, Stop with calls in flight.
#include "http/http_client.h"

#include <filesystem>
#include <future>
#include <mutex>
#include <thread>

#include <boost/asio.hpp>
#include <gtest/gtest.h>

#include "http/http_server.h"
#include "http/http_test_util.h"
#include "http/sse.h"
#include "http/sse_parser.h"

namespace kvs::http {
namespace {

using namespace std::chrono_literals;

using testing::Text;

Url Local(uint16_t port) { return *Url::Parse("http://127.0.0.1:" + std::to_string(port)); }

ClientRequest Get(std::string target) {
  ClientRequest r;
  r.target = std::move(target);
  return r;
}

TEST(UrlTest, Parses) {
  auto u = Url::Parse("http://127.0.0.1:8001");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, 8001);
  EXPECT_EQ(u->base_path, "");
  EXPECT_EQ(u->HostPort(), "127.0.0.1:8001");
  u = Url::Parse("HTTP://[::1]:9000/base/");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->HostPort(), "[::1]:9000");
  EXPECT_EQ(u->base_path, "/base");
  EXPECT_EQ(u->ToString(), "http://[::1]:9000/base");
  u = Url::Parse("http://replica-a");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->port, 80);
  u = Url::Parse("https://replica.test/v");
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->port, 443);
  EXPECT_EQ(u->ToString(), "https://replica.test:443/v");
  EXPECT_NE(u->PoolKey(), Url::Parse("http://replica.test:443")->PoolKey());
  for (const char* bad : {"ftp://x:1", "x:1", "http://", "http://:80", "http://h:0", "http://h:70000", "http://h:x",
                          "http://[::1", "http://u@h:1", "http://h:1/p?q=1", "http://h:"}) {
    EXPECT_FALSE(Url::Parse(bad).ok()) << bad;
  }
}

TEST(HttpClientTest, GetAndPostWithKeepAlivePooling) {
  HttpServer server(ServerOptions{});
  ASSERT_TRUE(server
                  .Start([](std::shared_ptr<Exchange> ex) {
                    auto r = Text(201, ex->request().method + " " + ex->request().target + " " + ex->request().body);
                    r.SetHeader("X-Echo", std::string(ex->request().Header("X-Test")));
                    ex->Respond(std::move(r));
                  })
                  .ok());
  HttpClient client;
  ClientRequest get = Get("/a?x=1");
  get.headers = {{"X-Test", "hello"}};
  auto r1 = client.Fetch(Local(server.port()), get);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  EXPECT_EQ(r1->status, 201);
  EXPECT_EQ(r1->body, "GET /a?x=1 ");
  EXPECT_EQ(r1->Header("x-echo"), "hello");

  ClientRequest post;
  post.method = "POST";
  post.target = "/b";
  post.body = std::string(1 << 20, 'z');
  auto r2 = client.Fetch(Local(server.port()), post);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(r2->body, "POST /b " + post.body);

  auto r3 = client.Fetch("http://127.0.0.1:" + std::to_string(server.port()) + "/c?y=2", Get(""));
  ASSERT_TRUE(r3.ok());
  EXPECT_EQ(r3->body, "GET /c?y=2 ");
  // One connection served all three.
  EXPECT_EQ(client.connections_opened(), 1u);
  EXPECT_EQ(client.idle_connections(), 1u);
}

TEST(HttpClientTest, BasePathIsPrefixed) {
  HttpServer server(ServerOptions{});
  ASSERT_TRUE(server.Start([](std::shared_ptr<Exchange> ex) { ex->Respond(Text(200, ex->request().target)); }).ok());
  HttpClient client;
  auto r = client.Fetch(*Url::Parse("http://127.0.0.1:" + std::to_string(server.port()) + "/api"), Get("/v1/x"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->body, "/api/v1/x");
}

// The client sees each piece of a chunked stream while the server is still
// producing the rest: the server writes its second event only after the
// client has received the first.
TEST(HttpClientTest, StreamsBodyAsItArrives) {
  std::promise<void> got_first;
  auto got_first_f = got_first.get_future().share();
  HttpServer server(ServerOptions{});
  ASSERT_TRUE(server
                  .Start([got_first_f](std::shared_ptr<Exchange> ex) {
                    HttpResponse h;
                    h.SetHeader("Content-Type", "text/event-stream");
                    ex->StartStream(std::move(h));
                    ex->Write(SseData("one"));
                    std::thread([ex, got_first_f] {
                      got_first_f.wait();
                      ex->Post([ex] {
                        ex->Write(SseData("two\nlines"));
                        ex->Write(std::string(kSseDone));
                        ex->EndStream();
                      });
                    }).detach();
                  })
                  .ok());
  HttpClient client;
  std::promise<ClientResult> done;
  std::mutex mu;
  std::vector<SseMessage> events;
  SseParser parser;
  int status = 0;
  bool signalled = false;
  ClientCallbacks cb;
  cb.on_head = [&](const ClientResponseHead& h) {
    status = h.status;
    EXPECT_EQ(h.Header("content-type"), "text/event-stream");
  };
  cb.on_data = [&](std::string_view d) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& e : parser.Feed(d)) events.push_back(std::move(e));
    if (!events.empty() && !signalled) {
      signalled = true;
      got_first.set_value();
    }
  };
  cb.on_done = [&](const ClientResult& r) { done.set_value(r); };
  ClientRequest req;
  req.method = "POST";
  req.target = "/stream";
  req.body = "{}";
  req.timeouts.total = 10s;
  client.Start(Local(server.port()), req, cb);
  ClientResult r = done.get_future().get();
  EXPECT_TRUE(r.ok()) << r.message;
  EXPECT_EQ(status, 200);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].data, "one");
  EXPECT_EQ(events[1].data, "two\nlines");
  EXPECT_EQ(events[2].data, "[DONE]");
  EXPECT_GT(r.body_bytes, 0u);
}

TEST(HttpClientTest, ConnectionRefused) {
  uint16_t port;
  {
    HttpServer s(ServerOptions{});
    ASSERT_TRUE(s.Start([](std::shared_ptr<Exchange> ex) { ex->Respond(Text(200, "")); }).ok());
    port = s.port();
  }
  HttpClient client;
  auto r = client.Fetch(Local(port), Get("/"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
}

TEST(HttpClientTest, ConnectTimeoutWhenTheBacklogIsFull) {
  // A listener that never accepts, with its backlog full: Linux drops new
  // SYNs, so the connect hangs until the timeout.
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acc(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  acc.listen(0);
  const uint16_t port = acc.local_endpoint().port();
  std::vector<std::unique_ptr<boost::asio::ip::tcp::socket>> fillers;
  for (int i = 0; i < 4; ++i) {
    // Initiating an async connect issues the non-blocking connect(2) now;
    // ioc never runs, so nothing waits for it.
    auto s = std::make_unique<boost::asio::ip::tcp::socket>(ioc);
    s->async_connect({boost::asio::ip::make_address("127.0.0.1"), port}, [](boost::system::error_code) {});
    fillers.push_back(std::move(s));
  }
  std::this_thread::sleep_for(50ms);
  HttpClient client;
  ClientRequest req = Get("/");
  req.timeouts.connect = 300ms;
  const auto t0 = std::chrono::steady_clock::now();
  std::promise<ClientResult> done;
  client.Start(Local(port), req, {nullptr, nullptr, [&](const ClientResult& r) { done.set_value(r); }});
  ClientResult r = done.get_future().get();
  EXPECT_EQ(r.error, ClientErrorKind::kConnectTimeout) << r.message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(HttpClientTest, FirstByteAndTotalTimeouts) {
  std::mutex mu;
  std::vector<std::shared_ptr<Exchange>> held;  // answered never
  std::promise<void> closed;
  bool closed_set = false;
  HttpServer server(ServerOptions{});
  ASSERT_TRUE(server
                  .Start([&](std::shared_ptr<Exchange> ex) {
                    if (ex->request().path == "/silent") {
                      ex->SetCloseHandler([&] {
                        std::lock_guard<std::mutex> lock(mu);
                        if (!closed_set) {
                          closed_set = true;
                          closed.set_value();
                        }
                      });
                      std::lock_guard<std::mutex> lock(mu);
                      held.push_back(ex);
                      return;
                    }
                    // /slow: a head at once, then nothing.
                    ex->StartStream(HttpResponse{});
                    ex->Write("x");
                    std::lock_guard<std::mutex> lock(mu);
                    held.push_back(ex);
                  })
                  .ok());
  HttpClient client;
  ClientRequest silent = Get("/silent");
  silent.timeouts.first_byte = 200ms;
  std::promise<ClientResult> d1;
  client.Start(Local(server.port()), silent, {nullptr, nullptr, [&](const ClientResult& r) { d1.set_value(r); }});
  ClientResult r1 = d1.get_future().get();
  EXPECT_EQ(r1.error, ClientErrorKind::kFirstByteTimeout) << r1.message;
  EXPECT_FALSE(r1.head_received);
  // Timing out closes the connection: the server notices.
  EXPECT_EQ(closed.get_future().wait_for(5s), std::future_status::ready);

  ClientRequest slow = Get("/slow");
  slow.timeouts.first_byte = 2s;
  slow.timeouts.total = 300ms;
  std::promise<ClientResult> d2;
  std::string got;
  client.Start(Local(server.port()), slow,
               {nullptr, [&](std::string_view d) { got.append(d); },
                [&](const ClientResult& r) { d2.set_value(r); }});
  ClientResult r2 = d2.get_future().get();
  EXPECT_EQ(r2.error, ClientErrorKind::kTotalTimeout) << r2.message;
  EXPECT_TRUE(r2.head_received);
  EXPECT_EQ(got, "x");
  server.Stop();
  held.clear();  // exchanges go before their server
}

TEST(HttpClientTest, CancelClosesTheUpstreamConnection) {
  std::promise<void> server_saw_close;
  HttpServer server(ServerOptions{});
  std::shared_ptr<Exchange> held;
  std::mutex mu;
  ASSERT_TRUE(server
                  .Start([&](std::shared_ptr<Exchange> ex) {
                    ex->SetCloseHandler([&] { server_saw_close.set_value(); });
                    ex->StartStream(HttpResponse{});
                    ex->Write(SseData("first"));
                    std::lock_guard<std::mutex> lock(mu);
                    held = ex;
                  })
                  .ok());
  HttpClient client;
  std::promise<ClientResult> done;
  ClientCall call(nullptr);
  std::promise<void> got_data;
  bool got = false;
  call = client.Start(Local(server.port()), Get("/"),
                      {nullptr,
                       [&](std::string_view) {
                         if (!got) {
                           got = true;
                           got_data.set_value();
                         }
                       },
                       [&](const ClientResult& r) { done.set_value(r); }});
  got_data.get_future().wait();
  call.Cancel();
  call.Cancel();  // idempotent
  ClientResult r = done.get_future().get();
  EXPECT_EQ(r.error, ClientErrorKind::kCancelled);
  EXPECT_EQ(server_saw_close.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(client.idle_connections(), 0u);
  server.Stop();
}

TEST(HttpClientTest, StalePooledConnectionIsReplaced) {
  ServerOptions o;
  o.keep_alive_timeout = 100ms;  // the server closes idle connections quickly
  HttpServer server(o);
  ASSERT_TRUE(server.Start([](std::shared_ptr<Exchange> ex) { ex->Respond(Text(200, "ok")); }).ok());
  HttpClient client;
  ASSERT_TRUE(client.Fetch(Local(server.port()), Get("/")).ok());
  EXPECT_EQ(client.idle_connections(), 1u);
  std::this_thread::sleep_for(400ms);
  auto r = client.Fetch(Local(server.port()), Get("/"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "ok");
  EXPECT_EQ(client.connections_opened(), 2u);
}

TEST(HttpClientTest, ServerClosingMidBodyIsADisconnect) {
  HttpServer server(ServerOptions{});
  HttpServer* sp = &server;
  // The closing thread drops its Exchange before the server goes (its
  // connection's strand must not outlive the server's io_context).
  std::promise<void> released;
  std::future<void> released_future = released.get_future();
  ASSERT_TRUE(server
                  .Start([sp, &released](std::shared_ptr<Exchange> ex) {
                    ex->StartStream(HttpResponse{});
                    ex->Write("partial");
                    std::thread([sp, ex, &released]() mutable {
                      std::this_thread::sleep_for(50ms);
                      sp->CloseAll();
                      ex.reset();
                      released.set_value();
                    }).detach();
                  })
                  .ok());
  HttpClient client;
  std::promise<ClientResult> done;
  std::string body;
  client.Start(Local(server.port()), Get("/"),
               {nullptr, [&](std::string_view d) { body.append(d); }, [&](const ClientResult& r) { done.set_value(r); }});
  ClientResult r = done.get_future().get();
  EXPECT_EQ(r.error, ClientErrorKind::kDisconnected) << r.message;
  EXPECT_TRUE(r.head_received);
  EXPECT_EQ(body, "partial");
  released_future.wait();
  server.Stop();
}

TEST(HttpClientTest, NotHttpIsAProtocolError) {
  boost::asio::io_context ioc;
  boost::asio::ip::tcp::acceptor acc(ioc, {boost::asio::ip::make_address("127.0.0.1"), 0});
  const uint16_t port = acc.local_endpoint().port();
  std::thread t([&] {
    boost::asio::ip::tcp::socket s(ioc);
    acc.accept(s);
    char buf[1024];
    boost::system::error_code ec;
    s.read_some(boost::asio::buffer(buf), ec);
    boost::asio::write(s, boost::asio::buffer(std::string("SSH-2.0-nope\r\n\r\n")), ec);
    std::this_thread::sleep_for(100ms);
  });
  HttpClient client;
  auto r = client.Fetch(Local(port), Get("/"));
  t.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
}

TEST(HttpClientTest, ManyConcurrentCalls) {
  ServerOptions o;
  o.io_threads = 2;
  HttpServer server(o);
  ASSERT_TRUE(server.Start([](std::shared_ptr<Exchange> ex) { ex->Respond(Text(200, ex->request().body)); }).ok());
  ClientOptions co;
  co.io_threads = 2;
  HttpClient client(co);
  constexpr int kCalls = 200;
  std::mutex mu;
  int ok = 0;
  int finished = 0;
  std::promise<void> all;
  for (int i = 0; i < kCalls; ++i) {
    ClientRequest req;
    req.method = "POST";
    req.body = std::to_string(i);
    auto body = std::make_shared<std::string>();
    client.Start(Local(server.port()), req,
                 {nullptr, [body](std::string_view d) { body->append(d); },
                  [&, body, i](const ClientResult& r) {
                    std::lock_guard<std::mutex> lock(mu);
                    if (r.ok() && *body == std::to_string(i)) ++ok;
                    if (++finished == kCalls) all.set_value();
                  }});
  }
  ASSERT_EQ(all.get_future().wait_for(30s), std::future_status::ready);
  EXPECT_EQ(ok, kCalls);
  EXPECT_LE(client.connections_opened(), static_cast<uint64_t>(kCalls));
}

TEST(HttpClientTest, StopWithCallsInFlightReturnsPromptly) {
  std::mutex mu;
  std::vector<std::shared_ptr<Exchange>> held;
  HttpServer server(ServerOptions{});
  ASSERT_TRUE(server
                  .Start([&](std::shared_ptr<Exchange> ex) {
                    std::lock_guard<std::mutex> lock(mu);
                    held.push_back(ex);
                  })
                  .ok());
  std::atomic<int> done_calls{0};
  {
    HttpClient client;
    for (int i = 0; i < 5; ++i) {
      client.Start(Local(server.port()), Get("/"), {nullptr, nullptr, [&](const ClientResult&) { ++done_calls; }});
    }
    std::this_thread::sleep_for(100ms);
    const auto t0 = std::chrono::steady_clock::now();
    client.Stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
    // A call started after Stop does nothing.
    client.Start(Local(server.port()), Get("/"), {nullptr, nullptr, [&](const ClientResult&) { ++done_calls; }});
  }
  EXPECT_EQ(done_calls.load(), 0);
  server.Stop();
  held.clear();  // exchanges go before their server
}

// ---------------------------------------------------------------------------
// https URLs (issue 33 item 7): the replica's certificate must chain to the
// URL's CA file and name its host; anything else is a connect error.

TEST(HttpClientTlsTest, VerifiesTheCaAndTheHostName) {
  const auto dir = kvs::testing::TempDir("client_tls");
  testing::TestPki pki(dir, "pool");
  testing::TestPki other(dir, "rogue");
  const auto leaf = pki.Issue("replica", "IP:127.0.0.1");
  const auto rogue = other.Issue("rogue", "IP:127.0.0.1");
  const auto named = pki.Issue("named", "DNS:localhost");
  if (!pki.ok() || !other.ok()) GTEST_SKIP() << "the openssl CLI could not make test certificates";
  auto serve = [](const testing::TestPki::Leaf& l) {
    ServerOptions o;
    o.tls_cert_file = l.cert;
    o.tls_key_file = l.key;
    auto s = std::make_unique<HttpServer>(o);
    EXPECT_TRUE(s->Start([](std::shared_ptr<Exchange> ex) { ex->Respond(Text(200, "over tls")); }).ok());
    return s;
  };
  auto good = serve(leaf);
  auto bad = serve(rogue);
  auto by_name = serve(named);
  auto url = [](const std::string& host, uint16_t port, const std::string& ca) {
    Url u = *Url::Parse("https://" + host + ":" + std::to_string(port));
    u.tls_ca_file = ca;
    return u;
  };
  HttpClient client;
  auto ok = client.Fetch(url("127.0.0.1", good->port(), pki.ca_cert()), Get("/"));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->body, "over tls");
  // The pooled TLS connection is reused.
  ASSERT_TRUE(client.Fetch(url("127.0.0.1", good->port(), pki.ca_cert()), Get("/")).ok());
  EXPECT_EQ(client.connections_opened(), 1u);

  // Signed by another CA: a connect error (kUnavailable), never a response.
  std::promise<ClientResult> done;
  ClientCallbacks cb;
  cb.on_done = [&](const ClientResult& r) { done.set_value(r); };
  client.Start(url("127.0.0.1", bad->port(), pki.ca_cert()), Get("/"), std::move(cb));
  const ClientResult r = done.get_future().get();
  EXPECT_EQ(r.error, ClientErrorKind::kConnect);
  EXPECT_FALSE(r.head_received);
  EXPECT_NE(r.message.find("certificate verify failed"), std::string::npos) << r.message;

  // The right CA, but the certificate names 127.0.0.1 and we asked for localhost.
  auto wrong_name = client.Fetch(url("localhost", good->port(), pki.ca_cert()), Get("/"));
  ASSERT_FALSE(wrong_name.ok());
  EXPECT_EQ(wrong_name.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(wrong_name.status().message().find("hostname mismatch"), std::string::npos)
      << wrong_name.status().message();
  // A DNS name in the certificate, sent as SNI, matches the URL's host.
  auto dns = client.Fetch(url("localhost", by_name->port(), pki.ca_cert()), Get("/"));
  EXPECT_TRUE(dns.ok()) << dns.status().message();
  // No CA file: the system's store, which does not know the test CA.
  EXPECT_FALSE(client.Fetch(url("127.0.0.1", good->port(), ""), Get("/")).ok());
  // Plain HTTP to the TLS port gets no HTTP answer.
  EXPECT_FALSE(client.Fetch(Local(good->port()), Get("/")).ok());
  // A CA file that does not exist is an error naming it.
  auto missing = client.Fetch(url("127.0.0.1", good->port(), (dir / "nope.pem").string()), Get("/"));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.pem"), std::string::npos) << missing.status().message();
}

}  // namespace
}  // namespace kvs::http
