// ApiError: an error response in OpenAI's shape ({"error": {"message",
// "type", "param", "code"}}) with its HTTP status, and the mapping from a
// Status that a lower layer returned to such an error.
// Thread-safety: value types and pure functions.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace kvs::api {

// `extra` fields are merged into the error object (e.g. prompt_tokens /
// max_context_length for too-long input).
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::optional<std::string> param;
  std::string code = "invalid_value";
  nlohmann::json extra = nlohmann::json::object();
  std::optional<int> retry_after_seconds;  // 429/503: sent as Retry-After

  nlohmann::json ToJson() const;  // {"error": {...}}
};

ApiError BadRequest(std::string message, std::optional<std::string> param, std::string code = "invalid_value");
ApiError MakeError(int status, std::string message, std::string type, std::string code);

// Maps a Status from a lower layer to an OpenAI error: InvalidArgument and
// NotFound 400, OutOfRange 400 context_length_exceeded, ResourceExhausted
// 429, Unavailable/FailedPrecondition 503, Unimplemented 400,
// DeadlineExceeded 504, anything else 500.
ApiError ErrorFromStatus(const Status& s);

// JSON for the wire: invalid UTF-8 (a lone byte token) becomes U+FFFD.
std::string Dump(const nlohmann::json& j);

}  // namespace kvs::api
