#include "gateway/testing/fake_upstream.h"

#include <chrono>
#include <functional>
#include <string>

#include "http/sse.h"

namespace kvs::gateway::testing {

void FakeUpstream::Handle(std::shared_ptr<http::Exchange> ex) {
  const auto& path = ex->request().path;
  http::HttpResponse res;
  res.SetHeader("Content-Type", "application/json");
  if (path == "/ready" || path == "/health") {
    res.body = R"({"status":"ready"})";
  } else if (path == "/metrics") {
    res.SetHeader("Content-Type", "text/plain");
    res.body = "kvserve:num_requests_waiting 0\nkvserve:num_requests_running 0\nkvserve:kv_cache_usage_ratio 0\n";
  } else if (path == "/v1/models") {
    res.body = R"({"object":"list","data":[{"id":"fake","object":"model"}]})";
  } else if (ex->request().body.find("\"stream\":true") != std::string::npos) {
    return Stream(std::move(ex));
  } else {
    res.body =
        R"({"id":"cmpl-1","object":"text_completion","created":1,"model":"fake","choices":[{"index":0,"text":" hi","finish_reason":"length","logprobs":null}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}})";
  }
  ex->Respond(std::move(res));
}

void FakeUpstream::Stream(std::shared_ptr<http::Exchange> ex) {
  http::HttpResponse h;
  h.SetHeader("Content-Type", "text/event-stream");
  ex->StartStream(std::move(h));
  auto left = std::make_shared<int>(options_.tokens);
  auto step = std::make_shared<std::function<void()>>();
  *step = [this, ex, left, step] {
    if (ex->client_closed()) {
      *step = nullptr;
      return;
    }
    if (*left == 0) {
      ex->Write(http::SseData(
          R"({"id":"c","object":"text_completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":)" +
          std::to_string(options_.tokens) + "}}"));
      ex->Write(std::string(http::kSseDone));
      ex->EndStream();
      *step = nullptr;
      return;
    }
    --*left;
    ex->Write(http::SseData(
        R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":" tok","finish_reason":null}],"usage":null})"));
    server_.RunAfter(std::chrono::milliseconds(static_cast<int64_t>(options_.token_interval_ms)), [ex, step] {
      ex->Post([step] {
        if (*step) (*step)();
      });
    });
  };
  (*step)();
}

}  // namespace kvs::gateway::testing
