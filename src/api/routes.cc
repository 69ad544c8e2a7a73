#include "api/routes.h"

#include <fmt/format.h>

#include "api/dialect.h"
#include "api/openai_request.h"
#include "api/responses_api.h"
#include "base/strings.h"

namespace kvs::api {

namespace {
// Order matters only among prefix routes; none overlaps another here. The
// generation routes are the dialect registry's (api/dialect.h), in its order.
std::vector<ApiRoute> MakeApiRoutes() {
  std::vector<ApiRoute> t = {
      {{"/v1/models", "GET", false}, ApiAction::kModels},
      {{"/v1/models/", "GET", true}, ApiAction::kModels},
  };
  for (const DialectEntry& d : Dialects()) {
    t.push_back({{d.path, "POST", false}, ApiAction::kGenerate, d.endpoint, d.dialect});
  }
  t.push_back({{"/tokenize", "POST", false}, ApiAction::kTokenize});
  t.push_back({{"/detokenize", "POST", false}, ApiAction::kDetokenize});
  return t;
}

const std::vector<ApiRoute>& ApiRoutes() {
  static const std::vector<ApiRoute> routes = MakeApiRoutes();
  return routes;
}

const char* ActionName(ApiAction a) {
  switch (a) {
    case ApiAction::kModels: return "models";
    case ApiAction::kGenerate: return "generate";
    case ApiAction::kTokenize: return "tokenize";
    case ApiAction::kDetokenize: return "detokenize";
  }
  return "?";
}

}  // namespace

std::span<const ApiRoute> PublicApiRoutes() { return ApiRoutes(); }

const ApiRoute* FindApiRoute(const Route& r) {
  for (const ApiRoute& a : ApiRoutes()) {
    if (std::string_view(a.route.path) == r.path && std::string_view(a.route.method) == r.method) return &a;
  }
  return nullptr;
}

std::vector<Route> RouteTable(std::initializer_list<Route> own) {
  std::vector<Route> t(own);
  for (const ApiRoute& a : ApiRoutes()) t.push_back(a.route);
  return t;
}

nlohmann::json PublicApiRoutesJson() {
  nlohmann::json out = nlohmann::json::array();
  for (const ApiRoute& a : ApiRoutes()) {
    nlohmann::json r = {{"method", a.route.method}, {"path", a.route.path}, {"prefix", a.route.prefix},
                        {"action", ActionName(a.action)}};
    if (a.action == ApiAction::kGenerate) r["dialect"] = FindDialect(a.endpoint, a.dialect).name;
    out.push_back(std::move(r));
  }
  return out;
}

std::string RouteLabel(const Route* r) {
  if (!r) return "other";
  return r->prefix ? std::string(r->path) + "{id}" : std::string(r->path);
}

std::optional<ApiError> ParseGenerateRequest(Endpoint endpoint, Dialect dialect, const Json& body, ParsedRequest* out) {
  return FindDialect(endpoint, dialect).parse(body, out);
}

Dialect ErrorDialect(std::string_view path) {
  for (const ApiRoute& a : ApiRoutes()) {
    if (a.action == ApiAction::kGenerate && !a.route.prefix && path == a.route.path) return a.dialect;
  }
  return Dialect::kOpenAI;
}

nlohmann::json ErrorJson(Dialect d, const ApiError& e) {
  for (const DialectEntry& entry : Dialects()) {
    if (entry.dialect == d) return entry.error_json(e);
  }
  return e.ToJson();
}

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

std::vector<std::pair<std::string, std::string>> ErrorHeaders(const ApiError& e) {
  std::vector<std::pair<std::string, std::string>> h;
  if (e.retry_after_seconds) h.emplace_back("Retry-After", std::to_string(*e.retry_after_seconds));
  if (e.status == 401) h.emplace_back("WWW-Authenticate", "Bearer");
  return h;
}

}  // namespace kvs::api
