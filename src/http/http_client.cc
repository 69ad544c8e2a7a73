#include "http/http_client.h"

#include <algorithm>
#include <charconv>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/strings.h"
#include "http/tls.h"

namespace kvs::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;
using SteadyClock = std::chrono::steady_clock;

namespace {

std::string_view FindHeader(const std::vector<std::pair<std::string, std::string>>& headers, std::string_view name) {
  for (const auto& [k, v] : headers) {
    if (EqualsIgnoreAsciiCase(k, name)) return v;
  }
  return {};
}

bool IsHttpSyntaxError(const beast::error_code& ec) {
  return ec.category() == bhttp::make_error_code(bhttp::error::bad_version).category() &&
         ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message;
}

}  // namespace

// ---------------------------------------------------------------------------
// Url

StatusOr<Url> Url::Parse(std::string_view url) {
  const std::string_view original = url;
  Url u;
  constexpr std::string_view kHttp = "http://", kHttps = "https://";
  if (url.size() >= kHttp.size() && EqualsIgnoreAsciiCase(url.substr(0, kHttp.size()), kHttp)) {
    url.remove_prefix(kHttp.size());
  } else if (url.size() >= kHttps.size() && EqualsIgnoreAsciiCase(url.substr(0, kHttps.size()), kHttps)) {
    url.remove_prefix(kHttps.size());
    u.tls = true;
    u.port = 443;
  } else {
    return InvalidArgument("URL \"{}\": expected http://HOST[:PORT][/PATH] or https://...", original);
  }
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : url.substr(slash);
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return InvalidArgument("URL \"{}\": unclosed '[' in the host", original);
    u.host = std::string(authority.substr(1, close - 1));
    std::string_view rest = authority.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return InvalidArgument("URL \"{}\": unexpected text after the host", original);
      port = rest.substr(1);
    }
  } else {
    const size_t colon = authority.rfind(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (u.host.empty()) return InvalidArgument("URL \"{}\": no host", original);
  if (u.host.find('@') != std::string::npos) return InvalidArgument("URL \"{}\": credentials in URLs are not supported", original);
  if (!port.empty() || authority.find(':') != std::string_view::npos) {
    unsigned p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || p == 0 || p > 65535) {
      return InvalidArgument("URL \"{}\": the port must be a number in [1, 65535]", original);
    }
    u.port = static_cast<uint16_t>(p);
  }
  if (path.find_first_of("?#") != std::string_view::npos) {
    return InvalidArgument("URL \"{}\": a base URL takes no query or fragment", original);
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  u.base_path = std::string(path);
  return u;
}

std::string Url::HostPort() const {
  return host.find(':') != std::string::npos ? fmt::format("[{}]:{}", host, port) : fmt::format("{}:{}", host, port);
}

std::string Url::ToString() const { return (tls ? "https://" : "http://") + HostPort() + base_path; }

std::string Url::PoolKey() const { return tls ? fmt::format("https|{}|{}", tls_ca_file, HostPort()) : HostPort(); }

std::string_view ClientResponseHead::Header(std::string_view name) const { return FindHeader(headers, name); }
std::string_view ClientResponse::Header(std::string_view name) const { return FindHeader(headers, name); }

const char* ClientErrorKindName(ClientErrorKind k) {
  switch (k) {
    case ClientErrorKind::kNone: return "none";
    case ClientErrorKind::kConnect: return "connect";
    case ClientErrorKind::kConnectTimeout: return "connect_timeout";
    case ClientErrorKind::kFirstByteTimeout: return "first_byte_timeout";
    case ClientErrorKind::kTotalTimeout: return "total_timeout";
    case ClientErrorKind::kProtocol: return "protocol";
    case ClientErrorKind::kDisconnected: return "disconnected";
    case ClientErrorKind::kCancelled: return "cancelled";
  }
  return "?";
}

Status ClientResultToStatus(const ClientResult& r) {
  switch (r.error) {
    case ClientErrorKind::kNone: return Status::Ok();
    case ClientErrorKind::kConnectTimeout:
    case ClientErrorKind::kFirstByteTimeout:
    case ClientErrorKind::kTotalTimeout: return Status(StatusCode::kDeadlineExceeded, r.message);
    case ClientErrorKind::kConnect:
    case ClientErrorKind::kDisconnected: return Status(StatusCode::kUnavailable, r.message);
    case ClientErrorKind::kProtocol: return Status(StatusCode::kDataLoss, r.message);
    case ClientErrorKind::kCancelled: return Status(StatusCode::kCancelled, r.message);
  }
  return Internal("unknown client error");
}

// ---------------------------------------------------------------------------
// ClientImpl: io threads, the idle-connection pool, the live calls.

namespace internal {

struct ClientImpl {
  explicit ClientImpl(ClientOptions o) : options(std::move(o)), work(asio::make_work_guard(ioc)) {}

  struct Idle {
    std::unique_ptr<ClientStream> conn;
    SteadyClock::time_point since;
  };

  // A pooled connection to key that still looks open, or null.
  std::unique_ptr<ClientStream> TakeIdle(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = idle.find(key);
    if (it == idle.end()) return nullptr;
    auto& list = it->second;
    const auto now = SteadyClock::now();
    while (!list.empty()) {
      Idle e = std::move(list.back());
      list.pop_back();
      beast::error_code ec;
      tcp::socket& socket = e.conn->socket();
      if (now - e.since > options.idle_timeout) {
        socket.close(ec);
        continue;
      }
      // A closed (EOF) or reset socket, or one with unexpected bytes (TLS:
      // a record such as a close_notify alert), is useless; "would block"
      // means it is open and quiet.
      char c;
      socket.non_blocking(true, ec);
      socket.read_some(asio::buffer(&c, 1), ec);
      if (ec == asio::error::would_block || ec == asio::error::try_again) {
        socket.non_blocking(false, ec);
        return std::move(e.conn);
      }
      socket.close(ec);
    }
    return nullptr;
  }

  void PutIdle(const std::string& key, std::unique_ptr<ClientStream> conn) {
    std::lock_guard<std::mutex> lock(mu);
    beast::error_code ec;
    auto& list = idle[key];
    if (stopping || list.size() >= options.max_idle_per_host) {
      conn->socket().close(ec);
      return;
    }
    list.push_back(Idle{std::move(conn), SteadyClock::now()});
  }

  // The verifying context for a CA file, made once (until ReloadTls).
  StatusOr<std::shared_ptr<SslContext>> TlsContext(const std::string& ca_file) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = tls_contexts.find(ca_file);
    if (it != tls_contexts.end()) return it->second;
    KVS_ASSIGN_OR_RETURN(std::shared_ptr<SslContext> ctx, MakeClientTlsContext(ca_file));
    tls_contexts[ca_file] = ctx;
    return ctx;
  }

  bool OnIoThread() const {
    const auto me = std::this_thread::get_id();
    return std::any_of(threads.begin(), threads.end(), [&](const std::thread& t) { return t.get_id() == me; });
  }

  ClientOptions options;
  asio::io_context ioc;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  std::atomic<uint64_t> opened{0};
  std::atomic<uint64_t> next_call{0};
  std::atomic<bool> stopped{false};  // Stop ran (or is running)

  mutable std::mutex mu;
  bool stopping = false;                                          // guarded by mu
  std::map<std::string, std::vector<Idle>> idle;                  // guarded by mu
  std::map<std::string, std::shared_ptr<SslContext>> tls_contexts;  // guarded by mu: by CA file
  std::unordered_map<uint64_t, std::weak_ptr<Call>> live;         // guarded by mu
};

// One request/response. Everything runs on strand_.
class Call : public std::enable_shared_from_this<Call> {
 public:
  Call(std::shared_ptr<ClientImpl> impl, uint64_t id, Url url, ClientRequest req, ClientCallbacks cb)
      : impl_(std::move(impl)),
        id_(id),
        strand_(asio::make_strand(impl_->ioc)),
        url_(std::move(url)),
        key_(url_.HostPort()),
        pool_key_(url_.PoolKey()),
        req_(std::move(req)),
        cb_(std::move(cb)),
        resolver_(strand_),
        phase_timer_(strand_),
        total_timer_(strand_) {}

  void Begin() {
    asio::dispatch(strand_, [self = shared_from_this()] {
      if (self->done_) return;
      if (self->req_.timeouts.total.count() > 0) {
        self->total_timer_.expires_after(self->req_.timeouts.total);
        self->total_timer_.async_wait([self](beast::error_code ec) {
          if (!ec) {
            self->Abort(ClientErrorKind::kTotalTimeout,
                        fmt::format("no complete response from {} within {} ms", self->key_,
                                    self->req_.timeouts.total.count()));
          }
        });
      }
      self->Connect(/*allow_pooled=*/true);
    });
  }

  void Cancel() {
    asio::dispatch(strand_, [self = shared_from_this()] { self->Abort(ClientErrorKind::kCancelled, "cancelled"); });
  }

  // Ends the call now with an error (timeout, cancel): no further callbacks.
  void Abort(ClientErrorKind kind, std::string message) {
    if (done_) return;
    CloseSocket(/*abort=*/true);
    Complete(kind, std::move(message));
  }

 private:
  template <typename F>
  auto OnStrand(F&& f) {
    return asio::bind_executor(strand_, std::forward<F>(f));
  }

  void Connect(bool allow_pooled) {
    if (allow_pooled) {
      if (auto s = impl_->TakeIdle(pool_key_)) {
        conn_ = std::move(s);
        reused_ = true;
        Write();
        return;
      }
    }
    reused_ = false;
    ArmPhase(req_.timeouts.connect, ClientErrorKind::kConnectTimeout, "connecting to");
    resolver_.async_resolve(url_.host, std::to_string(url_.port), tcp::resolver::numeric_service,
                            [self = shared_from_this()](beast::error_code ec, tcp::resolver::results_type results) {
                              if (self->done_) return;
                              if (ec) {
                                self->Fail(ClientErrorKind::kConnect,
                                           fmt::format("cannot resolve {}: {}", self->url_.host, ec.message()));
                                return;
                              }
                              self->conn_ = std::make_unique<ClientStream>(self->impl_->ioc);
                              asio::async_connect(self->conn_->socket(), results,
                                                  self->OnStrand([self](beast::error_code cec, const tcp::endpoint&) {
                                                    self->OnConnect(cec);
                                                  }));
                            });
  }

  void OnConnect(beast::error_code ec) {
    if (done_) return;
    if (ec) {
      Fail(ClientErrorKind::kConnect, fmt::format("cannot connect to {}: {}", key_, ec.message()));
      return;
    }
    impl_->opened.fetch_add(1);
    beast::error_code ignored;
    conn_->socket().set_option(tcp::no_delay(true), ignored);
    if (url_.tls) {
      Handshake();
      return;
    }
    Write();
  }

  // Within the connect timeout (still armed). A certificate the CA does not
  // vouch for, or one for another name, fails here: a connect error.
  void Handshake() {
    auto ctx = impl_->TlsContext(url_.tls_ca_file);
    if (!ctx.ok()) {
      Fail(ClientErrorKind::kConnect, fmt::format("TLS to {}: {}", key_, ctx.status().message()));
      return;
    }
    if (Status s = conn_->StartTls(*ctx, url_.host); !s.ok()) {
      Fail(ClientErrorKind::kConnect, fmt::format("TLS to {}: {}", key_, s.message()));
      return;
    }
    conn_->tls().async_handshake(asio::ssl::stream_base::client,
                                 OnStrand([self = shared_from_this()](beast::error_code ec) {
                                   if (self->done_) return;
                                   if (ec) {
                                     self->Fail(ClientErrorKind::kConnect,
                                                fmt::format("TLS handshake with {} failed: {}", self->key_,
                                                            TlsErrorMessage(ec, self->conn_->tls().native_handle())));
                                     return;
                                   }
                                   self->Write();
                                 }));
  }

  void Write() {
    wire_.emplace();
    wire_->version(11);
    wire_->method_string(req_.method);
    wire_->target(url_.base_path + req_.target);
    wire_->set(bhttp::field::host, key_);
    for (const auto& [k, v] : req_.headers) {
      if (EqualsIgnoreAsciiCase(k, "host") || EqualsIgnoreAsciiCase(k, "content-length") || EqualsIgnoreAsciiCase(k, "transfer-encoding") || EqualsIgnoreAsciiCase(k, "connection")) continue;
      wire_->insert(k, v);
    }
    wire_->body() = req_.body;
    wire_->keep_alive(true);
    if (!req_.body.empty() || req_.method == "POST" || req_.method == "PUT" || req_.method == "PATCH") {
      wire_->content_length(req_.body.size());
    }
    ArmPhase(req_.timeouts.first_byte, ClientErrorKind::kFirstByteTimeout, "waiting for the response of");
    conn_->With([&](auto& stream) {
      bhttp::async_write(stream, *wire_, OnStrand([self = shared_from_this()](beast::error_code ec, size_t) {
                           self->OnWritten(ec);
                         }));
    });
  }

  void OnWritten(beast::error_code ec) {
    if (done_) return;
    if (ec) {
      if (RetryStale()) return;
      Fail(ClientErrorKind::kDisconnected, fmt::format("sending the request to {} failed: {}", key_, ec.message()));
      return;
    }
    parser_.emplace();
    parser_->header_limit(impl_->options.max_header_bytes);
    parser_->body_limit(std::numeric_limits<uint64_t>::max());
    if (req_.method == "HEAD") parser_->skip(true);
    conn_->With([&](auto& stream) {
      bhttp::async_read_header(stream, buffer_, *parser_,
                               OnStrand([self = shared_from_this()](beast::error_code rec, size_t) {
                                 self->OnHeader(rec);
                               }));
    });
  }

  void OnHeader(beast::error_code ec) {
    if (done_) return;
    if (ec) {
      if (RetryStale()) return;
      if (IsHttpSyntaxError(ec)) {
        Fail(ClientErrorKind::kProtocol, fmt::format("bad response head from {}: {}", key_, ec.message()));
      } else {
        Fail(ClientErrorKind::kDisconnected,
             fmt::format("{} closed the connection before responding: {}", key_, ec.message()));
      }
      return;
    }
    phase_timer_.cancel();
    const auto& msg = parser_->get();
    ClientResponseHead head;
    head.status = static_cast<int>(msg.result_int());
    for (const auto& f : msg) head.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    result_.head_received = true;
    if (cb_.on_head) cb_.on_head(head);
    if (done_) return;
    if (parser_->is_done()) {
      Finish();
      return;
    }
    ReadBody();
  }

  void ReadBody() {
    conn_->With([&](auto& stream) {
      bhttp::async_read_some(stream, buffer_, *parser_,
                             OnStrand([self = shared_from_this()](beast::error_code ec, size_t) { self->OnBody(ec); }));
    });
  }

  void OnBody(beast::error_code ec) {
    if (done_) return;
    std::string& body = parser_->get().body();
    if (!body.empty()) {
      std::string chunk;
      chunk.swap(body);
      result_.body_bytes += chunk.size();
      if (cb_.on_data) cb_.on_data(chunk);
      if (done_) return;
    }
    if (ec) {
      Fail(IsHttpSyntaxError(ec) ? ClientErrorKind::kProtocol : ClientErrorKind::kDisconnected,
           fmt::format("the response from {} broke off: {}", key_, ec.message()));
      return;
    }
    if (parser_->is_done()) {
      Finish();
      return;
    }
    ReadBody();
  }

  // A reused socket failed before any response byte: the server probably
  // closed it while idle. Try once more on a fresh connection.
  bool RetryStale() {
    if (!reused_ || retried_ || result_.head_received || buffer_.size() > 0) return false;
    retried_ = true;
    CloseSocket();
    parser_.reset();
    Connect(/*allow_pooled=*/false);
    return true;
  }

  void ArmPhase(std::chrono::milliseconds timeout, ClientErrorKind kind, const char* what) {
    phase_timer_.cancel();
    if (timeout.count() <= 0) return;
    phase_timer_.expires_after(timeout);
    phase_timer_.async_wait([self = shared_from_this(), kind, what, ms = timeout.count()](beast::error_code ec) {
      if (ec) return;
      self->Abort(kind, fmt::format("timed out after {} ms {} {}", ms, what, self->key_));
    });
  }

  // abort: the exchange is abandoned mid-way (a timeout, a cancel, an
  // error). The connection is then reset (SO_LINGER 0: RST, no FIN), because
  // a server reads a plain close before its answer as a half-close and keeps
  // generating; a reset tells it at once that nobody waits for the answer.
  void CloseSocket(bool abort = false) {
    beast::error_code ec;
    resolver_.cancel();
    if (conn_) {
      tcp::socket& socket = conn_->socket();
      if (abort) {
        socket.set_option(asio::socket_base::linger(true, 0), ec);
      } else {
        socket.shutdown(tcp::socket::shutdown_both, ec);
      }
      socket.close(ec);
      // Not freed yet: an operation on it may still be pending (a connect
      // cut off by its timeout), and completes (aborted) against it. The
      // handlers hold this call, so it lives until they have run.
      closed_.push_back(std::move(conn_));
    }
  }

  void Fail(ClientErrorKind kind, std::string message) {
    CloseSocket(/*abort=*/true);
    Complete(kind, std::move(message));
  }

  void Finish() {
    if (parser_->keep_alive() && buffer_.size() == 0 && conn_) {
      impl_->PutIdle(pool_key_, std::move(conn_));
    } else {
      CloseSocket();
    }
    Complete(ClientErrorKind::kNone, "");
  }

  void Complete(ClientErrorKind kind, std::string message) {
    if (done_) return;
    done_ = true;
    phase_timer_.cancel();
    total_timer_.cancel();
    result_.error = kind;
    result_.message = std::move(message);
    result_.reused_connection = reused_;
    ClientCallbacks cb = std::move(cb_);
    cb_ = {};
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(impl_->mu);
      impl_->live.erase(id_);
      stopping = impl_->stopping;
    }
    if (!stopping && cb.on_done) cb.on_done(result_);
  }

  std::shared_ptr<ClientImpl> impl_;
  const uint64_t id_;
  Strand strand_;
  const Url url_;
  const std::string key_;       // host:port (the Host header, messages)
  const std::string pool_key_;  // Url::PoolKey
  const ClientRequest req_;
  ClientCallbacks cb_;
  tcp::resolver resolver_;
  asio::steady_timer phase_timer_;
  asio::steady_timer total_timer_;
  std::unique_ptr<ClientStream> conn_;
  std::vector<std::unique_ptr<ClientStream>> closed_;  // closed by CloseSocket (at most two: a retry)
  std::optional<bhttp::request<bhttp::string_body>> wire_;
  std::optional<bhttp::response_parser<bhttp::string_body>> parser_;
  beast::flat_buffer buffer_;
  ClientResult result_;
  bool reused_ = false;
  bool retried_ = false;
  bool done_ = false;
};

}  // namespace internal

// ---------------------------------------------------------------------------

void ClientCall::Cancel() {
  if (call_) call_->Cancel();
}

HttpClient::HttpClient(ClientOptions options) : impl_(std::make_shared<internal::ClientImpl>(std::move(options))) {
  (void)spdlog::default_logger_raw();  // built before the io threads (see HttpServer::Start)
  const int n = std::max(1, impl_->options.io_threads);
  for (int i = 0; i < n; ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] {
      for (;;) {
        try {
          impl->ioc.run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("http client: io thread caught: {}", e.what());
        }
      }
    });
  }
}

HttpClient::~HttpClient() { Stop(); }

ClientCall HttpClient::Start(const Url& url, ClientRequest request, ClientCallbacks callbacks) {
  const uint64_t id = ++impl_->next_call;
  auto call = std::make_shared<internal::Call>(impl_, id, url, std::move(request), std::move(callbacks));
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) return ClientCall(nullptr);
    impl_->live[id] = call;
  }
  call->Begin();
  return ClientCall(call);
}

StatusOr<ClientResponse> HttpClient::Fetch(const Url& url, ClientRequest request) {
  KVS_CHECK_MSG(!impl_->OnIoThread(), "HttpClient::Fetch called from one of the client's own callbacks");
  struct State {
    ClientResponse res;
    bool too_big = false;
    std::promise<ClientResult> done;
  };
  auto st = std::make_shared<State>();
  const uint64_t limit = impl_->options.max_fetch_body_bytes;
  ClientCall call(nullptr);
  ClientCallbacks cb;
  cb.on_head = [st](const ClientResponseHead& h) {
    st->res.status = h.status;
    st->res.headers = h.headers;
  };
  cb.on_data = [st, limit](std::string_view d) {
    if (st->res.body.size() + d.size() > limit) {
      st->too_big = true;
      return;
    }
    st->res.body.append(d);
  };
  cb.on_done = [st](const ClientResult& r) { st->done.set_value(r); };
  auto fut = st->done.get_future();
  call = Start(url, std::move(request), std::move(cb));
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    if (impl_->stopping) return Status(StatusCode::kCancelled, "the HTTP client is stopped");
  }
  ClientResult r = fut.get();
  if (!r.ok()) return ClientResultToStatus(r);
  if (st->too_big) return ResourceExhausted("response body over {} bytes", limit);
  return std::move(st->res);
}

StatusOr<ClientResponse> HttpClient::Fetch(std::string_view url, ClientRequest request) {
  // Split "http://host:port/path?query" into the base and the target.
  const size_t scheme = url.find("://");
  const size_t slash = url.find('/', scheme == std::string_view::npos ? 0 : scheme + 3);
  const size_t query = url.find('?', scheme == std::string_view::npos ? 0 : scheme + 3);
  const size_t split = std::min(slash, query);
  KVS_ASSIGN_OR_RETURN(Url base, Url::Parse(url.substr(0, split)));
  request.target = split == std::string_view::npos ? "/" : std::string(url.substr(split));
  if (request.target.front() == '?') request.target = "/" + request.target;
  return Fetch(base, std::move(request));
}

void HttpClient::Stop() {
  if (!impl_ || impl_->stopped.exchange(true)) return;
  std::vector<std::shared_ptr<internal::Call>> live;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    impl_->stopping = true;
    for (auto& [id, w] : impl_->live) {
      if (auto c = w.lock()) live.push_back(std::move(c));
    }
    beast::error_code ec;
    for (auto& [key, list] : impl_->idle) {
      for (auto& e : list) e.conn->socket().close(ec);
    }
    impl_->idle.clear();
  }
  KVS_CHECK_MSG(!impl_->OnIoThread(), "HttpClient::Stop called from one of the client's own callbacks");
  for (auto& c : live) c->Cancel();
  live.clear();
  // With every call aborted the io_context runs out of work and the threads
  // return; nothing is left holding a call (and so the client) alive.
  impl_->work.reset();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
  impl_->threads.clear();
}

size_t HttpClient::idle_connections() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  size_t n = 0;
  for (const auto& [k, list] : impl_->idle) n += list.size();
  return n;
}

uint64_t HttpClient::connections_opened() const { return impl_->opened.load(); }

void HttpClient::ReloadTls() {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->tls_contexts.clear();
}

}  // namespace kvs::http
