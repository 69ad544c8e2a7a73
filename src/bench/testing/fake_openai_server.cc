#include "bench/testing/fake_openai_server.h"

#include <chrono>
#include <sstream>

#include <fmt/format.h>

#include "http/sse.h"

namespace kvs::bench::testing {

namespace {

int64_t Words(const std::string& s) {
  std::istringstream in(s);
  std::string w;
  int64_t n = 0;
  while (in >> w) ++n;
  return n;
}

int64_t PromptTokens(const nlohmann::json& body) {
  if (body.contains("messages")) {
    int64_t n = 6;  // the "template"
    for (const auto& m : body["messages"]) n += Words(m.value("content", ""));
    return n;
  }
  return Words(body.value("prompt", "")) + 1;  // BOS
}

http::HttpResponse Json(int status, const nlohmann::json& j) {
  http::HttpResponse r;
  r.status = status;
  r.SetHeader("Content-Type", "application/json");
  r.body = j.dump();
  return r;
}

}  // namespace

FakeOpenAiServer::FakeOpenAiServer(FakeServerOptions options) : o_(std::move(options)) {
  http::ServerOptions so;
  so.io_threads = 2;
  server_ = std::make_unique<http::HttpServer>(so);
  Status s = server_->Start([this](std::shared_ptr<http::Exchange> ex) { Handle(std::move(ex)); });
  if (!s.ok()) std::abort();
}

FakeOpenAiServer::~FakeOpenAiServer() { server_->Stop(); }

std::string FakeOpenAiServer::url() const { return fmt::format("http://127.0.0.1:{}", server_->port()); }

std::vector<nlohmann::json> FakeOpenAiServer::bodies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bodies_;
}

void FakeOpenAiServer::Handle(std::shared_ptr<http::Exchange> ex) {
  const http::HttpRequest& req = ex->request();
  if (req.path == "/v1/models") {
    ex->Respond(Json(200, {{"object", "list"},
                           {"data", {{{"id", o_.model}, {"object", "model"}, {"owned_by", "test"},
                                      {"max_model_len", o_.context}}}}}));
    return;
  }
  if (req.path == "/metrics" && o_.metrics) {
    http::HttpResponse r;
    r.SetHeader("Content-Type", "text/plain; version=0.0.4");
    const int running = in_flight_.load();
    r.body = fmt::format(
        "# TYPE kvserve:num_requests_running gauge\nkvserve:num_requests_running {}\n"
        "kvserve:num_requests_waiting 0\nkvserve:kv_cache_usage_ratio {}\n"
        "kvserve:num_preemptions_total {}\n",
        running, 0.1 * running, preemptions_.load());
    ex->Respond(std::move(r));
    return;
  }
  auto body = nlohmann::json::parse(req.body, nullptr, false);
  if (req.path == "/tokenize" && o_.tokenize) {
    if (!body.is_object()) {
      ex->Respond(Json(400, {{"error", {{"message", "bad json"}}}}));
      return;
    }
    ex->Respond(Json(200, {{"count", PromptTokens(body)}}));
    return;
  }
  if ((req.path == "/v1/completions" || req.path == "/v1/chat/completions") && req.method == "POST") {
    if (!body.is_object()) {
      ex->Respond(Json(400, {{"error", {{"message", "bad json"}}}}));
      return;
    }
    Generate(std::move(ex), body, req.path == "/v1/chat/completions");
    return;
  }
  ex->Respond(Json(404, {{"error", {{"message", "no such route"}, {"type", "not_found_error"}}}}));
}

void FakeOpenAiServer::Generate(std::shared_ptr<http::Exchange> ex, const nlohmann::json& body, bool chat) {
  const int64_t n = count_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    bodies_.push_back(body);
  }
  const int fail = o_.fail ? o_.fail(n) : 0;
  if (fail == 500 || fail == 429) {
    ex->Respond(Json(fail, {{"error", {{"message", fmt::format("scripted failure {}", fail)},
                                       {"type", fail == 500 ? "internal_error" : "rate_limit_error"}}}}));
    return;
  }
  const int64_t prompt_tokens = PromptTokens(body);
  std::string text;
  if (o_.answer) {
    const std::string q = chat ? body["messages"].back().value("content", "") : body.value("prompt", "");
    text = o_.answer(q);
  }
  std::vector<std::string> pieces;
  if (!text.empty()) {
    pieces.push_back(text);
  } else {
    const int64_t max_tokens = body.value("max_tokens", 16);
    for (int64_t i = 0; i < max_tokens; ++i) pieces.push_back(fmt::format(" tok{}", i));
  }
  if (!body.value("stream", false)) {
    // A whole answer after the time to first token.
    std::string all;
    for (const std::string& p : pieces) all += p;
    nlohmann::json choice = {{"index", 0}, {"finish_reason", "length"}};
    if (chat) {
      choice["message"] = {{"role", "assistant"}, {"content", all}};
    } else {
      choice["text"] = all;
    }
    nlohmann::json j = {{"id", "x"},
                        {"object", chat ? "chat.completion" : "text_completion"},
                        {"choices", nlohmann::json::array({choice})},
                        {"usage", {{"prompt_tokens", prompt_tokens},
                                   {"completion_tokens", static_cast<int64_t>(pieces.size())}}}};
    const double wait = o_.ttft_seconds + o_.ttft_per_token_seconds * static_cast<double>(prompt_tokens);
    ex->SetDeadline(http::Clock::now() + std::chrono::microseconds(static_cast<int64_t>(wait * 1e6)),
                    [ex, j] { ex->Respond(Json(200, j)); });
    return;
  }
  const int now = ++in_flight_;
  int peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
  http::HttpResponse head;
  head.SetHeader("Content-Type", "text/event-stream");
  ex->StartStream(std::move(head));
  auto ctx = std::make_shared<StreamCtx>();
  ctx->server = this;
  ctx->ex = ex;
  ctx->chat = chat;
  ctx->pieces = std::move(pieces);
  ctx->prompt_tokens = prompt_tokens;
  ctx->fail_in_stream = fail == -1;
  const double ttft = o_.ttft_seconds + o_.ttft_per_token_seconds * static_cast<double>(prompt_tokens);
  ex->SetDeadline(http::Clock::now() + std::chrono::microseconds(static_cast<int64_t>(ttft * 1e6)),
                  [ctx] { Step(ctx); });
}

// One chunk per call; the next call is the exchange's deadline (which owns
// the context only while it is pending).
void FakeOpenAiServer::Step(const std::shared_ptr<StreamCtx>& c) {
  http::Exchange& ex = *c->ex;
  if (ex.client_closed()) {
    --c->server->in_flight_;
    return;
  }
  if (c->next == 1 && c->fail_in_stream) {
    ex.Write(http::SseEvent("error", R"({"error":{"message":"scripted stream failure","type":"internal_error"}})"));
    ex.Write(std::string(http::kSseDone));
    ex.EndStream();
    --c->server->in_flight_;
    return;
  }
  if (c->next < c->pieces.size()) {
    const std::string& piece = c->pieces[c->next++];
    nlohmann::json j = {{"id", "x"}, {"object", c->chat ? "chat.completion.chunk" : "text_completion"}};
    j["choices"] = c->chat ? nlohmann::json::array({{{"index", 0}, {"delta", {{"content", piece}}}}})
                           : nlohmann::json::array({{{"index", 0}, {"text", piece}}});
    ex.Write(http::SseData(j.dump()));
    const auto gap = std::chrono::microseconds(static_cast<int64_t>(c->server->o_.itl_seconds * 1e6));
    ex.SetDeadline(http::Clock::now() + gap, [c] { Step(c); });
    return;
  }
  nlohmann::json u = {{"id", "x"},
                      {"choices", nlohmann::json::array()},
                      {"usage", {{"prompt_tokens", c->prompt_tokens},
                                 {"completion_tokens", static_cast<int64_t>(c->pieces.size())},
                                 {"prompt_tokens_details", {{"cached_tokens", c->prompt_tokens / 4}}}}}};
  ex.Write(http::SseData(u.dump()));
  ex.Write(std::string(http::kSseDone));
  ex.EndStream();
  --c->server->in_flight_;
}

}  // namespace kvs::bench::testing
