#include "api/routes.h"

#include <string>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kvs::api
