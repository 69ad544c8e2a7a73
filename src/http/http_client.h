// HttpClient: an asynchronous HTTP/1.1 client on Boost.Beast/Asio, for the
// gateway (proxying to replicas) and for tools and tests (benchmarks, probes).
//
// A call (Start) connects, or reuses a pooled keep-alive connection to the
// same host:port, writes the request, and delivers the response as it
// arrives: the head once (on_head), then body bytes as they are read
// (on_data; chunked transfer decoding done, so an SSE stream comes out as
// its text, piece by piece, without waiting for the end), then exactly one
// on_done. Timeouts per call: connect, first byte (request written until the
// response head arrived) and total. Cancel() closes the upstream connection
// (an HTTP/1.1 server sees the client go away: kvserve cancels the request
// and frees its KV) and ends the call with kCancelled.
//
// TLS (https URLs): after the TCP connect, a TLS handshake within the same
// connect timeout; the replica's certificate must chain to the URL's
// tls_ca_file and name its host (SNI is sent for names). Any failure there is
// a kConnect error naming the reason ("certificate verify failed: ...").
// Verifying contexts are made once per CA file (ReloadTls re-reads them).
//
// Connection pool: after a complete response whose connection may be kept
// (keep-alive, nothing unread), the socket goes back to an idle list per
// host:port (at most max_idle_per_host, closed after idle_timeout). A pooled
// socket the server already closed is noticed when it is taken (a
// non-blocking peek); if a reused connection still fails before any response
// byte arrived (the server closed it just as we sent), the call is retried
// once on a fresh connection, as browsers and curl do.
//
// Threads: the client runs its own io threads. Each call's callbacks run one
// at a time on the call's strand (one of those threads), so they must not
// block; the blocking wrappers (Fetch) must not be called from them.
// Thread-safety: HttpClient's methods and ClientCall::Cancel are thread-safe.
// After Stop() (or destruction) no callback runs.
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

// "http://host:port/base" or "https://..." (host may be a name, an IPv4
// address or a bracketed IPv6 address; port defaults to 80, or 443 with
// https; base path defaults to "").
struct Url {
  bool tls = false;       // https: TLS, the peer verified against tls_ca_file and host
  std::string host;       // without brackets
  uint16_t port = 80;
  std::string base_path;  // "" or "/prefix" (no trailing slash)
  std::string tls_ca_file;  // https: PEM CAs the peer's certificate must chain to; "": the system's store

  static StatusOr<Url> Parse(std::string_view url);
  std::string HostPort() const;  // "host:port" ("[::1]:port" for IPv6), the Host header
  std::string ToString() const;  // "http://host:port/base" or "https://..."
  // Connections are pooled per key: one verified against other CAs is not reused.
  std::string PoolKey() const;
};

struct ClientTimeouts {
  std::chrono::milliseconds connect{5000};    // TCP connect (each address tried shares it)
  std::chrono::milliseconds first_byte{0};    // request written -> response head received; 0: no limit
  std::chrono::milliseconds total{0};         // the whole call, from Start; 0: no limit
};

struct ClientRequest {
  std::string method = "GET";
  std::string target = "/";  // path and query, appended to the Url's base path
  std::vector<std::pair<std::string, std::string>> headers;  // Host and Content-Length are set by the client
  std::string body;
  ClientTimeouts timeouts;
};

struct ClientResponseHead {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string_view Header(std::string_view name) const;  // first match, case-insensitive; "" if none
};

enum class ClientErrorKind {
  kNone,
  kConnect,           // resolving or connecting failed (refused, unreachable)
  kConnectTimeout,
  kFirstByteTimeout,
  kTotalTimeout,
  kProtocol,          // the peer sent something that is not HTTP/1.x (or over a limit)
  kDisconnected,      // the connection broke (reset, EOF) before the response was complete
  kCancelled,         // ClientCall::Cancel or HttpClient::Stop
};
const char* ClientErrorKindName(ClientErrorKind k);  // "connect", "connect_timeout", ...

struct ClientResult {
  ClientErrorKind error = ClientErrorKind::kNone;
  std::string message;       // "" when ok
  bool head_received = false;
  uint64_t body_bytes = 0;   // response body bytes delivered
  bool reused_connection = false;
  bool ok() const { return error == ClientErrorKind::kNone; }
};

struct ClientCallbacks {
  std::function<void(const ClientResponseHead&)> on_head;  // at most once
  std::function<void(std::string_view)> on_data;           // body bytes, in order, as they arrive
  std::function<void(const ClientResult&)> on_done;        // exactly once (unless the client is stopped first)
};

namespace internal {
class Call;
struct ClientImpl;
}  // namespace internal

// A call in progress. Dropping the handle does not cancel the call.
class ClientCall {
 public:
  explicit ClientCall(std::shared_ptr<internal::Call> call) : call_(std::move(call)) {}
  // Closes the connection; on_done follows with kCancelled unless the call
  // already ended. Idempotent, any thread.
  void Cancel();

 private:
  std::shared_ptr<internal::Call> call_;
};

struct ClientResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::string_view Header(std::string_view name) const;
};

struct ClientOptions {
  int io_threads = 1;
  size_t max_idle_per_host = 64;
  std::chrono::milliseconds idle_timeout{std::chrono::seconds(30)};  // pooled sockets older than this are closed
  uint32_t max_header_bytes = 64 << 10;
  uint64_t max_fetch_body_bytes = uint64_t{256} << 20;  // Fetch's limit (streams have none)
};

class HttpClient {
 public:
  explicit HttpClient(ClientOptions options = {});
  ~HttpClient();  // Stop()s
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Starts a call. Callbacks run on the call's strand.
  ClientCall Start(const Url& url, ClientRequest request, ClientCallbacks callbacks);

  // Blocking: the whole response, or an error (kDeadlineExceeded for
  // timeouts, kUnavailable for connection failures, kDataLoss for protocol
  // errors). Not from a callback of this client.
  StatusOr<ClientResponse> Fetch(const Url& url, ClientRequest request);
  // Blocking with a full URL ("http://127.0.0.1:8000/v1/models").
  StatusOr<ClientResponse> Fetch(std::string_view url, ClientRequest request);

  // Stops the io threads; calls in flight end without further callbacks.
  // Idempotent.
  void Stop();

  // CA files are read again for new connections (pooled ones stay).
  void ReloadTls();

  // For tests and metrics.
  size_t idle_connections() const;
  uint64_t connections_opened() const;

 private:
  std::shared_ptr<internal::ClientImpl> impl_;
};

// Maps a failed ClientResult to a Status (as Fetch does).
Status ClientResultToStatus(const ClientResult& r);

}  // namespace kvs::http
