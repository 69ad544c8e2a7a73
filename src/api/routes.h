// Request routing of the HTTP front ends (the server's Service and the
// gateway): a route table entry, the match of a request against a table,
// and the OpenAI-style errors for a request that matches no route or that
// the HTTP layer could not read. Both front ends answer these cases alike.
//
// The public API's routes (models, generation in every dialect, tokenizer)
// are declared once, in PublicApiRoutes(): the server serves each of them
// and so does the gateway (the models list itself, the rest proxied), so a
// route added to the replica cannot be missing from the gateway. Each front
// end builds its table with RouteTable (its own routes, then these).
// Thread-safety: pure functions over immutable tables.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/error.h"
#include "api/openai_request.h"

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

// What a route of the public API does.
enum class ApiAction {
  kModels,      // GET: the models list, or one model (prefix route)
  kGenerate,    // POST: a generation in `endpoint`'s request shape, answered in `dialect`
  kTokenize,    // POST /tokenize
  kDetokenize,  // POST /detokenize
};

struct ApiRoute {
  Route route;
  ApiAction action;
  Endpoint endpoint = Endpoint::kChatCompletions;  // kGenerate
  Dialect dialect = Dialect::kOpenAI;              // kGenerate: the answer's (and errors') shape
};

// The public API every front end serves (keyed routes, not the operator's
// /health, /metrics, ...).
std::span<const ApiRoute> PublicApiRoutes();
// The public API route `r` is (by path and method); nullptr for a front end's own.
const ApiRoute* FindApiRoute(const Route& r);
// A front end's route table: `own`, then every route of PublicApiRoutes().
std::vector<Route> RouteTable(std::initializer_list<Route> own);
// The routes of PublicApiRoutes() as JSON ([{"method", "path", "prefix",
// "action", "dialect"}]: `kvserve serve --print-routes`).
nlohmann::json PublicApiRoutesJson();
// A route's label in metrics: its path, "{id}" appended to a prefix route;
// "other" when no route matched (a client's path is not a bounded label).
std::string RouteLabel(const Route* r);

// Parses a generation request body as the route (endpoint, dialect) reads
// it: with the parser of its entry in the dialect registry (api/dialect.h),
// which also gives PublicApiRoutes() its generation routes.
std::optional<ApiError> ParseGenerateRequest(Endpoint endpoint, Dialect dialect, const Json& body, ParsedRequest* out);

// The answer shape of errors on a request path: Anthropic's on the
// /v1/messages route (its clients read only that), OpenAI's elsewhere.
Dialect ErrorDialect(std::string_view path);
// An error's body in a dialect's shape (Responses errors are OpenAI's).
nlohmann::json ErrorJson(Dialect d, const ApiError& e);

// The first route of `routes` whose path matches; an error when none does
// or when the method is not the route's.
RouteMatch MatchRoute(std::span<const Route> routes, std::string_view method, std::string_view path);

// The error for a request the HTTP layer refused while reading it (status:
// its transport_error(), 413 and 431 among them).
ApiError TransportError(int status, std::string message);

// The headers of an error's answer, the same from both front ends:
// Retry-After (when the error has one) and, on a 401, `WWW-Authenticate:
// Bearer` (RFC 9110 11.6.1: a 401 names the scheme it wants).
std::vector<std::pair<std::string, std::string>> ErrorHeaders(const ApiError& e);

}  // namespace kvs::api
