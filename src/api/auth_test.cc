// Authenticate: the one key check of both front ends (api/auth.h).
#include "api/auth.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "api/routes.h"

namespace kvs::api {
namespace {

// A request type as the front ends' (http::HttpRequest): headers by name.
struct FakeRequest {
  std::map<std::string, std::string> headers;
  std::string_view Header(std::string_view name) const {
    auto it = headers.find(std::string(name));
    return it == headers.end() ? std::string_view() : std::string_view(it->second);
  }
};

struct Tenant {
  std::string name;
};

// A key store as a lookup: one known key; counts the questions it gets.
struct Store {
  int asked = 0;
  std::optional<Tenant> operator()(std::string_view key) {
    ++asked;
    if (key == "sk-good") return Tenant{"acme"};
    return std::nullopt;
  }
};

TEST(AuthTest, ReadsTheKeyFromBearerThenXApiKey) {
  EXPECT_EQ(ApiKeyFromHeaders("Bearer sk-1", ""), "sk-1");
  EXPECT_EQ(ApiKeyFromHeaders("bearer \t sk-1  ", ""), "sk-1") << "the scheme in any case; spaces trimmed";
  EXPECT_EQ(ApiKeyFromHeaders("Basic abc", "sk-2"), "sk-2") << "another scheme: x-api-key";
  EXPECT_EQ(ApiKeyFromHeaders("Bearer ", " sk-2 "), "sk-2");
  EXPECT_EQ(ApiKeyFromHeaders("Bearersk-1", ""), "") << "a space must follow the scheme";
  EXPECT_EQ(ApiKeyFromHeaders("", ""), "");
}

TEST(AuthTest, AKnownKeyGivesItsIdentity) {
  Store store;
  const FakeRequest bearer{{{"Authorization", "Bearer sk-good"}}};
  auto r = Authenticate(KeyHeaders::Of(bearer), store);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.identity->name, "acme");
  EXPECT_FALSE(r.error.has_value());
  const FakeRequest anthropic{{{"x-api-key", "sk-good"}}};
  EXPECT_TRUE(Authenticate(KeyHeaders::Of(anthropic), store).ok());
  EXPECT_EQ(store.asked, 2);
}

TEST(AuthTest, AMissingOrWrongKeyIsTheSame401FromEitherFrontEnd) {
  Store store;
  auto missing = Authenticate(KeyHeaders::Of(FakeRequest{}), store);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(store.asked, 0) << "no key: the store is not asked";
  EXPECT_EQ(missing.error->status, 401);
  EXPECT_EQ(missing.error->message, "missing API key: send it as \"Authorization: Bearer YOUR_KEY\"");
  EXPECT_EQ(missing.error->type, "authentication_error");
  EXPECT_EQ(missing.error->code, "invalid_api_key");

  auto wrong = Authenticate(KeyHeaders::Of(FakeRequest{{{"Authorization", "Bearer sk-bad"}}}), store);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(store.asked, 1);
  EXPECT_EQ(wrong.error->status, 401);
  EXPECT_EQ(wrong.error->message, "incorrect API key provided");
  EXPECT_EQ(wrong.error->code, "invalid_api_key");
  // A wrong Bearer key is not rescued by x-api-key: the Bearer key is the one presented.
  auto both = Authenticate({"Bearer sk-bad", "sk-good"}, store);
  EXPECT_FALSE(both.ok());
}

TEST(AuthTest, TheAnswerToA401NamesTheBearerScheme) {
  const auto h = ErrorHeaders(Unauthenticated(true));
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].first, "WWW-Authenticate");
  EXPECT_EQ(h[0].second, "Bearer");
  ApiError busy = MakeError(503, "busy", "service_unavailable", "server_overloaded");
  busy.retry_after_seconds = 2;
  const auto b = ErrorHeaders(busy);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].first, "Retry-After");
  EXPECT_EQ(b[0].second, "2");
  EXPECT_TRUE(ErrorHeaders(MakeError(400, "bad", "invalid_request_error", "invalid_value")).empty());
}

}  // namespace
}  // namespace kvs::api
