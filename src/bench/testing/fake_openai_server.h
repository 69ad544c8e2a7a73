// Test-only: a scripted OpenAI-compatible server on the project's
// HttpServer, for the bench module's tests. It counts one token per word,
// answers /v1/models, /tokenize (vLLM/kvserve shape), /metrics (kvserve
// names) and streams completions and chat completions with a configurable
// time to first token and inter-chunk gap, failing chosen requests with a
// 500, a 429 or an in-stream error. It records what it received.
// Not part of the kvserve binary.
// Thread-safety: all methods are thread-safe.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http/http_server.h"

namespace kvs::bench::testing {

struct FakeServerOptions {
  std::string model = "fake-model";
  int64_t context = 4096;
  double ttft_seconds = 0.01;            // before the first chunk
  double ttft_per_token_seconds = 0;     // plus this per prompt token
  double itl_seconds = 0.002;            // between chunks
  bool tokenize = true;                  // serve /tokenize
  bool metrics = true;                   // serve /metrics
  // Request n (0-based arrival order) fails when fail(n) says so:
  // 500, 429, or -1 for an error event after the first chunk.
  std::function<int(int64_t n)> fail;
  // The answer is the recalled values when the prompt asks (needle tests):
  // answer(prompt_or_last_message) -> text; default "tok0 tok1 ...".
  std::function<std::string(const std::string&)> answer;
};

class FakeOpenAiServer {
 public:
  explicit FakeOpenAiServer(FakeServerOptions options);
  ~FakeOpenAiServer();
  std::string url() const;

  std::vector<nlohmann::json> bodies() const;  // generation request bodies, in arrival order
  int peak_in_flight() const { return peak_.load(); }
  int64_t generations() const { return count_.load(); }

 private:
  struct StreamCtx {
    FakeOpenAiServer* server = nullptr;
    std::shared_ptr<http::Exchange> ex;
    bool chat = false;
    std::vector<std::string> pieces;
    size_t next = 0;
    int64_t prompt_tokens = 0;
    bool fail_in_stream = false;
  };
  void Handle(std::shared_ptr<http::Exchange> ex);
  void Generate(std::shared_ptr<http::Exchange> ex, const nlohmann::json& body, bool chat);
  static void Step(const std::shared_ptr<StreamCtx>& c);

  FakeServerOptions o_;
  std::unique_ptr<http::HttpServer> server_;
  mutable std::mutex mu_;
  std::vector<nlohmann::json> bodies_;
  std::atomic<int> in_flight_{0}, peak_{0};
  std::atomic<int64_t> count_{0};
  std::atomic<int64_t> preemptions_{0};
};

}  // namespace kvs::bench::testing
