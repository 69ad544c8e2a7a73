// The start of a server-sent events answer, the same from every front end
// (the server's generations, the gateway's relayed streams): status 200,
// `Content-Type: text/event-stream`, `Cache-Control: no-cache` (no proxy
// may answer a later request with it), `X-Accel-Buffering: no` (nginx
// passes events on as they come instead of buffering the body) and the
// request id; then, whenever nothing was written for kSseKeepAlive, an SSE
// comment, so that proxies with read timeouts keep a quiet stream (a long
// prefill, a long queue) open. Clients ignore comments.
// The framing of the events themselves is sse.h's.
// Thread-safety: as Exchange::StartStream (on the exchange's strand).
#pragma once

#include <chrono>
#include <string_view>

#include "http/http_server.h"

namespace kvs::http {

inline constexpr std::chrono::seconds kSseKeepAlive{15};

// The headers of an SSE answer (status 200).
HttpResponse SseResponseHead(std::string_view request_id);
// Starts the stream of `ex` with SseResponseHead and the keep-alive comment.
void StartSseStream(Exchange& ex, std::string_view request_id);

}  // namespace kvs::http
