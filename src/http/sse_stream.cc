#include "http/sse_stream.h"

#include <string>

#include "http/sse.h"

namespace kvs::http {

HttpResponse SseResponseHead(std::string_view request_id) {
  HttpResponse h;
  h.status = 200;
  h.SetHeader("Content-Type", std::string(kSseContentType));
  h.SetHeader("Cache-Control", "no-cache");
  h.SetHeader("X-Request-Id", std::string(request_id));
  h.SetHeader("X-Accel-Buffering", "no");
  return h;
}

void StartSseStream(Exchange& ex, std::string_view request_id) {
  ex.StartStream(SseResponseHead(request_id), kSseKeepAlive, SseComment("keep-alive"));
}

}  // namespace kvs::http
