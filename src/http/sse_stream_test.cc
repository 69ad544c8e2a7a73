// The head of an SSE answer (sse_stream.h), the same from the server and the gateway.
#include "http/sse_stream.h"

#include <map>
#include <string>

#include <gtest/gtest.h>

namespace kvs::http {
namespace {

TEST(SseStreamTest, TheHeadIsAnUncachedUnbufferedEventStream) {
  const HttpResponse h = SseResponseHead("req-1");
  EXPECT_EQ(h.status, 200);
  std::map<std::string, std::string> headers;
  for (const auto& [k, v] : h.headers) EXPECT_TRUE(headers.emplace(k, v).second) << k << " twice";
  EXPECT_EQ(headers["Content-Type"], "text/event-stream");
  EXPECT_EQ(headers["Cache-Control"], "no-cache");
  EXPECT_EQ(headers["X-Accel-Buffering"], "no");
  EXPECT_EQ(headers["X-Request-Id"], "req-1");
  EXPECT_EQ(headers.size(), 4u);
  EXPECT_EQ(kSseKeepAlive, std::chrono::seconds(15));
}

}  // namespace
}  // namespace kvs::http
