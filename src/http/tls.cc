#include "http/tls.h"

#include <fstream>

#include <fmt/format.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace kvs::http {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

namespace {

// The oldest error on OpenSSL's queue of this thread (and clears it), or "".
std::string TakeOpensslError() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    if (out.empty()) {
      char buf[256];
      ERR_error_string_n(e, buf, sizeof(buf));
      out = buf;
    }
  }
  return out;
}

// A file that is not there gives a clearer message than OpenSSL's.
Status Readable(const std::string& setting, const std::string& file) {
  if (file.empty()) return InvalidArgument("{} is not set", setting);
  std::ifstream in(file, std::ios::binary);
  if (!in) return InvalidArgument("{}: cannot read \"{}\"", setting, file);
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<SslContext>> MakeServerTlsContext(const TlsServerFiles& files) {
  KVS_RETURN_IF_ERROR(Readable(files.cert_setting, files.cert_file));
  KVS_RETURN_IF_ERROR(Readable(files.key_setting, files.key_file));
  auto ctx = std::make_shared<SslContext>(SslContext::tls_server);
  ERR_clear_error();
  SSL_CTX* native = ctx->native_handle();
  // Set here, not left to the system's openssl.cnf: the floor is ours.
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return Internal("cannot set the minimum TLS version: {}", TakeOpensslError());
  }
  ctx->set_options(SslContext::default_workarounds | SslContext::no_compression | SslContext::single_dh_use |
                   SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
  SSL_CTX_set_num_tickets(native, 0);
  SSL_CTX_set_options(native, SSL_OP_NO_TICKET);
  if (SSL_CTX_use_certificate_chain_file(native, files.cert_file.c_str()) != 1) {
    return InvalidArgument("{}: \"{}\" is not a PEM certificate chain: {}", files.cert_setting, files.cert_file,
                           TakeOpensslError());
  }
  if (SSL_CTX_use_PrivateKey_file(native, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    const std::string why = TakeOpensslError();
    // OpenSSL checks the pair as it loads the key; say which files disagree.
    if (why.find("mismatch") != std::string::npos) {
      return InvalidArgument("{}: the key in \"{}\" does not match the certificate in \"{}\" ({})", files.key_setting,
                             files.key_file, files.cert_file, files.cert_setting);
    }
    return InvalidArgument("{}: \"{}\" is not a PEM private key: {}", files.key_setting, files.key_file, why);
  }
  if (SSL_CTX_check_private_key(native) != 1) {
    return InvalidArgument("{}: the key in \"{}\" does not match the certificate in \"{}\" ({}): {}", files.key_setting,
                           files.key_file, files.cert_file, files.cert_setting, TakeOpensslError());
  }
  return ctx;
}

StatusOr<std::shared_ptr<SslContext>> MakeClientTlsContext(const std::string& ca_file) {
  auto ctx = std::make_shared<SslContext>(SslContext::tls_client);
  ERR_clear_error();
  SSL_CTX* native = ctx->native_handle();
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) {
    return Internal("cannot set the minimum TLS version: {}", TakeOpensslError());
  }
  ctx->set_options(SslContext::default_workarounds | SslContext::no_compression);
  ctx->set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) return InvalidArgument("cannot load the system's CA certificates: {}", TlsErrorMessage(ec));
  } else {
    KVS_RETURN_IF_ERROR(Readable("tls_ca_file", ca_file));
    ctx->load_verify_file(ca_file, ec);
    if (ec) return InvalidArgument("\"{}\" is not a PEM CA bundle: {}", ca_file, TlsErrorMessage(ec));
  }
  return ctx;
}

std::string TlsErrorMessage(const boost::system::error_code& ec, SSL* ssl) {
  std::string out = ec.message();
  if (ssl != nullptr) {
    const long v = SSL_get_verify_result(ssl);
    if (v != X509_V_OK) out += fmt::format(" ({})", X509_verify_cert_error_string(v));
  }
  return out;
}

Status ClientStream::StartTls(std::shared_ptr<SslContext> ctx, const std::string& host) {
  ctx_ = std::move(ctx);
  tls_.emplace(std::move(socket_), *ctx_);
  SSL* native = tls_->native_handle();
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (!ec) {
    // An address: no SNI (RFC 6066 allows names only); the certificate must
    // list the address as an iPAddress subjectAltName.
    X509_VERIFY_PARAM* param = SSL_get0_param(native);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, ip.to_string().c_str()) != 1) {
      return InvalidArgument("cannot verify TLS peers by the address {}", host);
    }
  } else {
    if (SSL_set_tlsext_host_name(native, host.c_str()) != 1) return InvalidArgument("bad TLS server name \"{}\"", host);
    if (SSL_set1_host(native, host.c_str()) != 1) return InvalidArgument("cannot verify TLS peers by the name {}", host);
    SSL_set_hostflags(native, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  }
  return Status::Ok();
}

}  // namespace kvs::http
