// The implementation of a server connection (included by http_server.cc
// only): BasicConnection<Stream> and BasicRefusal<Stream> over TCP
// (beast::tcp_stream) or TLS (TlsStream), one code path for both.
#pragma once

#include <type_traits>

#include "http/http_server_internal.h"

namespace kvs::http::internal {

using TlsStream = beast::ssl_stream<beast::tcp_stream>;

template <class Stream>
Stream MakeStream(tcp::socket socket, SslContext* tls) {
  if constexpr (std::is_same_v<Stream, TlsStream>) {
    return Stream(beast::tcp_stream(std::move(socket)), *tls);
  } else {
    (void)tls;
    return Stream(std::move(socket));
  }
}

// One connection: reads requests one after another, hands each to the handler
// as an Exchange and writes its response. Everything runs on strand_.
// Stream is beast::tcp_stream (plain HTTP) or beast::ssl_stream over one
// (HTTPS: a handshake within handshake_timeout comes first); everything else
// is the same code. The tcp_stream's timer is the one deadline of every read
// and write (TLS records included).
template <class Stream>
class BasicConnection final : public Connection {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  BasicConnection(HttpServer::Impl* server, tcp::socket socket, Strand strand, uint64_t id, std::string address,
                  std::shared_ptr<SslContext> tls)
      : Connection(server),
        tls_(std::move(tls)),
        strand_(std::move(strand)),
        stream_(MakeStream<Stream>(std::move(socket), tls_.get())),
        deadline_(strand_),
        ping_timer_(strand_),
        id_(id),
        address_(std::move(address)) {
    beast::error_code ec;
    auto ep = Socket().remote_endpoint(ec);
    if (!ec) remote_ = fmt::format("{}:{}", ep.address().to_string(), ep.port());
  }

  void Start() {
    asio::dispatch(strand_, [self = Self()] {
      if constexpr (kTls) {
        self->Handshake();
      } else {
        self->DoReadHeader();
      }
    });
  }

  void Post(std::function<void()> fn) override { asio::post(strand_, std::move(fn)); }
  bool OnStrand() const override { return strand_.running_in_this_thread(); }

  void SendResponse(uint64_t ex_id, HttpResponse res) override {
    if (ex_id != current_id_) return;
    if (server_->draining) keep_alive_ = false;
    const bool head = method_ == "HEAD";
    Send(SerializeResponse(res.status, version_, res.headers, keep_alive_, std::move(res.body), head), true);
  }

  void StartStream(uint64_t ex_id, const HttpResponse& header, std::chrono::milliseconds keep_alive,
                   std::string ping) override {
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

  bool WriteChunk(uint64_t ex_id, std::string data) override {
    if (ex_id != current_id_ || closed_) return false;
    if (data.empty()) return true;
    last_write_ = Clock::now();
    if (chunked_) data = Chunk(data);
    return Send(std::move(data), false);
  }

  void EndStream(uint64_t ex_id) override {
    if (ex_id != current_id_) return;
    Send(chunked_ ? beast::buffers_to_string(bhttp::make_chunk_last()) : std::string(), true);
  }

  void SetDeadline(uint64_t ex_id, Clock::time_point when, std::function<void()> fn) override {
    if (ex_id != current_id_ || closed_) return;
    deadline_fn_ = std::move(fn);
    deadline_.expires_at(when);
    deadline_.async_wait([self = Self(), ex_id](beast::error_code ec) {
      if (ec || self->current_id_ != ex_id) return;
      auto fn = std::move(self->deadline_fn_);
      self->deadline_fn_ = nullptr;
      if (fn) fn();
    });
  }

  // Sends the ping when the stream has been quiet for ping_interval_.
  void ArmPing(uint64_t ex_id) {
    ping_timer_.expires_after(ping_interval_);
    ping_timer_.async_wait([self = Self(), ex_id](beast::error_code ec) {
      if (ec || self->current_id_ != ex_id || self->closed_ || self->end_pending_) return;
      if (Clock::now() - self->last_write_ >= self->ping_interval_) self->WriteChunk(ex_id, self->ping_);
      self->ArmPing(ex_id);
    });
  }

  void Abandon(uint64_t ex_id) override {
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

  void ForceClose() override {
    asio::dispatch(strand_, [self = Self()] { self->ClientGone(); });
  }

 private:
  std::shared_ptr<BasicConnection> Self() { return std::static_pointer_cast<BasicConnection>(shared_from_this()); }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }
  tcp::socket& Socket() { return beast::get_lowest_layer(stream_).socket(); }

  // TLS: the handshake, within handshake_timeout (a client that opens a
  // connection and says nothing holds it no longer than that); a failed one
  // (plain HTTP to this port, an old protocol version, no common cipher) is
  // closed without an answer.
  void Handshake() {
    if constexpr (kTls) {
      Lowest().expires_after(server_->options.handshake_timeout);
      stream_.async_handshake(asio::ssl::stream_base::server, [self = Self()](beast::error_code ec) {
        if (self->closed_) return;
        if (ec) {
          spdlog::debug("http: TLS handshake with {} failed: {}", self->remote_, ec.message());
          self->Close();
          return;
        }
        self->DoReadHeader();
      });
    }
  }

  // Idle until the next request's first byte (keep_alive_timeout), then its
  // whole header within header_timeout: a client that trickles its header
  // (slowloris) cannot hold the connection for longer than that.
  void DoReadHeader() {
    if (closed_) return;
    parser_.emplace();
    parser_->header_limit(server_->options.max_header_bytes);
    parser_->body_limit(server_->max_body_bytes.load());
    if (buffer_.size() > 0) {  // pipelined: the next request has begun
      ReadHeader();
      return;
    }
    Lowest().expires_after(std::chrono::milliseconds(server_->keep_alive_ms.load()));
    stream_.async_read_some(buffer_.prepare(kFirstReadBytes), [self = Self()](beast::error_code ec, size_t n) {
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
    Lowest().expires_after(std::chrono::milliseconds(server_->header_ms.load()));
    bhttp::async_read_header(stream_, buffer_, *parser_,
                             beast::bind_front_handler(&BasicConnection::OnHeader, Self()));
  }

  void OnHeader(beast::error_code ec, size_t) {
    if (closed_) return;
    if (ec) {
      OnReadError(ec);
      return;
    }
    auto& req = parser_->get();
    if (auto len = parser_->content_length(); len && *len > server_->max_body_bytes.load()) {
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
      Lowest().expires_after(server_->options.write_timeout);
      asio::async_write(stream_, asio::buffer(continue_),
                        [self = Self()](beast::error_code wec, size_t) {
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
    Lowest().expires_after(server_->options.read_timeout);
    bhttp::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&BasicConnection::OnBody, Self()));
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
                       server_->max_body_bytes.load());
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
    Lowest().expires_never();

    const uint64_t ex_id = ++server_->next_exchange_id;
    current_id_ = ex_id;
    server_->active_exchanges.fetch_add(1);
    auto ex = std::make_shared<Exchange>(Self(), std::move(req), transport_error, std::move(message), ex_id,
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
    // Plain: straight from the socket, outside the tcp_stream's timer (a
    // request may run for long). TLS: through the TLS layer (the bytes must
    // be decrypted), whose read timer Dispatch set to never.
    if constexpr (kTls) {
      stream_.async_read_some(asio::buffer(watch_buf_), beast::bind_front_handler(&BasicConnection::OnWatch, Self()));
    } else {
      Socket().async_read_some(asio::buffer(watch_buf_), beast::bind_front_handler(&BasicConnection::OnWatch, Self()));
    }
  }

  void OnWatch(beast::error_code ec, size_t n) {
    watching_ = false;
    // TLS: a FIN without close_notify is the same half-close.
    if (ec == asio::ssl::error::stream_truncated) ec = asio::error::eof;
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
    Lowest().expires_after(server_->options.write_timeout);
    stream_.async_write_some(asio::buffer(inflight_.data() + inflight_done_, inflight_.size() - inflight_done_),
                             beast::bind_front_handler(&BasicConnection::OnWriteSome, Self()));
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
      Socket().cancel(ec);
      return;
    }
    DoReadHeader();
  }

  // The client left (or is cut off): close, and tell the running exchange.
  void ClientGone() {
    if (closed_) return;
    Close();
    if (auto ex = current_ex_.lock(); ex && !ex->ended()) NotifyClientClosed(*ex);
  }

  void Close() {
    closed_ = true;
    deadline_.cancel();
    deadline_fn_ = nullptr;  // it may own the exchange's owner: break the cycle
    ping_timer_.cancel();
    if (!socket_closed_) {
      socket_closed_ = true;
      beast::error_code ec;
      Socket().shutdown(tcp::socket::shutdown_both, ec);
      Socket().close(ec);
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
    Socket().shutdown(tcp::socket::shutdown_send, ec);
    Lowest().expires_after(kLingerTimeout);
    DoLingerRead();
  }

  // Raw bytes off the TCP stream: they are discarded, so TLS need not
  // decrypt them (nor answer them, with our sending side shut).
  void DoLingerRead() {
    Lowest().async_read_some(asio::buffer(watch_buf_), [self = Self()](beast::error_code ec, size_t n) {
      self->linger_bytes_ += n;
      if (ec || self->linger_bytes_ > kMaxLingerBytes) {
        self->Close();
        return;
      }
      self->DoLingerRead();
    });
  }

  std::shared_ptr<SslContext> tls_;  // TLS: the context of this connection (outlives stream_)
  Strand strand_;
  Stream stream_;
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
// discards what the client sends (so it sees the answer, not a reset). Over
// TLS the answer follows a handshake, all within kLingerTimeout.
template <class Stream>
class BasicRefusal : public std::enable_shared_from_this<BasicRefusal<Stream>> {
 public:
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;

  BasicRefusal(tcp::socket socket, std::string response, std::shared_ptr<SslContext> tls)
      : tls_(std::move(tls)), stream_(MakeStream<Stream>(std::move(socket), tls_.get())), response_(std::move(response)) {}

  void Start() {
    Lowest().expires_after(kLingerTimeout);
    if constexpr (kTls) {
      stream_.async_handshake(asio::ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) return self->Close();
        self->Answer();
      });
    } else {
      Answer();
    }
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  void Answer() {
    asio::async_write(stream_, asio::buffer(response_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      beast::error_code ignored;
      self->Lowest().socket().shutdown(tcp::socket::shutdown_send, ignored);
      self->Drain();
    });
  }

  // Raw bytes: they are discarded.
  void Drain() {
    Lowest().async_read_some(asio::buffer(buf_), [self = this->shared_from_this()](beast::error_code ec, size_t n) {
      self->read_ += n;
      if (ec || self->read_ > kMaxLingerBytes) return self->Close();
      self->Drain();
    });
  }
  void Close() {
    beast::error_code ignored;
    Lowest().socket().close(ignored);
  }

  std::shared_ptr<SslContext> tls_;  // outlives stream_
  Stream stream_;
  std::string response_;
  std::array<char, 4096> buf_{};
  uint64_t read_ = 0;
};

}  // namespace kvs::http::internal
