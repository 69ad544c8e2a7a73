#include "http/sse_parser.h"

#include <gtest/gtest.h>

namespace kvs::http {
namespace {

TEST(SseTest, DataFraming) {
  EXPECT_EQ(SseData("{\"a\":1}"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseData(""), "data: \n\n");
  EXPECT_EQ(SseData("[DONE]"), kSseDone);
  // Every line break style becomes its own data line.
  EXPECT_EQ(SseData("a\nb\r\nc\rd"), "data: a\ndata: b\ndata: c\ndata: d\n\n");
  EXPECT_EQ(SseData("a\n"), "data: a\ndata: \n\n");
}

TEST(SseTest, EventAndCommentFraming) {
  EXPECT_EQ(SseEvent("error", "{\"x\":1}"), "event: error\ndata: {\"x\":1}\n\n");
  EXPECT_EQ(SseEvent("bad\nname", "p"), "event: bad\ndata: p\n\n");
  EXPECT_EQ(SseComment("ping"), ": ping\n\n");
}

TEST(SseTest, ParserRoundTripsAnyPayloadInAnySplit) {
  const std::vector<std::string> payloads = {"{\"a\":1}", "", "multi\nline\npayload", "x\r\ny", "[DONE]",
                                             "trailing\n"};
  std::string wire;
  for (const auto& p : payloads) wire += SseData(p);
  wire += SseComment("keepalive");
  wire += SseEvent("error", "{\"error\":{}}");
  for (size_t piece = 1; piece <= wire.size(); piece = piece * 2 + 1) {
    SseParser parser;
    std::vector<SseMessage> got;
    for (size_t i = 0; i < wire.size(); i += piece) {
      for (auto& m : parser.Feed(std::string_view(wire).substr(i, piece))) got.push_back(std::move(m));
    }
    ASSERT_EQ(got.size(), payloads.size() + 1) << "piece " << piece;
    for (size_t i = 0; i < payloads.size(); ++i) {
      std::string want = payloads[i];
      // \r\n inside a payload comes back as \n (SSE normalizes line breaks).
      for (size_t k; (k = want.find("\r\n")) != std::string::npos;) want.replace(k, 2, "\n");
      EXPECT_EQ(got[i].data, want) << "piece " << piece;
      EXPECT_EQ(got[i].event, "");
    }
    EXPECT_EQ(got.back().event, "error");
    EXPECT_EQ(got.back().data, "{\"error\":{}}");
  }
}

TEST(SseTest, ParserHandlesCrLfAndFieldsWithoutSpace) {
  SseParser p;
  auto got = p.Feed("data:x\r\ndata: y\r\nid: 7\r\n\r\nevent: e\r\n\r\n");
  ASSERT_EQ(got.size(), 1u);  // an event without data is not dispatched
  EXPECT_EQ(got[0].data, "x\ny");
  EXPECT_EQ(got[0].id, "7");
}

}  // namespace
}  // namespace kvs::http
