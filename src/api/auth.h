// Authentication of a request to a front end (the server's Service and the
// gateway), done the same way by both: the API key is read from the request's
// headers (ApiKeyFromHeaders), the front end's key store is asked about it
// (a lookup the caller passes: the server's list of key digests, the
// gateway's tenants and hashed keys), and a request without a known key gets
// the same 401 from either (Unauthenticated; ErrorHeaders adds
// `WWW-Authenticate: Bearer` to its answer).
//
// A front end that runs without keys (the server with no api_keys, the
// gateway without a key file) does not call Authenticate.
// Thread-safety: pure functions; the lookup is called on the caller's thread.
#pragma once

#include <optional>
#include <string_view>
#include <type_traits>

#include "api/error.h"

namespace kvs::api {

// The API key a request presents, as both front ends read it: the
// `Authorization` header's credentials when its scheme is Bearer (in any
// case: RFC 9110 11.1 makes auth-schemes case-insensitive; one or more
// spaces after it), else the `x-api-key` header (Anthropic's clients);
// surrounding spaces trimmed. "" when neither carries a key.
std::string_view ApiKeyFromHeaders(std::string_view authorization, std::string_view x_api_key);

// The 401 for a request without a valid key (missing or wrong), the same
// from the server and the gateway.
ApiError Unauthenticated(bool key_missing);

// The headers of a request that may carry its API key. Views into the
// request, which must outlive them.
struct KeyHeaders {
  std::string_view authorization;  // `Authorization`
  std::string_view x_api_key;      // `x-api-key`

  // Of any request type with Header(name) (http::HttpRequest).
  template <class Request>
  static KeyHeaders Of(const Request& r) {
    return {r.Header("Authorization"), r.Header("x-api-key")};
  }
};

// The outcome of Authenticate: exactly one of the two is set.
template <class Identity>
struct AuthResult {
  std::optional<Identity> identity;  // who the key belongs to
  std::optional<ApiError> error;     // the 401 (Unauthenticated)

  bool ok() const { return identity.has_value(); }
};

// Authenticates the key `headers` carry. lookup(std::string_view key) ->
// std::optional<Identity>: the key store's identity for a presented key,
// nullopt for an unknown one; it is called only with a non-empty key (a
// request without one is refused as "missing" without asking the store).
template <class Lookup>
auto Authenticate(const KeyHeaders& headers, Lookup&& lookup)
    -> AuthResult<typename std::invoke_result_t<Lookup&, std::string_view>::value_type> {
  AuthResult<typename std::invoke_result_t<Lookup&, std::string_view>::value_type> r;
  const std::string_view key = ApiKeyFromHeaders(headers.authorization, headers.x_api_key);
  if (!key.empty()) r.identity = lookup(key);
  if (!r.identity) r.error = Unauthenticated(key.empty());
  return r;
}

}  // namespace kvs::api
