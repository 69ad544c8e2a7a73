#include "api/routes.h"

#include <fmt/format.h>

#include "api/openai_request.h"
#include "base/strings.h"

namespace kvs::api {

RouteMatch MatchRoute(std::span<const Route> routes, std::string_view method, std::string_view path) {
  RouteMatch m;
  for (const Route& r : routes) {
    const std::string_view rp(r.path);
    if (r.prefix ? (path.size() > rp.size() && path.substr(0, rp.size()) == rp) : path == rp) {
      m.route = &r;
      break;
    }
  }
  if (!m.route) {
    // Clipped: the method and path are the client's, of any length.
    m.error = MakeError(404, fmt::format("no route for {} {}", Clip(method, 16), Clip(path, 256)), "not_found_error",
                        "not_found");
    return m;
  }
  const bool head_ok = std::string_view(m.route->method) == "GET" && method == "HEAD";
  if (method != m.route->method && !head_ok) {
    m.error = MakeError(405, fmt::format("{} does not allow {}; use {}", path, method, m.route->method),
                        "invalid_request_error", "method_not_allowed");
  }
  return m;
}

ApiError TransportError(int status, std::string message) {
  if (status == 401) return MakeError(401, std::move(message), "authentication_error", "invalid_api_key");
  return MakeError(status, std::move(message), "invalid_request_error",
                   status == 413 ? "request_too_large" : status == 431 ? "header_too_large" : "invalid_request");
}

namespace {
std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

std::string_view ApiKeyFromHeaders(std::string_view authorization, std::string_view x_api_key) {
  std::string_view key;
  if (authorization.size() > 7 && EqualsIgnoreAsciiCase(authorization.substr(0, 6), "Bearer") &&
      (authorization[6] == ' ' || authorization[6] == '\t')) {
    key = Trim(authorization.substr(7));
  }
  if (key.empty()) key = Trim(x_api_key);
  return key;
}

ApiError Unauthenticated(bool key_missing) {
  return MakeError(401,
                   key_missing ? "missing API key: send it as \"Authorization: Bearer YOUR_KEY\""
                               : "incorrect API key provided",
                   "authentication_error", "invalid_api_key");
}

}  // namespace kvs::api
