#include "api/auth.h"

#include "base/strings.h"

namespace kvs::api {

namespace {
std::string_view TrimSpaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace

std::string_view ApiKeyFromHeaders(std::string_view authorization, std::string_view x_api_key) {
  std::string_view key;
  if (authorization.size() > 7 && EqualsIgnoreAsciiCase(authorization.substr(0, 6), "Bearer") &&
      (authorization[6] == ' ' || authorization[6] == '\t')) {
    key = TrimSpaces(authorization.substr(7));
  }
  if (key.empty()) key = TrimSpaces(x_api_key);
  return key;
}

ApiError Unauthenticated(bool key_missing) {
  return MakeError(401,
                   key_missing ? "missing API key: send it as \"Authorization: Bearer YOUR_KEY\""
                               : "incorrect API key provided",
                   "authentication_error", "invalid_api_key");
}

}  // namespace kvs::api
