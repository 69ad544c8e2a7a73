#include "api/error.h"

namespace kvs::api {

using nlohmann::json;

json ApiError::ToJson() const {
  json err = json::object();
  err["message"] = message;
  err["type"] = type;
  err["param"] = param ? json(*param) : json(nullptr);
  err["code"] = code;
  for (auto it = extra.begin(); it != extra.end(); ++it) err[it.key()] = it.value();
  return json{{"error", err}};
}

ApiError BadRequest(std::string message, std::optional<std::string> param, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

ApiError MakeError(int status, std::string message, std::string type, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

ApiError ErrorFromStatus(const Status& s) {
  ApiError e;
  e.message = s.message();
  switch (s.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
      e.status = 400;
      e.code = "invalid_value";
      break;
    case StatusCode::kOutOfRange:
      e.status = 400;
      e.code = "context_length_exceeded";
      break;
    case StatusCode::kResourceExhausted:
      e.status = 429;
      e.type = "rate_limit_error";
      e.code = "rate_limit_exceeded";
      e.retry_after_seconds = 1;
      break;
    case StatusCode::kUnavailable:
    case StatusCode::kFailedPrecondition:
      e.status = 503;
      e.type = "service_unavailable";
      e.code = "service_unavailable";
      e.retry_after_seconds = 1;
      break;
    case StatusCode::kUnimplemented:
      e.status = 400;
      e.code = "unsupported_parameter";
      break;
    case StatusCode::kDeadlineExceeded:
      e.status = 504;
      e.type = "timeout_error";
      e.code = "request_timeout";
      break;
    default:
      e.status = 500;
      e.type = "internal_error";
      e.code = "internal_error";
      break;
  }
  return e;
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace kvs::api
