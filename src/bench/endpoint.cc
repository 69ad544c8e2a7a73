#include "bench/endpoint.h"

#include <chrono>

#include <fmt/format.h>

namespace kvs::bench {

const char* TokenizeFlavorName(TokenizeFlavor f) {
  switch (f) {
    case TokenizeFlavor::kNone: return "none";
    case TokenizeFlavor::kVllm: return "/tokenize (prompt/messages -> count)";
    case TokenizeFlavor::kLlamaCpp: return "/tokenize (content -> tokens) + /v1/chat/completions/input_tokens";
  }
  return "?";
}

nlohmann::json EndpointInfo::ToJson() const {
  return {{"model", model},
          {"context_length", context ? nlohmann::json(*context) : nlohmann::json(nullptr)},
          {"tokenize", TokenizeFlavorName(tokenize)},
          {"metrics", has_metrics},
          {"server", server}};
}

std::string ErrorMessageFromBody(const std::string& body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
      if (e.is_string()) return e.get<std::string>();
    }
    if (j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
    if (j.contains("detail") && j["detail"].is_string()) return j["detail"].get<std::string>();
  }
  std::string s = body.substr(0, 300);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

namespace {

std::chrono::milliseconds Ms(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

class RemoteCounter final : public TokenCounter {
 public:
  RemoteCounter(Endpoint* ep, TokenizeFlavor flavor, std::string model)
      : ep_(ep), flavor_(flavor), model_(std::move(model)) {}

  StatusOr<int64_t> CountPrompt(const std::string& text) override {
    if (flavor_ == TokenizeFlavor::kVllm) {
      return Count("/tokenize", {{"model", model_}, {"prompt", text}}, "count");
    }
    // llama-server tokenizes a completions prompt with special tokens added
    // and parsed; /tokenize does the same when asked to.
    KVS_ASSIGN_OR_RETURN(nlohmann::json j, Post("/tokenize", {{"content", text}, {"add_special", true},
                                                              {"parse_special", true}}));
    if (!j.contains("tokens") || !j["tokens"].is_array()) return DataLoss("/tokenize answered without tokens");
    return static_cast<int64_t>(j["tokens"].size());
  }

  StatusOr<int64_t> CountChat(const std::vector<ChatMessage>& messages) override {
    nlohmann::json ms = nlohmann::json::array();
    for (const ChatMessage& m : messages) ms.push_back({{"role", m.role}, {"content", m.content}});
    if (flavor_ == TokenizeFlavor::kVllm) {
      return Count("/tokenize", {{"model", model_}, {"messages", ms}, {"add_generation_prompt", true}}, "count");
    }
    return Count("/v1/chat/completions/input_tokens", {{"model", model_}, {"messages", ms}}, "input_tokens");
  }

  std::string Describe() const override { return fmt::format("the endpoint's {}", TokenizeFlavorName(flavor_)); }

 private:
  StatusOr<nlohmann::json> Post(const std::string& path, const nlohmann::json& body) {
    KVS_ASSIGN_OR_RETURN(http::ClientResponse r, ep_->PostJson(path, body));
    if (r.status != 200) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("POST {} answered {}: {}", path, r.status, ErrorMessageFromBody(r.body)));
    }
    auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (!j.is_object()) return DataLoss("POST {} answered with something that is not a JSON object", path);
    return j;
  }
  StatusOr<int64_t> Count(const std::string& path, const nlohmann::json& body, const char* field) {
    KVS_ASSIGN_OR_RETURN(nlohmann::json j, Post(path, body));
    if (!j.contains(field) || !j[field].is_number_integer()) {
      return DataLoss("POST {} answered without an integer '{}'", path, field);
    }
    return j[field].get<int64_t>();
  }

  Endpoint* ep_;
  TokenizeFlavor flavor_;
  std::string model_;
};

}  // namespace

Endpoint::Endpoint(EndpointOptions options, http::Url url) : options_(std::move(options)), url_(std::move(url)) {
  http::ClientOptions co;
  co.io_threads = std::max(1, options_.io_threads);
  co.max_idle_per_host = 256;
  client_ = std::make_unique<http::HttpClient>(co);
}

Endpoint::~Endpoint() { client_->Stop(); }

StatusOr<std::unique_ptr<Endpoint>> Endpoint::Create(EndpointOptions options) {
  auto url = http::Url::Parse(options.url);
  if (!url.ok()) return url.status().WithContext("--url");
  // OpenAI clients take ".../v1" as the base URL; the tools add /v1 to API
  // paths themselves and need the root for /tokenize and /metrics.
  if (url->base_path.size() >= 3 && url->base_path.substr(url->base_path.size() - 3) == "/v1") {
    url->base_path.resize(url->base_path.size() - 3);
  }
  return std::unique_ptr<Endpoint>(new Endpoint(std::move(options), std::move(*url)));
}

http::ClientRequest Endpoint::MakePost(const std::string& path, std::string body) const {
  http::ClientRequest r;
  r.method = "POST";
  r.target = path;
  r.headers.emplace_back("Content-Type", "application/json");
  r.headers.emplace_back("Accept", "application/json, text/event-stream");
  if (!options_.api_key.empty()) r.headers.emplace_back("Authorization", "Bearer " + options_.api_key);
  r.body = std::move(body);
  r.timeouts.connect = std::chrono::milliseconds(5000);
  if (options_.request_timeout_seconds > 0) r.timeouts.total = Ms(options_.request_timeout_seconds);
  return r;
}

StatusOr<http::ClientResponse> Endpoint::Get(const std::string& path, double timeout_seconds) {
  http::ClientRequest r;
  r.method = "GET";
  r.target = path;
  if (!options_.api_key.empty()) r.headers.emplace_back("Authorization", "Bearer " + options_.api_key);
  r.timeouts.total = Ms(timeout_seconds);
  return client_->Fetch(url_, std::move(r));
}

StatusOr<http::ClientResponse> Endpoint::PostJson(const std::string& path, const nlohmann::json& body,
                                                  double timeout_seconds) {
  http::ClientRequest r = MakePost(path, body.dump());
  r.timeouts.total = Ms(timeout_seconds);
  return client_->Fetch(url_, std::move(r));
}

StatusOr<std::string> Endpoint::Metrics() {
  KVS_ASSIGN_OR_RETURN(http::ClientResponse r, Get("/metrics", 5));
  if (r.status != 200) return Status(StatusCode::kNotFound, fmt::format("GET /metrics answered {}", r.status));
  return r.body;
}

StatusOr<std::vector<std::string>> Endpoint::MetricsPages() {
  std::vector<std::string> pages;
  if (options_.metrics_urls.empty()) {
    KVS_ASSIGN_OR_RETURN(std::string own, Metrics());
    pages.push_back(std::move(own));
    return pages;
  }
  for (const std::string& u : options_.metrics_urls) {
    auto url = http::Url::Parse(u);
    if (!url.ok()) return url.status().WithContext("--replica-metrics " + u);
    http::ClientRequest r;
    r.method = "GET";
    // "http://host:port" reads its /metrics; a URL with a path is read as given.
    r.target = url->base_path.empty() ? "/metrics" : "";
    r.timeouts.total = Ms(5);
    auto res = client_->Fetch(*url, std::move(r));
    if (!res.ok()) return res.status().WithContext("GET " + u);
    if (res->status != 200) return Status(StatusCode::kNotFound, fmt::format("GET {} answered {}", u, res->status));
    pages.push_back(std::move(res->body));
  }
  return pages;
}

StatusOr<TokenizeFlavor> Endpoint::ProbeTokenize() {
  // kvserve / vLLM / SGLang: {"prompt"} -> {"count"}.
  auto a = PostJson("/tokenize", {{"model", info_.model}, {"prompt", "Hello world"}}, 10);
  if (!a.ok()) return a.status();
  if (a->status == 200) {
    auto j = nlohmann::json::parse(a->body, nullptr, false);
    if (j.is_object() && j.contains("count") && j["count"].is_number_integer()) return TokenizeFlavor::kVllm;
    // llama-server ignores "prompt" and answers {"tokens": []}.
    if (j.is_object() && j.contains("tokens")) {
      auto b = PostJson("/tokenize", {{"content", "Hello world"}, {"add_special", true}}, 10);
      if (b.ok() && b->status == 200) {
        auto k = nlohmann::json::parse(b->body, nullptr, false);
        if (k.is_object() && k.contains("tokens") && k["tokens"].is_array() && !k["tokens"].empty()) {
          return TokenizeFlavor::kLlamaCpp;
        }
      }
    }
  }
  return TokenizeFlavor::kNone;
}

StatusOr<EndpointInfo> Endpoint::Discover() {
  auto models = Get("/v1/models", 10);
  if (!models.ok()) return models.status().WithContext("GET " + url_.ToString() + "/v1/models");
  if (models->status != 200) {
    return Status(StatusCode::kUnavailable, fmt::format("GET {}/v1/models answered {}: {}", url_.ToString(),
                                                        models->status, ErrorMessageFromBody(models->body)));
  }
  auto j = nlohmann::json::parse(models->body, nullptr, false);
  if (!j.is_object() || !j.contains("data") || !j["data"].is_array() || j["data"].empty()) {
    return DataLoss("GET /v1/models: expected {{\"data\": [models]}}, got {}", models->body.substr(0, 200));
  }
  info_ = EndpointInfo();
  const nlohmann::json* chosen = nullptr;
  std::vector<std::string> ids;
  for (const auto& m : j["data"]) {
    if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
    ids.push_back(m["id"].get<std::string>());
    if (!chosen && (options_.model.empty() || ids.back() == options_.model)) chosen = &m;
  }
  if (!chosen) {
    return NotFound("the endpoint does not serve model '{}' (it serves: {})", options_.model, fmt::join(ids, ", "));
  }
  const nlohmann::json& m = *chosen;
  info_.model = m["id"].get<std::string>();
  auto int_at = [](const nlohmann::json& o, const char* k) -> std::optional<int64_t> {
    if (o.is_object() && o.contains(k) && o[k].is_number_integer() && o[k].get<int64_t>() > 0) {
      return o[k].get<int64_t>();
    }
    return std::nullopt;
  };
  info_.context = int_at(m, "max_model_len");
  if (!info_.context && m.contains("meta")) info_.context = int_at(m["meta"], "n_ctx");
  if (!info_.context && m.contains("meta")) info_.context = int_at(m["meta"], "n_ctx_train");
  const std::string owner = m.contains("owned_by") && m["owned_by"].is_string() ? m["owned_by"].get<std::string>() : "";
  info_.server = owner == "llamacpp" ? "llama.cpp" : owner;
  if (owner == "kvserve" && m.contains("pools")) info_.server = "kvserve gateway";
  auto flavor = ProbeTokenize();
  if (!flavor.ok()) return flavor.status().WithContext("probing /tokenize");
  info_.tokenize = *flavor;
  if (options_.metrics_urls.empty()) {
    auto metrics = Metrics();
    info_.has_metrics = metrics.ok() && metrics->find_first_not_of(" \n") != std::string::npos;
    info_.metrics_sources = info_.has_metrics ? 1 : 0;
  } else {
    // Named by the user: each must answer now, or the run could not check what it was asked to.
    KVS_ASSIGN_OR_RETURN(std::vector<std::string> pages, MetricsPages());
    info_.has_metrics = true;
    info_.metrics_sources = static_cast<int>(pages.size());
  }
  return info_;
}

std::unique_ptr<TokenCounter> Endpoint::Counter() {
  if (info_.tokenize == TokenizeFlavor::kNone) return nullptr;
  return std::make_unique<RemoteCounter>(this, info_.tokenize, info_.model);
}

StatusOr<std::unique_ptr<TokenCounter>> Endpoint::CounterOrLocal(const std::string& tokenizer_gguf) {
  if (!tokenizer_gguf.empty()) {
    KVS_ASSIGN_OR_RETURN(std::unique_ptr<LocalTokenCounter> local, LocalTokenCounter::FromGguf(tokenizer_gguf));
    return std::unique_ptr<TokenCounter>(std::move(local));
  }
  std::unique_ptr<TokenCounter> c = Counter();
  if (!c) {
    return InvalidArgument(
        "the endpoint has no /tokenize; give the model's GGUF file with --tokenizer so prompts get exact token counts");
  }
  return c;
}

}  // namespace kvs::bench
