#include "api/routes.h"

#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "api/auth.h"

namespace kvs::api {
namespace {

const Route kTestRoutes[] = {
    {"/health", "GET", false},
    {"/v1/models/", "GET", true},
    {"/v1/completions", "POST", false},
};

TEST(RoutesTest, MatchesExactAndPrefixRoutes) {
  RouteMatch m = MatchRoute(kTestRoutes, "GET", "/health");
  ASSERT_NE(m.route, nullptr);
  EXPECT_STREQ(m.route->path, "/health");
  EXPECT_FALSE(m.error.has_value());
  m = MatchRoute(kTestRoutes, "GET", "/v1/models/m1");
  ASSERT_NE(m.route, nullptr);
  EXPECT_STREQ(m.route->path, "/v1/models/");
  EXPECT_FALSE(m.error.has_value());
  // HEAD is served where GET is.
  EXPECT_FALSE(MatchRoute(kTestRoutes, "HEAD", "/health").error.has_value());
}

TEST(RoutesTest, UnknownPathIs404AndWrongMethodIs405) {
  // A prefix route does not match its own path.
  RouteMatch m = MatchRoute(kTestRoutes, "GET", "/v1/models/");
  EXPECT_EQ(m.route, nullptr);
  ASSERT_TRUE(m.error.has_value());
  EXPECT_EQ(m.error->status, 404);
  EXPECT_EQ(m.error->message, "no route for GET /v1/models/");
  m = MatchRoute(kTestRoutes, "GET", "/v1/completions");
  ASSERT_NE(m.route, nullptr);
  ASSERT_TRUE(m.error.has_value());
  EXPECT_EQ(m.error->status, 405);
  EXPECT_EQ(m.error->message, "/v1/completions does not allow GET; use POST");
  EXPECT_NE(MatchRoute(kTestRoutes, "HEAD", "/v1/completions").route, nullptr);
  EXPECT_EQ(MatchRoute(kTestRoutes, "HEAD", "/v1/completions").error->status, 405);
  // The client's path is clipped in the message.
  m = MatchRoute(kTestRoutes, "GET", "/" + std::string(100000, 'x'));
  ASSERT_TRUE(m.error.has_value());
  EXPECT_LT(m.error->message.size(), 400u);
}

TEST(RoutesTest, TransportErrorsNameTheLimit) {
  EXPECT_EQ(TransportError(413, "too big").code, "request_too_large");
  EXPECT_EQ(TransportError(431, "headers").code, "header_too_large");
  const ApiError e = TransportError(400, "bad framing");
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.code, "invalid_request");
  EXPECT_EQ(e.message, "bad framing");
}


TEST(RoutesTest, RouteTableIsTheFrontEndsOwnRoutesThenThePublicApi) {
  const std::vector<Route> t = RouteTable({{"/health", "GET", false}});
  ASSERT_EQ(t.size(), 1 + PublicApiRoutes().size());
  EXPECT_STREQ(t[0].path, "/health");
  EXPECT_EQ(FindApiRoute(t[0]), nullptr);
  std::set<std::string> paths;
  for (size_t i = 1; i < t.size(); ++i) {
    const ApiRoute* a = FindApiRoute(t[i]);
    ASSERT_NE(a, nullptr) << t[i].path;
    EXPECT_STREQ(a->route.path, t[i].path);
    paths.insert(t[i].path);
  }
  // The replica's whole public API, each dialect among it.
  for (const char* p : {"/v1/models", "/v1/models/", "/v1/completions", "/v1/chat/completions", "/v1/responses",
                        "/v1/messages", "/tokenize", "/detokenize"}) {
    EXPECT_TRUE(paths.count(p)) << p;
  }
  const RouteMatch m = MatchRoute(t, "POST", "/v1/messages");
  ASSERT_NE(m.route, nullptr);
  EXPECT_FALSE(m.error.has_value());
  EXPECT_EQ(FindApiRoute(*m.route)->dialect, Dialect::kAnthropic);
  EXPECT_EQ(RouteLabel(MatchRoute(t, "GET", "/v1/models/m1").route), "/v1/models/{id}");
  EXPECT_EQ(RouteLabel(nullptr), "other");
  const nlohmann::json j = PublicApiRoutesJson();
  ASSERT_EQ(j.size(), PublicApiRoutes().size());
  EXPECT_EQ(j[0]["method"], "GET");
}

// Every generation route's parser keeps the request's cache_salt and
// priority: the gateway isolates tenants' prefix caches through them.
TEST(RoutesTest, EveryGenerationDialectHonoursCacheSaltAndPriority) {
  const std::map<Dialect, const char*> kBodies = {
      {Dialect::kOpenAI, R"({"model":"m","messages":[{"role":"user","content":"hi"}]})"},
      {Dialect::kResponses, R"({"model":"m","input":"hi"})"},
      {Dialect::kAnthropic, R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hi"}]})"},
  };
  int checked = 0;
  for (const ApiRoute& a : PublicApiRoutes()) {
    if (a.action != ApiAction::kGenerate) continue;
    Json body = a.endpoint == Endpoint::kCompletions ? Json::parse(R"({"model":"m","prompt":"hi"})")
                                                     : Json::parse(kBodies.at(a.dialect));
    body["cache_salt"] = "tenant-salt";
    body["priority"] = 7;
    ParsedRequest r;
    auto e = ParseGenerateRequest(a.endpoint, a.dialect, body, &r);
    ASSERT_FALSE(e.has_value()) << a.route.path << ": " << e->message;
    EXPECT_EQ(r.cache_salt, "tenant-salt") << a.route.path;
    EXPECT_EQ(r.priority, 7) << a.route.path;
    EXPECT_EQ(r.dialect, a.dialect) << a.route.path;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

TEST(RoutesTest, ErrorsTakeTheShapeOfTheRoutesDialect) {
  EXPECT_EQ(ErrorDialect("/v1/messages"), Dialect::kAnthropic);
  EXPECT_EQ(ErrorDialect("/v1/responses"), Dialect::kResponses);
  EXPECT_EQ(ErrorDialect("/v1/chat/completions"), Dialect::kOpenAI);
  EXPECT_EQ(ErrorDialect("/v1/messages/x"), Dialect::kOpenAI);
  const ApiError e = Unauthenticated(true);
  const nlohmann::json a = ErrorJson(Dialect::kAnthropic, e);
  EXPECT_EQ(a["type"], "error");
  EXPECT_EQ(a["error"]["type"], "authentication_error");
  EXPECT_EQ(ErrorJson(Dialect::kResponses, e)["error"]["code"], "invalid_api_key");
}

}  // namespace
}  // namespace kvs::api
