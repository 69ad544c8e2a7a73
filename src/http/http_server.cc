#include "http/http_server.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace kvs::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;

namespace {

bool IEquals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Header values must not smuggle line breaks into the response.
std::string Sanitize(std::string_view v) {
  std::string out(v);
  std::replace_if(out.begin(), out.end(), [](char c) { return c == '\r' || c == '\n'; }, ' ');
  return out;
}

// Responses are serialized by Beast (status line, fields, Content-Length,
// Connection, chunked framing); these adapt our plain structs to it.
using HeaderList = std::vector<std::pair<std::string, std::string>>;

template <class Body>
void SetFields(bhttp::response<Body>& res, int status, const HeaderList& headers, bool keep_alive) {
  res.result(static_cast<unsigned>(status));
  for (const auto& [name, value] : headers) {
    // The server owns framing and connection management.
    if (IEquals(name, "content-length") || IEquals(name, "transfer-encoding") || IEquals(name, "connection")) {
      continue;
    }
    res.insert(Sanitize(name), Sanitize(value));
  }
  res.keep_alive(keep_alive);
}

template <class Message>
std::string Serialize(const Message& m) {
  std::ostringstream os;
  os << m;
  return os.str();
}

// A whole response; for HEAD, its header only (Content-Length as for GET).
std::string SerializeResponse(int status, int version, const HeaderList& headers, bool keep_alive, std::string body,
                              bool head) {
  bhttp::response<bhttp::string_body> res(bhttp::status::ok, version == 10 ? 10 : 11);
  SetFields(res, status, headers, keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return head ? Serialize(res.base()) : Serialize(res);
}

// The header of a streamed response: chunked (HTTP/1.1) or ended by closing
// the connection (HTTP/1.0).
std::string SerializeStreamHead(int status, int version, const HeaderList& headers, bool keep_alive, bool chunked) {
  bhttp::response<bhttp::empty_body> res(bhttp::status::ok, version == 10 ? 10 : 11);
  SetFields(res, status, headers, keep_alive);
  if (chunked) res.chunked(true);
  return Serialize(res.base());
}

std::string Chunk(std::string_view data) {
  return beast::buffers_to_string(bhttp::make_chunk(asio::const_buffer(data.data(), data.size())));
}

bool IsDisconnect(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::not_connected || ec == asio::error::operation_aborted ||
         ec == asio::error::bad_descriptor || ec == beast::error::timeout;
}

constexpr size_t kMaxBufferedWhileHandling = 64 << 10;  // pipelined bytes read while a request runs
constexpr uint64_t kMaxLingerBytes = uint64_t{64} << 20;
constexpr std::chrono::seconds kLingerTimeout{2};

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (IEquals(k, name)) return v;
  }
  return {};
}

HttpResponse& HttpResponse::SetHeader(std::string name, std::string value) {
  for (auto& [k, v] : headers) {
    if (IEquals(k, name)) {
      v = std::move(value);
      return *this;
    }
  }
  headers.emplace_back(std::move(name), std::move(value));
  return *this;
}

struct HttpServer::Impl {
  explicit Impl(ServerOptions o)
      : options(std::move(o)),
        ioc(std::make_unique<asio::io_context>()),
        accept_strand(asio::make_strand(*ioc)),
        acceptor(std::make_unique<tcp::acceptor>(*accept_strand)) {}
  // The io_context goes first, while everything its leftover handlers (and
  // the connections they own) may touch is still alive.
  ~Impl() {
    work.reset();
    signal_watchers.clear();
    acceptor.reset();
    accept_strand.reset();
    ioc.reset();
  }

  void DoAccept();
  void StartConnection(tcp::socket socket, Strand strand);
  void Forget(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu);
    conns.erase(id);
  }

  ServerOptions options;
  std::unique_ptr<asio::io_context> ioc;
  std::optional<Strand> accept_strand;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  // Calls fn for every delivery of its signals until cancelled.
  struct SignalWatcher {
    SignalWatcher(asio::io_context& ioc, std::function<void(int)> f) : set(ioc), fn(std::move(f)) {}
    void Arm() {
      set.async_wait([this](beast::error_code ec, int sig) {
        if (ec) return;
        fn(sig);
        Arm();
      });
    }
    asio::signal_set set;
    std::function<void(int)> fn;
  };
  std::vector<std::unique_ptr<SignalWatcher>> signal_watchers;
  Handler handler;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> active_exchanges{0};
  std::atomic<uint64_t> next_connection_id{0};
  std::atomic<uint64_t> next_exchange_id{0};
  std::mutex mu;
  std::unordered_map<uint64_t, std::weak_ptr<internal::Connection>> conns;
  std::atomic<bool> stopped{false};
};

namespace internal {

// One TCP connection: reads requests one after another, hands each to the
// handler as an Exchange and writes its response. Everything runs on strand_.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl* server, tcp::socket socket, Strand strand, uint64_t id)
      : server_(server),
        strand_(std::move(strand)),
        stream_(std::move(socket)),
        deadline_(strand_),
        ping_timer_(strand_),
        id_(id) {
    beast::error_code ec;
    auto ep = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = fmt::format("{}:{}", ep.address().to_string(), ep.port());
  }

  void Start() {
    asio::dispatch(strand_, [self = shared_from_this()] { self->DoReadHeader(); });
  }

  void Post(std::function<void()> fn) { asio::post(strand_, std::move(fn)); }
  bool OnStrand() const { return strand_.running_in_this_thread(); }
  bool server_stopped() const { return server_->stopped.load(); }

  void SendResponse(uint64_t ex_id, HttpResponse res) {
    if (ex_id != current_id_) return;
    if (server_->draining) keep_alive_ = false;
    const bool head = method_ == "HEAD";
    Send(SerializeResponse(res.status, version_, res.headers, keep_alive_, std::move(res.body), head), true);
  }

  void StartStream(uint64_t ex_id, const HttpResponse& header, std::chrono::milliseconds keep_alive,
                   std::string ping) {
    if (ex_id != current_id_) return;
    if (server_->draining) keep_alive_ = false;
    chunked_ = version_ == 11;
    if (!chunked_) keep_alive_ = false;  // HTTP/1.0: the end of the body is the end of the connection
    stream_started_ = true;
    Send(SerializeStreamHead(header.status, version_, header.headers, keep_alive_, chunked_), false);
    last_write_ = Clock::now();
    if (keep_alive.count() > 0 && !ping.empty()) {
      ping_interval_ = keep_alive;
      ping_ = std::move(ping);
      ArmPing(ex_id);
    }
  }

  bool WriteChunk(uint64_t ex_id, std::string data) {
    if (ex_id != current_id_ || closed_) return false;
    if (data.empty()) return true;
    last_write_ = Clock::now();
    if (chunked_) data = Chunk(data);
    return Send(std::move(data), false);
  }

  void EndStream(uint64_t ex_id) {
    if (ex_id != current_id_) return;
    Send(chunked_ ? beast::buffers_to_string(bhttp::make_chunk_last()) : std::string(), true);
  }

  void SetDeadline(uint64_t ex_id, Clock::time_point when, std::function<void()> fn) {
    if (ex_id != current_id_ || closed_) return;
    deadline_fn_ = std::move(fn);
    deadline_.expires_at(when);
    deadline_.async_wait([self = shared_from_this(), ex_id](beast::error_code ec) {
      if (ec || self->current_id_ != ex_id) return;
      auto fn = std::move(self->deadline_fn_);
      self->deadline_fn_ = nullptr;
      if (fn) fn();
    });
  }

  // Sends the ping when the stream has been quiet for ping_interval_.
  void ArmPing(uint64_t ex_id) {
    ping_timer_.expires_after(ping_interval_);
    ping_timer_.async_wait([self = shared_from_this(), ex_id](beast::error_code ec) {
      if (ec || self->current_id_ != ex_id || self->closed_ || self->end_pending_) return;
      if (Clock::now() - self->last_write_ >= self->ping_interval_) self->WriteChunk(ex_id, self->ping_);
      self->ArmPing(ex_id);
    });
  }

  // The Exchange object was destroyed without ending its response.
  void Abandon(uint64_t ex_id) {
    if (ex_id != current_id_) return;
    spdlog::warn("http: exchange {} was dropped without a response", ex_id);
    if (stream_started_) {
      EndStream(ex_id);
    } else {
      HttpResponse res;
      res.status = 500;
      res.SetHeader("Content-Type", "application/json");
      res.body = R"({"error":{"message":"internal error: the request was dropped","type":"internal_error","param":null,"code":"internal_error"}})";
      SendResponse(ex_id, std::move(res));
    }
  }

  void ForceClose() {
    asio::dispatch(strand_, [self = shared_from_this()] { self->ClientGone(); });
  }

 private:
  void DoReadHeader() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(server_->options.max_header_bytes);
    parser_->body_limit(server_->options.max_body_bytes);
    stream_.expires_after(server_->options.keep_alive_timeout);
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&Connection::OnHeader, shared_from_this()));
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (closed_) return;
    if (ec) {
      OnReadError(ec);
      return;
    }
    auto& req = parser_->get();
    if (auto len = parser_->content_length(); len && *len > server_->options.max_body_bytes) {
      Dispatch(413, BodyLimitMessage());
      return;
    }
    if (parser_->is_done()) {
      Dispatch(0, {});
      return;
    }
    if (IEquals(req[bhttp::field::expect], "100-continue") && req.version() == 11) {
      continue_ = Serialize(bhttp::response<bhttp::empty_body>(bhttp::status::continue_, 11).base());
      stream_.expires_after(server_->options.write_timeout);
      asio::async_write(stream_, asio::buffer(continue_),
                        [self = shared_from_this()](beast::error_code wec, size_t) {
                          if (wec) {
                            self->Close();
                            return;
                          }
                          self->DoReadBody();
                        });
      return;
    }
    DoReadBody();
  }

  void DoReadBody() {
    if (closed_) return;
    stream_.expires_after(server_->options.read_timeout);
    bhttp::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Connection::OnBody, shared_from_this()));
  }

  void OnBody(beast::error_code ec, size_t) {
    if (closed_) return;
    if (ec) {
      OnReadError(ec);
      return;
    }
    Dispatch(0, {});
  }

  std::string BodyLimitMessage() const {
    return fmt::format("request body too large: the limit is {} bytes (server.max_body_bytes)",
                       server_->options.max_body_bytes);
  }

  void OnReadError(const beast::error_code& ec) {
    if (ec == bhttp::error::body_limit) {
      Dispatch(413, BodyLimitMessage());
    } else if (ec == bhttp::error::header_limit) {
      Dispatch(431, fmt::format("request header too large: the limit is {} bytes", server_->options.max_header_bytes));
    } else if (IsDisconnect(ec)) {
      spdlog::debug("http: read ended: {}", ec.message());
      Close();  // the client left (or idled out) between requests: nothing to answer
    } else {
      Dispatch(400, "malformed HTTP request: " + ec.message());
    }
  }

  void Dispatch(int transport_error, std::string message) {
    auto& msg = parser_->get();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    req.path = req.target.substr(0, req.target.find('?'));
    req.version = msg.version() == 10 ? 10 : 11;
    for (const auto& f : msg) req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    if (transport_error == 0) {
      keep_alive_ = msg.keep_alive();
      req.body = std::move(msg.body());
    } else {
      keep_alive_ = false;
      linger_ = true;
    }
    parser_.reset();
    method_ = req.method;
    version_ = req.version;
    chunked_ = false;
    stream_started_ = false;
    stream_.expires_never();

    const uint64_t ex_id = ++server_->next_exchange_id;
    current_id_ = ex_id;
    server_->active_exchanges.fetch_add(1);
    auto ex = std::make_shared<Exchange>(shared_from_this(), std::move(req), transport_error, std::move(message), ex_id,
                                         remote_);
    current_ex_ = ex;
    if (transport_error == 0) StartWatch();
    try {
      server_->handler(ex);
    } catch (const std::exception& e) {
      spdlog::error("http: handler threw: {}", e.what());
      if (!ex->ended()) {
        if (ex->streaming()) {
          ex->EndStream();
        } else {
          HttpResponse res;
          res.status = 500;
          res.SetHeader("Content-Type", "application/json");
          res.body = R"({"error":{"message":"internal error","type":"internal_error","param":null,"code":"internal_error"}})";
          ex->Respond(std::move(res));
        }
      }
    }
  }

  // Reads while a request is handled, to notice a client that goes away.
  void StartWatch() {
    if (watching_ || closed_) return;
    watching_ = true;
    stream_.socket().async_read_some(asio::buffer(watch_buf_),
                                     beast::bind_front_handler(&Connection::OnWatch, shared_from_this()));
  }

  void OnWatch(beast::error_code ec, size_t n) {
    watching_ = false;
    if (n > 0) {
      auto b = buffer_.prepare(n);
      std::memcpy(b.data(), watch_buf_.data(), n);
      buffer_.commit(n);
    }
    if (closed_) return;
    if (resume_after_watch_) {
      resume_after_watch_ = false;
      if (!ec || ec == asio::error::operation_aborted) {
        DoReadHeader();
      } else {
        Close();
      }
      return;
    }
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      ClientGone();
      return;
    }
    if (current_id_ != 0 && buffer_.size() < kMaxBufferedWhileHandling) StartWatch();
  }

  bool Send(std::string data, bool last) {
    if (last) end_pending_ = true;
    if (closed_) {
      if (last) FinishExchange();
      return false;
    }
    pending_ += data;
    if (writing_ && pending_.size() > server_->options.max_pending_bytes) {
      spdlog::warn("http: client {} is not reading ({} bytes pending); disconnecting", remote_, pending_.size());
      ClientGone();
      if (end_pending_) FinishExchange();
      return false;
    }
    if (!writing_) {
      if (!pending_.empty()) {
        DoWrite();
      } else if (end_pending_) {
        FinishExchange();
      }
    }
    return true;
  }

  void DoWrite() {
    inflight_.swap(pending_);
    pending_.clear();
    writing_ = true;
    stream_.expires_after(server_->options.write_timeout);
    asio::async_write(stream_, asio::buffer(inflight_),
                      beast::bind_front_handler(&Connection::OnWrite, shared_from_this()));
  }

  void OnWrite(beast::error_code ec, size_t) {
    writing_ = false;
    inflight_.clear();
    if (ec) {
      ClientGone();
      if (end_pending_) FinishExchange();
      return;
    }
    if (closed_) {
      if (end_pending_) FinishExchange();
      return;
    }
    if (!pending_.empty()) {
      DoWrite();
      return;
    }
    if (end_pending_) FinishExchange();
  }

  // The response's last byte is written (or the connection is dead).
  void FinishExchange() {
    end_pending_ = false;
    if (current_id_ != 0) {
      current_id_ = 0;
      current_ex_.reset();
      server_->active_exchanges.fetch_sub(1);
    }
    deadline_.cancel();
    deadline_fn_ = nullptr;
    ping_timer_.cancel();
    ping_interval_ = std::chrono::milliseconds(0);
    if (closed_) {
      Close();
      return;
    }
    if (linger_) {
      LingerClose();
      return;
    }
    if (!keep_alive_ || server_->draining) {
      Close();
      return;
    }
    if (watching_) {
      resume_after_watch_ = true;
      beast::error_code ec;
      stream_.socket().cancel(ec);
      return;
    }
    DoReadHeader();
  }

  // The client left (or is cut off): close, and tell the running exchange.
  void ClientGone() {
    if (closed_) return;
    Close();
    if (auto ex = current_ex_.lock(); ex && !ex->ended()) ex->NotifyClientClosed();
  }

  void Close() {
    closed_ = true;
    deadline_.cancel();
    deadline_fn_ = nullptr;  // it may own the exchange's owner: break the cycle
    ping_timer_.cancel();
    if (!socket_closed_) {
      socket_closed_ = true;
      beast::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      stream_.socket().close(ec);
      server_->Forget(id_);
    }
  }

  // After refusing a request whose body we did not read: stop sending, read
  // and discard what the client still sends for a while, then close. Closing
  // with unread data would make the kernel reset the connection, and the
  // client could lose our answer.
  void LingerClose() {
    closed_ = true;
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(kLingerTimeout);
    DoLingerRead();
  }

  void DoLingerRead() {
    stream_.async_read_some(asio::buffer(watch_buf_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->linger_bytes_ += n;
      if (ec || self->linger_bytes_ > kMaxLingerBytes) {
        self->Close();
        return;
      }
      self->DoLingerRead();
    });
  }

  HttpServer::Impl* server_;
  Strand strand_;
  beast::tcp_stream stream_;
  asio::steady_timer deadline_;
  std::function<void()> deadline_fn_;
  asio::steady_timer ping_timer_;
  std::chrono::milliseconds ping_interval_{0};
  std::string ping_;
  Clock::time_point last_write_;
  uint64_t id_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::array<char, 4096> watch_buf_{};

  uint64_t current_id_ = 0;            // the exchange being handled, 0 when idle
  std::weak_ptr<Exchange> current_ex_;
  std::string method_;
  int version_ = 11;
  bool keep_alive_ = true;
  bool linger_ = false;
  bool chunked_ = false;
  bool stream_started_ = false;

  std::string pending_, inflight_;
  std::string continue_;  // "100 Continue" while it is written
  bool writing_ = false;
  bool end_pending_ = false;
  bool watching_ = false;
  bool resume_after_watch_ = false;
  bool closed_ = false;
  bool socket_closed_ = false;
  uint64_t linger_bytes_ = 0;
};

}  // namespace internal

// ---------------------------------------------------------------------------
// Exchange

Exchange::Exchange(std::shared_ptr<internal::Connection> conn, HttpRequest req, int transport_error,
                   std::string transport_error_message, uint64_t id, std::string remote)
    : conn_(std::move(conn)),
      req_(std::move(req)),
      transport_error_(transport_error),
      transport_error_message_(std::move(transport_error_message)),
      id_(id),
      remote_(std::move(remote)),
      received_at_(Clock::now()) {}

Exchange::~Exchange() {
  // After Stop the io_context runs no more handlers (and may be tearing down).
  if (ended_ || !conn_ || conn_->server_stopped()) return;
  auto conn = conn_;
  const uint64_t id = id_;
  conn->Post([conn, id] { conn->Abandon(id); });
}

void Exchange::Post(std::function<void()> fn) { conn_->Post(std::move(fn)); }
bool Exchange::OnStrand() const { return conn_->OnStrand(); }

void Exchange::Respond(HttpResponse res) {
  KVS_DCHECK(OnStrand());
  if (ended_ || streaming_) return;
  ended_ = true;
  status_ = res.status;
  on_close_ = nullptr;
  conn_->SendResponse(id_, std::move(res));
}

void Exchange::StartStream(HttpResponse header, std::chrono::milliseconds keep_alive, std::string ping) {
  KVS_DCHECK(OnStrand());
  if (ended_ || streaming_) return;
  streaming_ = true;
  status_ = header.status;
  conn_->StartStream(id_, header, keep_alive, std::move(ping));
}

bool Exchange::Write(std::string data) {
  KVS_DCHECK(OnStrand());
  if (ended_ || !streaming_ || client_closed_) return false;
  return conn_->WriteChunk(id_, std::move(data));
}

void Exchange::EndStream() {
  KVS_DCHECK(OnStrand());
  if (ended_ || !streaming_) return;
  ended_ = true;
  on_close_ = nullptr;
  conn_->EndStream(id_);
}

void Exchange::SetDeadline(Clock::time_point when, std::function<void()> fn) {
  KVS_DCHECK(OnStrand());
  if (ended_) return;
  conn_->SetDeadline(id_, when, std::move(fn));
}

void Exchange::NotifyClientClosed() {
  if (client_closed_) return;
  client_closed_ = true;
  if (on_close_) {
    auto fn = std::move(on_close_);
    on_close_ = nullptr;
    fn();
  }
}

// ---------------------------------------------------------------------------
// HttpServer

void HttpServer::Impl::DoAccept() {
  Strand strand = asio::make_strand(*ioc);
  acceptor->async_accept(strand, [this, strand](beast::error_code ec, tcp::socket socket) {
    if (!ec) {
      // Serve it even if the listener closed meanwhile: it was accepted.
      StartConnection(std::move(socket), strand);
      if (acceptor->is_open()) DoAccept();
      return;
    }
    if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
    {
      // EMFILE and friends: keep the listener alive and try again shortly.
      spdlog::warn("http: accept failed: {}", ec.message());
      auto t = std::make_shared<asio::steady_timer>(*accept_strand, std::chrono::milliseconds(50));
      t->async_wait([this, t](beast::error_code) {
        if (acceptor->is_open()) DoAccept();
      });
    }
  });
}

void HttpServer::Impl::StartConnection(tcp::socket socket, Strand strand) {
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  const uint64_t id = ++next_connection_id;
  auto conn = std::make_shared<internal::Connection>(this, std::move(socket), std::move(strand), id);
  {
    std::lock_guard<std::mutex> lock(mu);
    conns[id] = conn;
  }
  conn->Start();
}

HttpServer::HttpServer(ServerOptions options) : options_(std::move(options)) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start(Handler handler) {
  KVS_CHECK(!impl_);
  impl_ = std::make_unique<Impl>(options_);
  Impl& s = *impl_;
  s.handler = std::move(handler);
  beast::error_code ec;
  tcp::resolver resolver(*s.ioc);
  auto results = resolver.resolve(options_.host, std::to_string(options_.port),
                                  tcp::resolver::passive | tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return InvalidArgument("cannot resolve server.host \"{}\": {}", options_.host, ec.message());
  }
  tcp::endpoint ep = results.begin()->endpoint();
  s.acceptor->open(ep.protocol(), ec);
  if (!ec) s.acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor->bind(ep, ec);
  if (!ec) s.acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("cannot listen on {}:{}: {}", options_.host, options_.port, ec.message());
  }
  bound_port_ = s.acceptor->local_endpoint().port();
  s.work.emplace(asio::make_work_guard(*s.ioc));
  asio::post(*s.accept_strand, [&s] { s.DoAccept(); });
  const int n = std::max(1, options_.io_threads);
  for (int i = 0; i < n; ++i) {
    s.threads.emplace_back([&s] {
      for (;;) {
        try {
          s.ioc->run();
          return;
        } catch (const std::exception& e) {
          spdlog::error("http: io thread caught: {}", e.what());
        }
      }
    });
  }
  return Status::Ok();
}

void HttpServer::StopAccepting() {
  if (!impl_) return;
  Impl& s = *impl_;
  asio::post(*s.accept_strand, [&s] {
    if (!s.acceptor->is_open()) return;
    // Take what is already queued in the backlog, so those clients get an
    // answer (the handler refuses them while draining) instead of a reset.
    beast::error_code ec;
    s.acceptor->non_blocking(true, ec);
    for (int i = 0; i < 4096 && !ec; ++i) {
      Strand strand = asio::make_strand(*s.ioc);
      tcp::socket socket(strand);
      s.acceptor->accept(socket, ec);
      if (!ec) s.StartConnection(std::move(socket), strand);
    }
    s.acceptor->close(ec);
  });
}

void HttpServer::SetDraining() {
  if (impl_) impl_->draining = true;
}

bool HttpServer::draining() const { return impl_ && impl_->draining; }

void HttpServer::CloseAll() {
  if (!impl_) return;
  std::vector<std::shared_ptr<internal::Connection>> conns;
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& [id, w] : impl_->conns) {
      if (auto c = w.lock()) conns.push_back(std::move(c));
    }
  }
  for (auto& c : conns) c->ForceClose();
}

void HttpServer::Stop() {
  if (!impl_ || impl_->stopped) return;
  Impl& s = *impl_;
  StopAccepting();
  CloseAll();
  // Let the closes run (clients see the connection end, not a hang), briefly.
  for (int i = 0; i < 50 && open_connections() > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  s.stopped = true;
  s.work.reset();
  s.ioc->stop();
  for (auto& t : s.threads) {
    if (t.joinable()) t.join();
  }
  s.threads.clear();
}

int64_t HttpServer::active_exchanges() const { return impl_ ? impl_->active_exchanges.load() : 0; }

int64_t HttpServer::open_connections() const {
  if (!impl_) return 0;
  std::lock_guard<std::mutex> lock(impl_->mu);
  return static_cast<int64_t>(impl_->conns.size());
}

void HttpServer::RunAfter(std::chrono::milliseconds delay, std::function<void()> fn) {
  KVS_CHECK(impl_);
  auto t = std::make_shared<asio::steady_timer>(*impl_->ioc, delay);
  t->async_wait([t, fn = std::move(fn)](beast::error_code ec) {
    if (!ec) fn();
  });
}

void HttpServer::OnSignal(std::vector<int> signals, std::function<void(int)> fn) {
  KVS_CHECK(impl_);
  auto w = std::make_unique<Impl::SignalWatcher>(*impl_->ioc, std::move(fn));
  for (int sig : signals) w->set.add(sig);
  w->Arm();
  impl_->signal_watchers.push_back(std::move(w));
}

}  // namespace kvs::http
