// TLS for the HTTP server and client (and the gateway's Redis client), on
// OpenSSL through Asio's ssl::context / ssl::stream.
//
// Server contexts: a PEM certificate chain and private key, TLS 1.2 minimum
// (1.0 and 1.1 are refused whatever the system's OpenSSL configuration
// allows), no session tickets (nothing resumes a session across a
// certificate reload). Client contexts: TLS 1.2 minimum, the peer's chain
// verified against a PEM CA file ("" : the system's default CA store); each
// connection also checks the peer's name (DNS name or IP address, the host of
// the URL) and sends it as SNI when it is a name.
//
// ClientStream: one outgoing connection, plain TCP or TLS over it, so that
// the callers' async code is written once (With() hands either to a generic
// lambda).
//
// Thread-safety: a context is immutable once made and may be shared by any
// number of streams on any threads (OpenSSL locks internally); a reload makes
// a new context and leaves the old one to the connections that hold it. A
// ClientStream is used by one strand (or thread) at a time.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>

#include "base/status.h"

namespace kvs::http {

using SslContext = boost::asio::ssl::context;

// what: how errors name the files, e.g. "gateway.tls_cert_file" (cert) and
// "gateway.tls_key_file" (key). An unreadable or unparsable file, or a key
// that does not match the certificate, is an InvalidArgument naming the
// setting and the file.
struct TlsServerFiles {
  std::string cert_file;
  std::string key_file;
  std::string cert_setting = "tls_cert_file";
  std::string key_setting = "tls_key_file";
};
StatusOr<std::shared_ptr<SslContext>> MakeServerTlsContext(const TlsServerFiles& files);

// ca_file "": the system's default verify paths.
StatusOr<std::shared_ptr<SslContext>> MakeClientTlsContext(const std::string& ca_file);

// OpenSSL's error queue and a verification result, as one line ("certificate
// verify failed: unable to get local issuer certificate").
std::string TlsErrorMessage(const boost::system::error_code& ec, SSL* ssl = nullptr);

class ClientStream {
 public:
  using Tcp = boost::asio::ip::tcp::socket;
  using Tls = boost::asio::ssl::stream<Tcp>;

  // An unconnected socket on ioc (connect socket(), then StartTls or not).
  explicit ClientStream(boost::asio::io_context& ioc) : socket_(ioc) {}
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;

  // Wraps the (connected) socket in TLS for `host`: SNI when host is a name,
  // and the peer's certificate must name host. The handshake is the caller's
  // (tls().async_handshake).
  Status StartTls(std::shared_ptr<SslContext> ctx, const std::string& host);

  bool is_tls() const { return tls_.has_value(); }
  Tls& tls() { return *tls_; }
  Tcp& socket() { return tls_ ? tls_->next_layer() : socket_; }

  // f(stream) with the stream that carries the application's bytes.
  template <class F>
  void With(F&& f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(socket_);
    }
  }

 private:
  std::shared_ptr<SslContext> ctx_;  // outlives tls_ (declared first)
  Tcp socket_;                        // the connection until StartTls moves it into tls_
  std::optional<Tls> tls_;
};

}  // namespace kvs::http
