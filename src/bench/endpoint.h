// An OpenAI-compatible endpoint seen from the validation tools: where it is,
// how to authenticate, what it serves, how it counts tokens, and its
// Prometheus metrics. Works with kvserve, the kvserve gateway, vLLM, SGLang
// and llama.cpp's server.
//
// Discovery (Discover):
//  - GET /v1/models: the served model id and its context length
//    (`max_model_len` for kvserve and vLLM, `meta.n_ctx` for llama-server);
//  - token counting: POST /tokenize {"prompt"} answering {"count"} (kvserve,
//    vLLM, SGLang), else POST /tokenize {"content"} answering {"tokens"} with
//    /v1/chat/completions/input_tokens for conversations (llama-server),
//    else none (then a local GGUF tokenizer must be given);
//  - GET /metrics: present or not.
// The URL may be given with or without a trailing "/v1" (as OpenAI clients'
// base_url is).
// Thread-safety: all methods are thread-safe (HttpClient is); the counter
// returned by Counter() may be used from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "bench/prompt_fit.h"
#include "http/http_client.h"

namespace kvs::bench {

enum class TokenizeFlavor { kNone, kVllm, kLlamaCpp };
const char* TokenizeFlavorName(TokenizeFlavor f);

struct EndpointOptions {
  std::string url;             // "http://host:port" or ".../v1"
  std::string api_key;         // sent as "Authorization: Bearer KEY" when set
  std::string model;           // served model id to use; "" = the first of /v1/models
  int io_threads = 1;
  double request_timeout_seconds = 600;  // whole-request limit for generations
  // Where the server figures are read (--replica-metrics): the /metrics of
  // each replica behind a gateway ("http://host:port", "/metrics" added when
  // the URL has no path). Empty: the endpoint's own /metrics.
  std::vector<std::string> metrics_urls;
};

struct EndpointInfo {
  std::string model;                  // the id sent in requests
  std::optional<int64_t> context;     // the model's context length, when the server says
  TokenizeFlavor tokenize = TokenizeFlavor::kNone;
  bool has_metrics = false;           // the metrics sources answer (MetricsPages)
  int metrics_sources = 0;            // how many: 1, or one per --replica-metrics URL
  std::string server;                 // "kvserve", "kvserve gateway", "vllm", "llama.cpp", ... (best guess)
  nlohmann::json ToJson() const;
};

class Endpoint {
 public:
  static StatusOr<std::unique_ptr<Endpoint>> Create(EndpointOptions options);
  ~Endpoint();

  // Probes the endpoint (see the header comment). Fails when /v1/models
  // cannot be read or the requested model is not served.
  StatusOr<EndpointInfo> Discover();
  const EndpointInfo& info() const { return info_; }

  // A counter using the endpoint's own tokenizer; nullptr when it has none.
  std::unique_ptr<TokenCounter> Counter();
  // The tools' choice: the local GGUF file's tokenizer when one is given,
  // else the endpoint's; an error naming --tokenizer when neither exists.
  StatusOr<std::unique_ptr<TokenCounter>> CounterOrLocal(const std::string& tokenizer_gguf);

  // GET /metrics text (Fetch; short timeout).
  StatusOr<std::string> Metrics();
  // The text of every metrics source (options().metrics_urls, else the
  // endpoint's /metrics), in order; fails when any does not answer.
  StatusOr<std::vector<std::string>> MetricsPages();
  // Blocking GET/POST of a path under the API root (e.g. "/ready").
  StatusOr<http::ClientResponse> Get(const std::string& path, double timeout_seconds = 10);
  StatusOr<http::ClientResponse> PostJson(const std::string& path, const nlohmann::json& body,
                                          double timeout_seconds = 60);

  // A ClientRequest for a JSON POST with the auth header and the
  // generation timeout, for streaming calls through client().
  http::ClientRequest MakePost(const std::string& path, std::string body) const;
  http::HttpClient& client() { return *client_; }
  const http::Url& url() const { return url_; }
  const EndpointOptions& options() const { return options_; }

 private:
  Endpoint(EndpointOptions options, http::Url url);
  StatusOr<TokenizeFlavor> ProbeTokenize();

  EndpointOptions options_;
  http::Url url_;
  std::unique_ptr<http::HttpClient> client_;
  EndpointInfo info_;
};

// The text of an error response body: OpenAI's error.message, llama.cpp's,
// or the body itself (truncated).
std::string ErrorMessageFromBody(const std::string& body);

}  // namespace kvs::bench
