// Helpers of the HTTP module's tests (http_server_test.cc, http_client_test.cc).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "base/test_util.h"
#include "http/http_server.h"

namespace kvs::http::testing {

// A text/plain response with this status and body.
inline HttpResponse Text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.SetHeader("Content-Type", "text/plain");
  r.body = std::move(body);
  return r;
}

// Certificates made with the `openssl` CLI for one test: a CA and leaf
// certificates it signs for given subjectAltNames. Paths are PEM files.
class TestPki {
 public:
  // dir: a fresh temporary directory; name: the CA's common name.
  TestPki(std::filesystem::path dir, const std::string& name) : dir_(std::move(dir)) {
    ca_key_ = (dir_ / (name + "-ca.key")).string();
    ca_cert_ = (dir_ / (name + "-ca.pem")).string();
    ok_ = Run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj '/CN=" + name + " test CA' -keyout " + ca_key_ +
              " -out " + ca_cert_);
  }
  bool ok() const { return ok_; }
  const std::string& ca_cert() const { return ca_cert_; }

  struct Leaf {
    std::string cert, key;
  };
  // A leaf certificate for san ("IP:127.0.0.1", "DNS:replica.test") signed by
  // this CA, written to <file>.pem and <file>.key.
  Leaf Issue(const std::string& file, const std::string& san) {
    Leaf l{(dir_ / (file + ".pem")).string(), (dir_ / (file + ".key")).string()};
    const std::string csr = (dir_ / (file + ".csr")).string();
    const std::string ext = (dir_ / (file + ".ext")).string();
    std::ofstream(ext) << "subjectAltName=" << san << "\nbasicConstraints=CA:FALSE\n";
    ok_ = ok_ &&
          Run("openssl req -new -newkey rsa:2048 -nodes -subj '/CN=" + file + "' -keyout " + l.key + " -out " + csr) &&
          Run("openssl x509 -req -in " + csr + " -CA " + ca_cert_ + " -CAkey " + ca_key_ +
              " -CAcreateserial -days 2 -extfile " + ext + " -out " + l.cert);
    return l;
  }

 private:
  static bool Run(const std::string& cmd) { return std::system((cmd + " >/dev/null 2>&1").c_str()) == 0; }

  std::filesystem::path dir_;
  std::string ca_key_, ca_cert_;
  bool ok_ = false;
};

// The SHA-256 fingerprint of a certificate (hex); frees it.
inline std::string Sha256Fingerprint(X509* cert) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  X509_digest(cert, EVP_sha256(), md, &n);
  X509_free(cert);
  std::string hex;
  for (unsigned i = 0; i < n; ++i) hex += "0123456789abcdef"[md[i] >> 4], hex += "0123456789abcdef"[md[i] & 15];
  return hex;
}

// The SHA-256 fingerprint (hex) of the certificate a TLS server on
// 127.0.0.1:port presents, "" when the handshake fails. max_version 0: any.
inline std::string PeerFingerprint(uint16_t port, int max_version = 0, int min_version = 0) {
  namespace asio = boost::asio;
  asio::io_context ioc;
  asio::ssl::context ctx(asio::ssl::context::tls_client);
  ctx.set_verify_mode(asio::ssl::verify_none);
  if (max_version != 0 || min_version != 0) {
    // Old versions need security level 0 on this side (OpenSSL 3), so that
    // only the server can be what refuses them.
    SSL_CTX_set_security_level(ctx.native_handle(), 0);
    SSL_CTX_set_min_proto_version(ctx.native_handle(), min_version);
    SSL_CTX_set_max_proto_version(ctx.native_handle(), max_version);
  }
  asio::ssl::stream<asio::ip::tcp::socket> s(ioc, ctx);
  boost::system::error_code ec;
  s.next_layer().connect({asio::ip::make_address("127.0.0.1"), port}, ec);
  if (ec) return "";
  s.handshake(asio::ssl::stream_base::client, ec);
  if (ec) return "";
  X509* cert = SSL_get1_peer_certificate(s.native_handle());
  if (cert == nullptr) return "";
  const std::string hex = Sha256Fingerprint(cert);
  s.shutdown(ec);
  return hex;
}

// The fingerprint of a PEM certificate file's (first) certificate.
inline std::string FileFingerprint(const std::string& pem) {
  FILE* f = std::fopen(pem.c_str(), "r");
  if (f == nullptr) return "";
  X509* cert = PEM_read_X509(f, nullptr, nullptr, nullptr);
  std::fclose(f);
  if (cert == nullptr) return "";
  return Sha256Fingerprint(cert);
}

}  // namespace kvs::http::testing
