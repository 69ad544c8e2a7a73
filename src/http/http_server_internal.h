// Internals of HttpServer (included by http_server.cc only): the server's
// shared state (HttpServer::Impl), response serialization, and what an
// Exchange sees of a connection (internal::Connection; the implementation,
// over TCP or TLS, is http_server_impl.h).
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
#include <boost/beast/ssl.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "base/strings.h"
#include "http/http_server.h"
#include "http/tls.h"

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

// TLS: a peer that closes without close_notify (stream_truncated), or whose
// records do not decrypt (an SSL error), is gone as well: nothing more can be
// read from it, and an HTTP error answer could not be read by it either.
inline bool IsDisconnect(const beast::error_code& ec) {
  return ec == asio::ssl::error::stream_truncated || ec.category() == asio::error::get_ssl_category() ||
         ec == bhttp::error::end_of_stream || ec == bhttp::error::partial_message || ec == asio::error::eof ||
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
      : max_body_bytes(o.max_body_bytes),
        max_connections(o.max_connections),
        max_connections_per_client(o.max_connections_per_client),
        keep_alive_ms(o.keep_alive_timeout.count()),
        header_ms(o.header_timeout.count()),
        options(std::move(o)),
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
  // The context new TLS connections get (null: plain HTTP).
  std::shared_ptr<SslContext> tls_context() {
    std::lock_guard<std::mutex> lock(mu);
    return tls;
  }
  void Forget(uint64_t id, const std::string& address) {
    std::lock_guard<std::mutex> lock(mu);
    if (conns.erase(id) == 0) return;
    const auto it = per_client.find(address);
    if (it != per_client.end() && --it->second <= 0) per_client.erase(it);
  }
  // Accept strand only: logs an accept failure, at most every kAcceptLogInterval.
  void LogAcceptFailure(const beast::error_code& ec);

  // The limits SetLimits changes (options keeps the ones the server started
  // with); read where a connection, request or idle wait starts.
  std::atomic<uint64_t> max_body_bytes;
  std::atomic<int> max_connections;
  std::atomic<int> max_connections_per_client;
  std::atomic<int64_t> keep_alive_ms;
  std::atomic<int64_t> header_ms;
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
  // guarded by mu; each TLS connection holds the one it started with, so a
  // reload swaps it for new connections only.
  std::shared_ptr<SslContext> tls;
  std::atomic<int64_t> refused{0};
  // Accept strand only.
  std::optional<Clock::time_point> last_accept_log;
  int64_t unlogged_accept_failures = 0;
  std::atomic<bool> stopped{false};
};

namespace internal {

// What an Exchange (and the server) needs of a connection, whatever carries
// it (TCP, or TLS over TCP: BasicConnection<Stream> in http_server_impl.h).
// Every method but Post, OnStrand and ForceClose must run on the
// connection's strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  explicit Connection(HttpServer::Impl* server) : server_(server) {}
  virtual ~Connection() = default;

  virtual void Post(std::function<void()> fn) = 0;
  virtual bool OnStrand() const = 0;
  bool server_stopped() const { return server_->stopped.load(); }
  virtual void SendResponse(uint64_t ex_id, HttpResponse res) = 0;
  virtual void StartStream(uint64_t ex_id, const HttpResponse& header, std::chrono::milliseconds keep_alive,
                           std::string ping) = 0;
  virtual bool WriteChunk(uint64_t ex_id, std::string data) = 0;
  virtual void EndStream(uint64_t ex_id) = 0;
  virtual void SetDeadline(uint64_t ex_id, Clock::time_point when, std::function<void()> fn) = 0;
  // The Exchange object was destroyed without ending its response.
  virtual void Abandon(uint64_t ex_id) = 0;
  // Any thread: closes the connection on its strand.
  virtual void ForceClose() = 0;

 protected:
  // Exchange befriends this class, not its implementations.
  static void NotifyClientClosed(Exchange& ex) { ex.NotifyClientClosed(); }

  HttpServer::Impl* server_;
};

}  // namespace internal

}  // namespace kvs::http
