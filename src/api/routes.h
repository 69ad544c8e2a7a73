// Request routing of the HTTP front ends (the server's Service and the
// gateway): a route table entry, the match of a request against a table,
// and the OpenAI-style errors for a request that matches no route or that
// the HTTP layer could not read. Both front ends answer these cases alike.
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "api/error.h"

namespace kvs::api {

struct Route {
  const char* path;
  const char* method;  // HEAD is also accepted where this is GET
  bool prefix;         // matches the paths that extend `path` (not `path` itself)
};

struct RouteMatch {
  const Route* route = nullptr;  // the route whose path matched (also on a 405)
  std::optional<ApiError> error;  // 404 not_found (route == nullptr), 405 method_not_allowed
};

// The first route of `routes` whose path matches; an error when none does
// or when the method is not the route's.
RouteMatch MatchRoute(std::span<const Route> routes, std::string_view method, std::string_view path);

// The error for a request the HTTP layer refused while reading it (status:
// its transport_error(), 413 and 431 among them).
ApiError TransportError(int status, std::string message);

// The API key a request presents, as both front ends read it: the
// `Authorization` header's credentials when its scheme is Bearer (in any
// case: RFC 9110 11.1 makes auth-schemes case-insensitive; one or more
// spaces after it), else the `x-api-key` header (Anthropic's clients);
// surrounding spaces trimmed. "" when neither carries a key.
std::string_view ApiKeyFromHeaders(std::string_view authorization, std::string_view x_api_key);

// The 401 for a request without a valid key (missing or wrong), the same
// from the server and the gateway.
ApiError Unauthenticated(bool key_missing);

}  // namespace kvs::api
