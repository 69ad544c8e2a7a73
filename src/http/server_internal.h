// Internals of HttpServer (included by http_server.cc only): the server's
// shared state (HttpServer::Impl) and one TCP connection (internal::
// Connection), which reads requests one after another, hands each to the
// handler as an Exchange and writes its response, everything on its strand.
#pragma once

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

#include "base/strings.h"
#include "http/http_server.h"

namespace kvs::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using Strand = asio::strand<asio::io_context::executor_type>;

namespace internal {


// Header values must not smuggle line breaks into the response.
inline std::string Sanitize(std::string_view v) {
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
    if (EqualsIgnoreAsciiCase(name, "content-length") || EqualsIgnoreAsciiCase(name, "transfer-encoding") || EqualsIgnoreAsciiCase(name, "connection")) {
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
inline std::string SerializeResponse(int status, int version, const HeaderList& headers, bool keep_alive, std::string body,
                              bool head) {
  bhttp::response<bhttp::string_body> res(bhttp::status::ok, version == 10 ? 10 : 11);
  SetFields(res, status, headers, keep_alive);
  res.body() = std::move(body);
  res.prepare_payload();
  return head ? Serialize(res.base()) : Serialize(res);
}

// The header of a streamed response: chunked (HTTP/1.1) or ended by closing
// the connection (HTTP/1.0).
inline std::string SerializeStreamHead(int status, int version, const HeaderList& headers, bool keep_alive, bool chunked) {
  bhttp::response<bhttp::empty_body> res(bhttp::status::ok, version == 10 ? 10 : 11);
  SetFields(res, status, headers, keep_alive);
  if (chunked) res.chunked(true);
  return Serialize(res.base());
}

inline std::string Chunk(std::string_view data) {
  return beast::buffers_to_string(bhttp::make_chunk(asio::const_buffer(data.data(), data.size())));
}

inline bool IsDisconnect(const beast::error_code& ec) {
  return ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe ||
         ec == asio::error::not_connected || ec == asio::error::operation_aborted ||
         ec == asio::error::bad_descriptor || ec == beast::error::timeout;
}

constexpr size_t kMaxBufferedWhileHandling = 64 << 10;  // pipelined bytes read while a request runs
constexpr size_t kFirstReadBytes = 4096;                 // what one read takes once a request begins
constexpr std::chrono::seconds kAcceptLogInterval{10};
constexpr uint64_t kMaxLingerBytes = uint64_t{64} << 20;
constexpr std::chrono::seconds kLingerTimeout{2};

}  // namespace internal

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
  void Forget(uint64_t id, const std::string& address) {
    std::lock_guard<std::mutex> lock(mu);
    if (conns.erase(id) == 0) return;
    const auto it = per_client.find(address);
    if (it != per_client.end() && --it->second <= 0) per_client.erase(it);
  }
  // Accept strand only: logs an accept failure, at most every kAcceptLogInterval.
  void LogAcceptFailure(const beast::error_code& ec);

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
  std::unordered_map<uint64_t, std::weak_ptr<internal::Connection>> conns;  // guarded by mu
  std::unordered_map<std::string, int> per_client;  // guarded by mu: open connections by remote address
  std::atomic<int64_t> refused{0};
  // Accept strand only.
  std::optional<Clock::time_point> last_accept_log;
  int64_t unlogged_accept_failures = 0;
  std::atomic<bool> stopped{false};
};

namespace internal {


// One TCP connection: reads requests one after another, hands each to the
// handler as an Exchange and writes its response. Everything runs on strand_.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(HttpServer::Impl* server, tcp::socket socket, Strand strand, uint64_t id, std::string address)
      : server_(server),
        strand_(std::move(strand)),
        stream_(std::move(socket)),
        deadline_(strand_),
        ping_timer_(strand_),
        id_(id),
        address_(std::move(address)) {
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
  // Idle until the next request's first byte (keep_alive_timeout), then its
  // whole header within header_timeout: a client that trickles its header
  // (slowloris) cannot hold the connection for longer than that.
  void DoReadHeader() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(server_->options.max_header_bytes);
    parser_->body_limit(server_->options.max_body_bytes);
    if (buffer_.size() > 0) {  // pipelined: the next request has begun
      ReadHeader();
      return;
    }
    stream_.expires_after(server_->options.keep_alive_timeout);
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->buffer_.commit(n);
      if (self->closed_) return;
      if (ec) {
        self->OnReadError(ec);
        return;
      }
      self->ReadHeader();
    });
  }

  void ReadHeader() {
    stream_.expires_after(server_->options.header_timeout);
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
    if (server_->options.header_check) {
      std::string message;
      if (int status = server_->options.header_check(HeadOf(req), &message)) {
        Dispatch(status, std::move(message));
        return;
      }
    }
    if (parser_->is_done()) {
      Dispatch(0, {});
      return;
    }
    if (EqualsIgnoreAsciiCase(req[bhttp::field::expect], "100-continue") && req.version() == 11) {
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

  // Everything of a request but its body.
  static HttpRequest HeadOf(const bhttp::request<bhttp::string_body>& msg) {
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    req.path = req.target.substr(0, req.target.find('?'));
    req.version = msg.version() == 10 ? 10 : 11;
    for (const auto& f : msg) req.headers.emplace_back(std::string(f.name_string()), std::string(f.value()));
    return req;
  }

  void Dispatch(int transport_error, std::string message) {
    auto& msg = parser_->get();
    HttpRequest req = HeadOf(msg);
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
    if (ec == asio::error::eof && !stream_started_) {
      // The client shut down its sending side after its request (a
      // half-close, as `nc -N` or a proxy may do) and waits for the answer:
      // no further request can come, but this one is answered. A client that
      // closed the socket entirely is noticed when the answer is written.
      keep_alive_ = false;
      return;
    }
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
    // Backpressure counts what piles up behind the client's reading, not
    // what was queued at once: the write in flight and the next chunk behind
    // it are the client's to read (a streamed `echo` of a 9 MiB prompt is
    // one chunk), whatever is queued after them counts against
    // max_pending_bytes. A client that reads nothing at all is also cut off
    // by write_timeout (no progress on a socket write).
    if (writing_ && !pending_.empty() &&
        pending_.size() - first_pending_bytes_ + data.size() > server_->options.max_pending_bytes) {
      spdlog::warn("http: client {} is not reading ({} bytes pending); disconnecting", remote_,
                   pending_.size() + data.size());
      ClientGone();
      if (end_pending_) FinishExchange();
      return false;
    }
    if (pending_.empty()) first_pending_bytes_ = data.size();
    pending_ += data;
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
    first_pending_bytes_ = 0;
    inflight_done_ = 0;
    writing_ = true;
    WriteSome();
  }

  // One socket write at a time, each with its own write_timeout: a client
  // that keeps reading a large response slowly is making progress and is not
  // cut off; one that reads nothing for write_timeout is.
  void WriteSome() {
    stream_.expires_after(server_->options.write_timeout);
    stream_.async_write_some(asio::buffer(inflight_.data() + inflight_done_, inflight_.size() - inflight_done_),
                             beast::bind_front_handler(&Connection::OnWriteSome, shared_from_this()));
  }

  void OnWriteSome(beast::error_code ec, size_t n) {
    inflight_done_ += n;
    if (!ec && !closed_ && inflight_done_ < inflight_.size()) {
      WriteSome();
      return;
    }
    OnWrite(ec);
  }

  void OnWrite(beast::error_code ec) {
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
      server_->Forget(id_, address_);
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
  std::string address_;  // the remote IP address (the per-client limit's key)
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
  size_t first_pending_bytes_ = 0;  // size of the first chunk queued in pending_ (exempt from the backlog limit)
  size_t inflight_done_ = 0;        // bytes of inflight_ already written
  std::string continue_;  // "100 Continue" while it is written
  bool writing_ = false;
  bool end_pending_ = false;
  bool watching_ = false;
  bool resume_after_watch_ = false;
  bool closed_ = false;
  bool socket_closed_ = false;
  uint64_t linger_bytes_ = 0;
};

// A connection the server will not serve (over a connection limit): it gets
// one canned response and is closed after a short linger that reads and
// discards what the client sends (so it sees the answer, not a reset).
class Refusal : public std::enable_shared_from_this<Refusal> {
 public:
  Refusal(tcp::socket socket, std::string response) : stream_(std::move(socket)), response_(std::move(response)) {}

  void Start() {
    stream_.expires_after(kLingerTimeout);
    asio::async_write(stream_, asio::buffer(response_), [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      beast::error_code ignored;
      self->stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
      self->Drain();
    });
  }

 private:
  void Drain() {
    stream_.async_read_some(asio::buffer(buf_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->read_ += n;
      if (ec || self->read_ > kMaxLingerBytes) return self->Close();
      self->Drain();
    });
  }
  void Close() {
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  std::string response_;
  std::array<char, 4096> buf_{};
  uint64_t read_ = 0;
};

}  // namespace internal

}  // namespace kvs::http
