// Helpers of the HTTP module's tests (http_server_test, http_client_test).
#pragma once

#include <string>
#include <utility>

#include "http/http_server.h"

namespace kvs::http::testing {

// A text/plain response with this status and body.
inline HttpResponse Text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.SetHeader("Content-Type", "text/plain");
  r.body = std::move(body);
  return r;
}

}  // namespace kvs::http::testing
