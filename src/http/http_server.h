// HttpServer: an asynchronous HTTP/1.1 server on Boost.Beast/Asio.
//
// A small pool of io_context threads serves every connection; an idle or
// slowly streaming connection costs a socket and a few buffers, never a
// thread. Each connection runs on its own strand, so everything about one
// connection (reads, writes, its current Exchange, its deadline) is
// serialized without locks.
//
// Per connection: keep-alive (HTTP/1.1 default; "Connection: close" honoured),
// a header size limit, a body size limit (a request over it is still handed
// to the handler, with transport_error() == 413, and the connection is
// closed after the answer, draining the unread body first so the client sees
// the answer instead of a reset), "Expect: 100-continue", and three read
// timeouts: idle (waiting for the next request's first byte), header (its
// first byte to its complete header) and body; a connection that runs out of
// one is closed.
//
// Connection limits: beyond max_connections open connections a new one is
// answered 503 and closed, beyond max_connections_per_client from one
// address 429 (both with Retry-After and an OpenAI-shaped JSON error),
// without reading its request. Accept failures (e.g. no file descriptors
// left) are retried and logged at most every 10 s. While a request is being handled the
// server keeps reading the socket, so a client that goes away is noticed at
// once (Exchange::SetCloseHandler), even mid-generation. The one exception:
// end-of-file before the response has started is a half-close (the client
// shut down its sending side and awaits the answer): the request is still
// answered and the connection closed after it; if the client had closed
// entirely, the first write of the answer notices.
//
// Responses are either whole (Respond) or streamed (StartStream, Write...,
// EndStream) with chunked transfer encoding. Streamed writes are coalesced:
// one socket write is in flight at a time and whatever arrives meanwhile is
// sent together when it completes (backpressure without unbounded queues of
// small writes). A client that stops reading while more than
// max_pending_bytes pile up behind what it is reading now (the write in
// flight and the next chunk: one large chunk, such as an echoed prompt, is
// never "too much" by itself) is disconnected (its close handler runs), and
// so is one whose socket write makes no progress for write_timeout.
//
// Draining: StopAccepting() accepts what is already in the listen backlog
// (those requests reach the handler, which is expected to refuse them) and
// closes the listener; SetDraining() makes every later response close its
// connection and closes idle keep-alive connections.
//
// TLS (options.tls_cert_file and tls_key_file set): every connection starts
// with a TLS handshake (TLS 1.2 or later, within handshake_timeout; one that
// fails is closed unanswered), then everything above holds as it is, the
// connection-limit refusals included (answered over TLS). ReloadTls re-reads
// the two files: connections accepted afterwards use the new certificate,
// open ones keep theirs; a pair that does not load leaves the old one in
// force. Connections are closed without a TLS close_notify (responses are
// framed by Content-Length or chunked encoding, so nothing is truncated).
//
// Thread-safety: HttpServer's public methods are thread-safe. An Exchange's
// methods must be called on its strand (the handler is called there; use
// Exchange::Post from other threads).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace kvs::http {

struct TlsServerFiles;

using Clock = std::chrono::steady_clock;

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent ("" when the request line was unreadable)
  std::string target;  // "/v1/models?x=1"
  std::string path;    // target without the query string
  int version = 11;    // 10 or 11
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  // Value of the first header with this name (case-insensitive), "" if none.
  std::string_view Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;  // Content-Length/Connection are set by the server
  std::string body;

  HttpResponse& SetHeader(std::string name, std::string value);
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 0;  // 0: an ephemeral port (see HttpServer::port)
  int io_threads = 2;
  uint64_t max_body_bytes = uint64_t{32} << 20;
  uint32_t max_header_bytes = 64 << 10;
  std::chrono::milliseconds keep_alive_timeout{std::chrono::seconds(60)};  // idle: waiting for a request's first byte
  std::chrono::milliseconds header_timeout{std::chrono::seconds(30)};      // a request's first byte to its whole header
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};        // reading a started request's body
  std::chrono::milliseconds write_timeout{std::chrono::seconds(60)};       // one socket write making no progress
  size_t max_pending_bytes = size_t{8} << 20;  // stream data queued behind the client's reading before it counts as stuck
  int max_connections = 0;             // open connections; a new one beyond gets 503 and is closed; 0: no limit
  int max_connections_per_client = 0;  // open connections per remote address; beyond: 429; 0: no limit
  // Called (on the connection's strand) with a request's method, target,
  // path and headers as soon as its header is read, before any of its body:
  // a non-zero status (e.g. 401 for a missing key) refuses the request
  // unread, so a client that may not send a body cannot make the server
  // buffer one. The handler then sees that status as transport_error() with
  // *message; the connection closes after the answer (the unread body is
  // discarded as it arrives). Must be fast and must not block.
  std::function<int(const HttpRequest& head, std::string* message)> header_check;
  // HTTPS: both PEM files set (a certificate chain, leaf first, and its
  // private key); both "": plain HTTP.
  std::string tls_cert_file;
  std::string tls_key_file;
  // How errors name the two files (the configuration keys).
  std::string tls_cert_setting = "tls_cert_file";
  std::string tls_key_setting = "tls_key_file";
  std::chrono::milliseconds handshake_timeout{std::chrono::seconds(10)};  // connect to the end of the TLS handshake

  bool tls() const { return !tls_cert_file.empty() || !tls_key_file.empty(); }
};

namespace internal {
class Connection;
}

// One request and its response on a connection. Created by the server, handed
// to the handler, kept alive by whoever still needs to answer.
// Invariant: exactly one of Respond / EndStream ends it; calls after that (or
// after the client left) are ignored.
class Exchange {
 public:
  Exchange(std::shared_ptr<internal::Connection> conn, HttpRequest req, int transport_error,
           std::string transport_error_message, uint64_t id, std::string remote);
  // Ending an exchange is the owner's job; one dropped unanswered gets a 500
  // (or its stream ended) so the connection and the drain count move on.
  ~Exchange();
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const HttpRequest& request() const { return req_; }
  // 0, or the status the server already decided on before the handler ran:
  // 400 (unparseable request), 413 (body over the limit), 431 (header over
  // the limit). The handler must answer with that status.
  int transport_error() const { return transport_error_; }
  const std::string& transport_error_message() const { return transport_error_message_; }
  uint64_t id() const { return id_; }
  const std::string& remote() const { return remote_; }
  Clock::time_point received_at() const { return received_at_; }

  // Runs fn on this exchange's strand (from any thread).
  void Post(std::function<void()> fn);
  bool OnStrand() const;

  // Whole response; ends the exchange.
  void Respond(HttpResponse res);
  // Sends status and headers of a streamed response; body chunks follow.
  // With a keep-alive, `ping` is sent whenever nothing was written for that
  // long (e.g. an SSE comment during a long prefill), so proxies and clients
  // do not give up on a quiet stream.
  void StartStream(HttpResponse header, std::chrono::milliseconds keep_alive = std::chrono::milliseconds(0),
                   std::string ping = {});
  // Queues a body chunk. False once the client is gone (the data is dropped).
  bool Write(std::string data);
  void EndStream();

  // Called once, on the strand, if the client disconnects (or is cut off as
  // stuck) before the exchange ended.
  void SetCloseHandler(std::function<void()> fn) { on_close_ = std::move(fn); }
  // Calls fn on the strand at `when` unless the exchange ended first. One
  // deadline per exchange; a later call replaces the earlier one.
  void SetDeadline(Clock::time_point when, std::function<void()> fn);

  bool client_closed() const { return client_closed_; }
  bool ended() const { return ended_; }
  bool streaming() const { return streaming_; }
  int status() const { return status_; }  // 0 until a status was sent

 private:
  friend class internal::Connection;
  void NotifyClientClosed();

  std::shared_ptr<internal::Connection> conn_;
  HttpRequest req_;
  int transport_error_;
  std::string transport_error_message_;
  uint64_t id_;
  std::string remote_;
  Clock::time_point received_at_;
  std::function<void()> on_close_;
  bool client_closed_ = false;
  bool ended_ = false;
  bool streaming_ = false;
  int status_ = 0;
};

using Handler = std::function<void(std::shared_ptr<Exchange>)>;

// The limits of ServerOptions that a running server can change
// (HttpServer::SetLimits, e.g. on SIGHUP): they apply to the next
// connection, request or idle wait; what is under way keeps its own.
struct ServerLimits {
  uint64_t max_body_bytes = 0;
  int max_connections = 0;
  int max_connections_per_client = 0;
  std::chrono::milliseconds keep_alive_timeout{0};
  std::chrono::milliseconds header_timeout{0};
  static ServerLimits Of(const ServerOptions& o) {
    return {o.max_body_bytes, o.max_connections, o.max_connections_per_client, o.keep_alive_timeout, o.header_timeout};
  }
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();  // Stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Loads the TLS files (when set), binds, listens and starts the io
  // threads. The handler runs on the connection's strand; it must not block
  // for long (no inference there).
  Status Start(Handler handler);
  // Re-reads tls_cert_file and tls_key_file: new connections get the new
  // pair; on an error nothing changes. FailedPrecondition without TLS.
  Status ReloadTls();
  // Replaces the limits in force (any thread); REQUIRES: Start() was called.
  void SetLimits(const ServerLimits& limits);
  ServerLimits limits() const;
  bool tls() const { return options_.tls(); }
  const char* scheme() const { return tls() ? "https" : "http"; }
  uint16_t port() const { return bound_port_; }
  const ServerOptions& options() const { return options_; }

  void StopAccepting();
  void SetDraining();
  bool draining() const;
  // Closes every connection now (in-flight exchanges see their close handler).
  void CloseAll();
  // Stops the io threads and joins them. Idempotent.
  void Stop();

  // Exchanges handed to the handler and not yet ended.
  int64_t active_exchanges() const;
  int64_t open_connections() const;
  // Connections refused over max_connections / max_connections_per_client.
  int64_t refused_connections() const;

  // Runs fn on an io thread after `delay` (timers outside exchanges, e.g.
  // the gateway's key-file poll); dropped, never run, once the server stops.
  void RunAfter(std::chrono::milliseconds delay, std::function<void()> fn);
  // Runs fn once on an io thread for each of the given signals (SIGTERM...).
  void OnSignal(std::vector<int> signals, std::function<void(int)> fn);

  struct Impl;

 private:
  TlsServerFiles TlsFiles() const;
  ServerOptions options_;
  std::unique_ptr<Impl> impl_;
  uint16_t bound_port_ = 0;
};

}  // namespace kvs::http
