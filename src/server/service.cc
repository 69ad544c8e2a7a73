#include "server/service.h"

#include <chrono>
#include <ctime>
#include <random>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "server/sha256.h"

namespace kvs::server {

using nlohmann::json;

struct Service::Ctx {
  std::shared_ptr<http::Exchange> ex;
  std::string id;
  std::string key_id;
  std::string route;  // metric label: the route template, or "other"
};

namespace {

std::string RandomHex(size_t n) {
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) s += kDigits[rng() & 15];
  return s;
}

std::string IsoTime(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

ApiError MakeError(int status, std::string message, std::string type, std::string code) {
  ApiError e;
  e.status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

}  // namespace

Service::Service(ServeConfig config, std::vector<std::string> api_keys, ServerMetrics* metrics, AccessLog* access_log)
    : config_(std::move(config)), metrics_(metrics), access_log_(access_log) {
  for (const auto& k : api_keys) key_digests_.push_back(Sha256Hex(k));
}

std::string Service::KeyId(std::string_view key) { return "k-" + Sha256Hex(key).substr(0, 8); }

void Service::SetReady(InferenceBackend* backend, ModelCard card) {
  card_ = std::move(card);
  backend_.store(backend);
  State expected = State::kLoading;
  if (state_.compare_exchange_strong(expected, State::kReady)) {
    std::lock_guard<std::mutex> lock(not_ready_mu_);
    metrics_->ready.Set(not_ready_reason_.empty() ? 1 : 0);
  }
}

void Service::SetNotReadyReason(std::string reason) {
  std::lock_guard<std::mutex> lock(not_ready_mu_);
  not_ready_reason_ = std::move(reason);
  metrics_->ready.Set(not_ready_reason_.empty() && state_.load() == State::kReady ? 1 : 0);
}

void Service::BeginDrain() {
  state_.store(State::kDraining);
  metrics_->ready.Set(0);
}

int64_t Service::running_jobs() {
  std::lock_guard<std::mutex> lock(jobs_mu_);
  return static_cast<int64_t>(jobs_.size());
}

void Service::AbortAll(const ApiError& error, const std::string& finish_reason) {
  std::vector<std::shared_ptr<GenerationJob>> jobs;
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    abort_ = std::make_pair(error, finish_reason);  // jobs registered from now on end at once
    for (auto& [id, w] : jobs_) {
      if (auto j = w.lock()) jobs.push_back(std::move(j));
    }
  }
  for (auto& j : jobs) {
    j->exchange()->Post([j, error, finish_reason] { j->Abort(error, finish_reason); });
  }
}

void Service::Log(const Ctx& ctx, int status, const JobSummary* summary, bool count) {
  if (count) metrics_->http_requests.With({ctx.route, std::to_string(status)}).Inc();
  metrics_->http_in_flight.Dec();
  if (!access_log_ || !access_log_->enabled()) return;
  AccessRecord r;
  r.id = ctx.id;
  r.key_id = ctx.key_id;
  r.method = ctx.ex->request().method;
  r.path = ctx.ex->request().path;
  r.status = status;
  r.remote = ctx.ex->remote();
  r.duration_ms =
      std::chrono::duration<double, std::milli>(http::Clock::now() - ctx.ex->received_at()).count();
  if (summary) {
    r.prompt_tokens = summary->prompt_tokens;
    r.cached_tokens = summary->cached_tokens;
    r.completion_tokens = summary->completion_tokens;
    r.ttft_ms = summary->ttft_ms;
    r.finish_reason = summary->finish_reason;
  }
  access_log_->Write(r);
}

void Service::Reply(Ctx& ctx, int status, const json& body, std::vector<std::pair<std::string, std::string>> headers) {
  http::HttpResponse res;
  res.status = status;
  res.SetHeader("Content-Type", "application/json");
  res.SetHeader("X-Request-Id", ctx.id);
  for (auto& [k, v] : headers) res.SetHeader(k, v);
  res.body = Dump(body);
  ctx.ex->Respond(std::move(res));
  Log(ctx, status, nullptr);
}

void Service::ReplyError(Ctx& ctx, const ApiError& e) {
  std::vector<std::pair<std::string, std::string>> headers;
  if (e.retry_after_seconds) headers.emplace_back("Retry-After", std::to_string(*e.retry_after_seconds));
  if (e.status == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
  Reply(ctx, e.status, e.ToJson(), std::move(headers));
}

void Service::Handle(std::shared_ptr<http::Exchange> ex) {
  metrics_->http_in_flight.Inc();
  Ctx ctx{std::move(ex), "req-" + RandomHex(24), "", "other"};
  const http::HttpRequest& req = ctx.ex->request();
  if (int status = ctx.ex->transport_error()) {
    ApiError e = MakeError(status, ctx.ex->transport_error_message(), "invalid_request_error",
                           status == 413 ? "request_too_large" : status == 431 ? "header_too_large" : "invalid_request");
    ReplyError(ctx, e);
    return;
  }
  struct Route {
    const char* path;
    const char* method;
    bool prefix;
  };
  static const Route kRoutes[] = {
      {"/health", "GET", false},       {"/ready", "GET", false},
      {"/metrics", "GET", false},      {"/v1/models", "GET", false},
      {"/v1/models/", "GET", true},    {"/v1/completions", "POST", false},
      {"/v1/chat/completions", "POST", false}, {"/tokenize", "POST", false},
      {"/detokenize", "POST", false},
  };
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    const std::string_view rp(r.path);
    if (r.prefix ? (req.path.size() > rp.size() && req.path.compare(0, rp.size(), rp) == 0) : req.path == rp) {
      route = &r;
      break;
    }
  }
  if (!route) {
    ReplyError(ctx, MakeError(404, fmt::format("no route for {} {}", req.method, req.path), "not_found_error",
                              "not_found"));
    return;
  }
  ctx.route = route->prefix ? std::string(route->path) + "{id}" : route->path;
  const bool head_ok = std::string_view(route->method) == "GET" && req.method == "HEAD";
  if (req.method != route->method && !head_ok) {
    ReplyError(ctx, MakeError(405, fmt::format("{} does not allow {}; use {}", req.path, req.method, route->method),
                              "invalid_request_error", "method_not_allowed"));
    return;
  }
  const std::string_view path = route->path;
  if (path == "/health") return HandleHealth(ctx);
  if (path == "/ready") return HandleReady(ctx);
  if (path == "/metrics") return HandleMetrics(ctx);
  if (!Authorize(ctx) || !CheckReady(ctx)) return;
  if (path == "/v1/models") return HandleModels(ctx, "");
  if (path == "/v1/models/") return HandleModels(ctx, req.path.substr(path.size()));
  if (path == "/v1/completions") return HandleGenerate(ctx, Endpoint::kCompletions);
  if (path == "/v1/chat/completions") return HandleGenerate(ctx, Endpoint::kChatCompletions);
  if (path == "/tokenize") return HandleTokenize(ctx);
  if (path == "/detokenize") return HandleDetokenize(ctx);
}

bool Service::Authorize(Ctx& ctx) {
  if (key_digests_.empty()) return true;
  std::string_view auth = ctx.ex->request().Header("Authorization");
  std::string_view key;
  if (auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer ")) key = auth.substr(7);
  while (!key.empty() && key.front() == ' ') key.remove_prefix(1);
  if (!key.empty()) {
    // Compare digests, in constant time, against every key.
    const std::string digest = Sha256Hex(key);
    bool ok = false;
    for (const auto& d : key_digests_) ok |= CRYPTO_memcmp(d.data(), digest.data(), d.size()) == 0;
    if (ok) {
      ctx.key_id = KeyId(key);
      return true;
    }
  }
  ReplyError(ctx, MakeError(401,
                            key.empty() ? "missing API key: send it as \"Authorization: Bearer YOUR_KEY\""
                                        : "incorrect API key provided",
                            "authentication_error", "invalid_api_key"));
  return false;
}

bool Service::CheckReady(Ctx& ctx) {
  switch (state_.load()) {
    case State::kReady: return true;
    case State::kLoading: {
      ApiError e = MakeError(503, "the model is still loading; retry shortly", "service_unavailable", "model_loading");
      e.retry_after_seconds = 5;
      ReplyError(ctx, e);
      return false;
    }
    case State::kDraining: {
      ApiError e = MakeError(503, "the server is shutting down and accepts no new requests", "service_unavailable",
                             "server_draining");
      e.retry_after_seconds = 1;
      ReplyError(ctx, e);
      return false;
    }
  }
  return false;
}

void Service::HandleHealth(Ctx& ctx) { Reply(ctx, 200, {{"status", "ok"}}); }

void Service::HandleReady(Ctx& ctx) {
  switch (state_.load()) {
    case State::kReady: {
      std::string reason;
      {
        std::lock_guard<std::mutex> lock(not_ready_mu_);
        reason = not_ready_reason_;
      }
      if (!reason.empty()) return Reply(ctx, 503, {{"status", "not_ready"}, {"reason", reason}}, {{"Retry-After", "5"}});
      return Reply(ctx, 200, {{"status", "ready"}});
    }
    case State::kLoading: return Reply(ctx, 503, {{"status", "loading"}}, {{"Retry-After", "5"}});
    case State::kDraining: return Reply(ctx, 503, {{"status", "draining"}});
  }
}

void Service::HandleMetrics(Ctx& ctx) {
  InferenceBackend* b = backend_.load();
  if (b) {
    BackendStats s = b->Stats();
    metrics_->Refresh(&s);
  } else {
    metrics_->Refresh(nullptr);
  }
  // Count this scrape before rendering so it shows in its own output.
  metrics_->http_requests.With({ctx.route, "200"}).Inc();
  http::HttpResponse res;
  res.status = 200;
  res.SetHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  res.SetHeader("X-Request-Id", ctx.id);
  res.body = metrics_->Render();
  ctx.ex->Respond(std::move(res));
  Log(ctx, 200, nullptr, /*count=*/false);
}

void Service::HandleModels(Ctx& ctx, const std::string& model_id) {
  json m = {{"id", card_.id},
            {"object", "model"},
            {"created", card_.created},
            {"owned_by", "kvserve"},
            {"root", card_.path},
            {"parent", nullptr},
            {"max_model_len", card_.max_context_length},
            {"sha256", card_.sha256},
            {"loaded_at", IsoTime(card_.created)},
            {"load_time_seconds", card_.load_seconds}};
  if (!model_id.empty()) {
    if (model_id != card_.id) {
      ApiError e = MakeError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", model_id, card_.id),
                             "invalid_request_error", "model_not_found");
      e.param = "model";
      return ReplyError(ctx, e);
    }
    return Reply(ctx, 200, m);
  }
  Reply(ctx, 200, {{"object", "list"}, {"data", json::array({m})}});
}

std::optional<ApiError> Service::CheckLength(int64_t prompt_tokens, std::optional<int64_t> max_tokens,
                                             const std::string& max_tokens_param, const std::string& prompt_param,
                                             int64_t default_max_tokens, int32_t* effective) {
  const int64_t limit = card_.max_context_length;
  const int64_t wanted = max_tokens.value_or(1);
  if (prompt_tokens + wanted > limit) {
    ApiError e = BadRequest(
        max_tokens ? fmt::format("this request needs {} tokens ({} in the prompt + {} max_tokens) but the model's "
                                 "context length is {} tokens; shorten the prompt or lower {}",
                                 prompt_tokens + wanted, prompt_tokens, wanted, limit, max_tokens_param)
                   : fmt::format("the prompt is {} tokens but the model's context length is {} tokens, which must also "
                                 "hold at least one generated token; shorten the prompt",
                                 prompt_tokens, limit),
        prompt_tokens < limit && max_tokens ? max_tokens_param : prompt_param, "context_length_exceeded");
    e.extra["prompt_tokens"] = prompt_tokens;
    e.extra["max_tokens"] = wanted;
    e.extra["max_context_length"] = limit;
    return e;
  }
  *effective = static_cast<int32_t>(max_tokens ? *max_tokens : std::min(default_max_tokens, limit - prompt_tokens));
  return std::nullopt;
}

std::optional<ApiError> Service::Prepare(const ParsedRequest& req, std::vector<PreparedPrompt>* out) {
  InferenceBackend* b = backend_.load();
  const int32_t vocab = b->Info().vocab_size;
  if (req.endpoint == Endpoint::kChatCompletions) {
    auto text = b->ApplyChatTemplate(req.messages, req.tools, true);
    if (!text.ok()) {
      ApiError e = ErrorFromStatus(text.status());
      e.message = "cannot apply the chat template: " + e.message;
      if (e.status == 400) e.param = "messages";
      return e;
    }
    auto tokens = b->Tokenize(*text, false);
    if (!tokens.ok()) return ErrorFromStatus(tokens.status());
    PreparedPrompt p;
    p.tokens = std::move(*tokens);
    const int64_t n = static_cast<int64_t>(p.tokens.size());
    if (auto e = CheckLength(n, req.max_tokens, req.max_tokens_param, "messages", card_.max_context_length - n,
                             &p.max_tokens)) {
      return e;
    }
    out->push_back(std::move(p));
    return std::nullopt;
  }
  for (size_t i = 0; i < req.prompts.size(); ++i) {
    const PromptInput& in = req.prompts[i];
    const std::string param = req.prompts.size() > 1 ? fmt::format("prompt[{}]", i) : "prompt";
    PreparedPrompt p;
    if (in.text) {
      auto tokens = b->Tokenize(*in.text, true);
      if (!tokens.ok()) return ErrorFromStatus(tokens.status());
      p.tokens = std::move(*tokens);
      if (req.echo) p.echo_text = *in.text;
    } else {
      for (int32_t id : in.tokens) {
        if (id >= vocab) return BadRequest(fmt::format("token id {} is outside the vocabulary [0, {})", id, vocab), param);
      }
      p.tokens = in.tokens;
      if (req.echo) {
        auto text = b->Detokenize(p.tokens);
        if (!text.ok()) return ErrorFromStatus(text.status());
        p.echo_text = std::move(*text);
      }
    }
    if (p.tokens.empty()) return BadRequest("the prompt is empty (it has no tokens)", param);
    if (auto e = CheckLength(static_cast<int64_t>(p.tokens.size()), req.max_tokens, req.max_tokens_param, param, 16,
                             &p.max_tokens)) {
      return e;
    }
    out->push_back(std::move(p));
  }
  return std::nullopt;
}

void Service::HandleGenerate(Ctx& ctx, Endpoint endpoint) {
  const bool chat = endpoint == Endpoint::kChatCompletions;
  json body;
  ParsedRequest req;
  if (auto e = ParseJsonObject(ctx.ex->request().body, &body)) return ReplyError(ctx, *e);
  if (auto e = chat ? ParseChatRequest(body, &req, ctx.ex->request().body) : ParseCompletionRequest(body, &req)) {
    return ReplyError(ctx, *e);
  }
  if (req.model != card_.id) {
    ApiError e = MakeError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", req.model, card_.id),
                           "invalid_request_error", "model_not_found");
    e.param = "model";
    return ReplyError(ctx, e);
  }
  std::vector<PreparedPrompt> prompts;
  if (auto e = Prepare(req, &prompts)) return ReplyError(ctx, *e);

  // Admission: reserve one slot per sequence, or refuse.
  const int64_t need = static_cast<int64_t>(prompts.size()) * req.n;
  const int64_t bound = config_.runtime.max_concurrent_requests;
  if (need > bound) {
    return ReplyError(ctx, BadRequest(fmt::format("this request has {} sequences (prompts x n) but the server admits "
                                                  "at most {} at once (runtime.max_concurrent_requests)",
                                                  need, bound),
                                      "n"));
  }
  int64_t cur = sequences_in_flight_.load();
  do {
    if (cur + need > bound) {
      ApiError e = MakeError(429,
                             fmt::format("the server is at capacity ({} of {} sequences in flight, "
                                         "runtime.max_concurrent_requests); retry shortly",
                                         cur, bound),
                             "rate_limit_error", "rate_limit_exceeded");
      e.retry_after_seconds = 1;
      return ReplyError(ctx, e);
    }
  } while (!sequences_in_flight_.compare_exchange_weak(cur, cur + need));
  metrics_->sequences_in_flight.Inc(static_cast<double>(need));

  ctx.id = (chat ? "chatcmpl-" : "cmpl-") + RandomHex(24);
  JobEnv env;
  env.backend = backend_.load();
  env.metrics = metrics_;
  env.sequences_in_flight = &sequences_in_flight_;
  env.model_name = card_.id;
  env.timeout_seconds = config_.runtime.request_timeout_seconds;
  Ctx done_ctx = ctx;
  auto job = std::make_shared<GenerationJob>(
      env, ctx.ex, std::move(req), std::move(prompts), ctx.id, [this, done_ctx](const JobSummary& s) {
        Log(done_ctx, s.status, &s);
        std::lock_guard<std::mutex> lock(jobs_mu_);
        jobs_.erase(done_ctx.id);
      });
  std::optional<std::pair<ApiError, std::string>> abort;
  {
    std::lock_guard<std::mutex> lock(jobs_mu_);
    jobs_[ctx.id] = job;
    abort = abort_;
  }
  job->Start();
  if (abort) job->Abort(abort->first, abort->second);  // admitted just as AbortAll ran
}

void Service::HandleTokenize(Ctx& ctx) {
  json body;
  if (auto e = ParseJsonObject(ctx.ex->request().body, &body)) return ReplyError(ctx, *e);
  InferenceBackend* b = backend_.load();
  if (body.contains("model") && !body["model"].is_null() &&
      (!body["model"].is_string() || body["model"].get<std::string>() != card_.id)) {
    ApiError e = MakeError(404, fmt::format("the model '{}' does not exist; this server serves '{}'",
                                            body["model"].is_string() ? body["model"].get<std::string>() : "?", card_.id),
                           "invalid_request_error", "model_not_found");
    e.param = "model";
    return ReplyError(ctx, e);
  }
  auto get_bool = [&](const char* name, bool def, bool* out) -> bool {
    *out = def;
    if (!body.contains(name) || body[name].is_null()) return true;
    if (!body[name].is_boolean()) {
      ReplyError(ctx, BadRequest(fmt::format("'{}' must be a boolean", name), name, "invalid_type"));
      return false;
    }
    *out = body[name].get<bool>();
    return true;
  };
  const bool has_prompt = body.contains("prompt") && !body["prompt"].is_null();
  const bool has_messages = body.contains("messages") && !body["messages"].is_null();
  if (has_prompt == has_messages) {
    return ReplyError(ctx, BadRequest("give exactly one of 'prompt' (a string) or 'messages'", "prompt",
                                      "missing_required_parameter"));
  }
  bool add_special = false, return_strs = false, add_generation_prompt = true;
  if (!get_bool("add_special_tokens", has_prompt, &add_special) || !get_bool("return_token_strs", false, &return_strs) ||
      !get_bool("add_generation_prompt", true, &add_generation_prompt)) {
    return;
  }
  std::string text;
  if (has_prompt) {
    if (!body["prompt"].is_string()) return ReplyError(ctx, BadRequest("'prompt' must be a string", "prompt", "invalid_type"));
    text = body["prompt"].get<std::string>();
  } else {
    json chat = {{"model", card_.id}, {"messages", body["messages"]}};
    if (body.contains("tools")) chat["tools"] = body["tools"];
    ParsedRequest req;
    if (auto e = ParseChatRequest(chat, &req, ctx.ex->request().body)) return ReplyError(ctx, *e);
    auto rendered = b->ApplyChatTemplate(req.messages, req.tools, add_generation_prompt);
    if (!rendered.ok()) {
      ApiError e = ErrorFromStatus(rendered.status());
      e.message = "cannot apply the chat template: " + e.message;
      return ReplyError(ctx, e);
    }
    text = std::move(*rendered);
  }
  auto tokens = b->Tokenize(text, add_special);
  if (!tokens.ok()) return ReplyError(ctx, ErrorFromStatus(tokens.status()));
  json out = {{"count", tokens->size()}, {"max_model_len", card_.max_context_length}, {"tokens", *tokens}};
  if (return_strs) {
    json strs = json::array();
    for (int32_t id : *tokens) strs.push_back(b->TokenString(id));
    out["token_strs"] = strs;
  } else {
    out["token_strs"] = nullptr;
  }
  Reply(ctx, 200, out);
}

void Service::HandleDetokenize(Ctx& ctx) {
  json body;
  if (auto e = ParseJsonObject(ctx.ex->request().body, &body)) return ReplyError(ctx, *e);
  InferenceBackend* b = backend_.load();
  if (!body.contains("tokens") || !body["tokens"].is_array()) {
    return ReplyError(ctx, BadRequest("'tokens' must be an array of token ids", "tokens", "invalid_type"));
  }
  std::vector<int32_t> ids;
  const int32_t vocab = b->Info().vocab_size;
  for (size_t i = 0; i < body["tokens"].size(); ++i) {
    const json& t = body["tokens"][i];
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= vocab) {
      return ReplyError(ctx, BadRequest(fmt::format("'tokens' item {} must be a token id in [0, {})", i, vocab), "tokens"));
    }
    ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
  }
  auto text = b->Detokenize(ids);
  if (!text.ok()) return ReplyError(ctx, ErrorFromStatus(text.status()));
  Reply(ctx, 200, {{"prompt", *text}});
}

}  // namespace kvs::server
