#include "server/service.h"

#include <charconv>
#include <chrono>
#include <tuple>
#include <ctime>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <spdlog/spdlog.h>

#include "api/auth.h"
#include "api/prompt.h"
#include "api/routes.h"
#include "base/strings.h"
#include "metrics/status_page.h"
#include "base/sha256.h"
#include "base/random_id.h"
#include "kvcache/cache_events_json.h"

namespace kvs::server {

using nlohmann::json;
using api::ApiError;
using api::BadRequest;
using api::ErrorFromStatus;
using api::MakeError;

struct Service::Ctx {
  std::shared_ptr<http::Exchange> ex;
  std::string id;
  std::string key_id;
  std::string route;       // metric label: the route template, or "other"
  std::string key_digest;  // SHA-256 of the request's API key ("" without keys)
};

namespace {

std::string IsoTime(int64_t unix_seconds) {
  std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

Service::Service(ServeConfig config, std::vector<std::string> api_keys, ServerMetrics* metrics, AccessLog* access_log)
    : config_(std::move(config)),
      max_sequences_(config_.runtime.max_concurrent_requests),
      request_timeout_seconds_(config_.runtime.request_timeout_seconds),
      prep_(static_cast<int>(config_.server.prep_threads), static_cast<int>(config_.server.prep_queue)),
      metrics_(metrics),
      access_log_(access_log),
      status_board_(metrics) {
  SetApiKeys(api_keys);
}

void Service::SetRequestLimits(int64_t max_concurrent_requests, double request_timeout_seconds) {
  KVS_CHECK(max_concurrent_requests >= 1 && max_concurrent_requests <= config_.runtime.max_concurrent_requests);
  max_sequences_.store(max_concurrent_requests);
  request_timeout_seconds_.store(request_timeout_seconds);
}

void Service::SetApiKeys(const std::vector<std::string>& api_keys) {
  auto digests = std::make_shared<std::vector<std::string>>();
  for (const auto& k : api_keys) digests->push_back(Sha256Hex(k));
  std::atomic_store(&key_digests_, std::shared_ptr<const std::vector<std::string>>(std::move(digests)));
}

Service::~Service() { prep_.Stop(); }

std::string Service::KeyId(std::string_view key) { return "k-" + Sha256Hex(key).substr(0, 8); }

std::string Service::PrefixCacheNamespace(std::string_view key_digest, std::string_view cache_salt) {
  return kvcache::PrefixCacheNamespace(key_digest, cache_salt);
}

void Service::SetReady(InferenceBackend* backend, ModelCard card) {
  metrics_->model_info.With({card.id, card.sha256}).Set(1);
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

namespace {

// A job's token counts, time to first token and finish reason into a status
// page or access log record (both name these fields alike).
template <typename Record>
void CopyJobSummary(const JobSummary& s, Record* r) {
  r->prompt_tokens = s.prompt_tokens;
  r->cached_tokens = s.cached_tokens;
  r->completion_tokens = s.completion_tokens;
  r->ttft_ms = s.ttft_ms;
  r->finish_reason = s.finish_reason;
}

}  // namespace

void Service::Log(const Ctx& ctx, int status, const JobSummary* summary, bool count) {
  if (count) metrics_->http_requests.With({ctx.route, std::to_string(status)}).Inc();
  metrics_->CountError(status, summary ? summary->finish_reason : std::string());
  metrics_->http_in_flight.Dec();
  const double duration_ms =
      std::chrono::duration<double, std::milli>(http::Clock::now() - ctx.ex->received_at()).count();
  if (summary || ctx.route == "/v1/completions" || ctx.route == "/v1/chat/completions" || ctx.route == "/v1/responses" ||
      ctx.route == "/v1/messages") {
    RecentRequest rr;
    rr.time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    rr.id = ctx.id;
    rr.path = ctx.route;
    rr.status = status;
    rr.duration_ms = duration_ms;
    if (summary) CopyJobSummary(*summary, &rr);
    status_board_.Record(std::move(rr));
  }
  if (!access_log_ || !access_log_->enabled()) return;
  AccessRecord r;
  r.id = ctx.id;
  r.key_id = ctx.key_id;
  r.method = ctx.ex->request().method;
  r.path = ctx.ex->request().path;
  r.status = status;
  r.remote = ctx.ex->remote();
  for (char c : ctx.ex->request().Header("X-Request-Id").substr(0, 128)) {
    if (c > ' ' && c < 127) r.request_id_in += c;
  }
  r.duration_ms = duration_ms;
  if (summary) CopyJobSummary(*summary, &r);
  access_log_->Write(r);
}

void Service::Reply(Ctx& ctx, int status, const json& body, std::vector<std::pair<std::string, std::string>> headers) {
  if (!ctx.ex->OnStrand()) {
    // From a prep thread: the response is written on the exchange's strand.
    ctx.ex->Post([this, ctx, status, body, headers]() mutable { Reply(ctx, status, body, std::move(headers)); });
    return;
  }
  http::HttpResponse res;
  res.status = status;
  res.SetHeader("Content-Type", "application/json");
  res.SetHeader("X-Request-Id", ctx.id);
  for (auto& [k, v] : headers) res.SetHeader(k, v);
  res.body = api::Dump(body);
  ctx.ex->Respond(std::move(res));
  Log(ctx, status, nullptr);
}

void Service::ReplyError(Ctx& ctx, const ApiError& e) {
  // Anthropic's clients read errors in Anthropic's shape.
  Reply(ctx, e.status, api::ErrorJson(api::ErrorDialect(ctx.route), e), api::ErrorHeaders(e));
}

void Service::Handle(std::shared_ptr<http::Exchange> ex) {
  metrics_->http_in_flight.Inc();
  Ctx ctx{std::move(ex), "req-" + RandomHex(24), "", "other", ""};
  const http::HttpRequest& req = ctx.ex->request();
  if (int status = ctx.ex->transport_error()) {
    ReplyError(ctx, api::TransportError(status, ctx.ex->transport_error_message()));
    return;
  }
  // The operator's routes, then the public API (api/routes.h), which the
  // gateway serves too.
  static const std::vector<api::Route> kRoutes = api::RouteTable({
      {"/", "GET", false},
      {"/status", "GET", false},
      {"/health", "GET", false},
      {"/ready", "GET", false},
      {"/metrics", "GET", false},
      {"/v1/cache/blocks", "GET", false},
  });
  const api::RouteMatch match = api::MatchRoute(kRoutes, req.method, req.path);
  const api::Route* route = match.route;
  if (route) ctx.route = api::RouteLabel(route);
  if (match.error) {
    ReplyError(ctx, *match.error);
    return;
  }
  const std::string_view path = route->path;
  if (path == "/health") return HandleHealth(ctx);
  if (path == "/ready") return HandleReady(ctx);
  if (path == "/metrics") return HandleMetrics(ctx);
  if (path == "/") return HandleStatusPage(ctx);
  if (path == "/status") return HandleStatus(ctx);
  if (!Authorize(ctx) || !CheckReady(ctx)) return;
  if (path == "/v1/cache/blocks") return HandleCacheBlocks(ctx);
  const api::ApiRoute* api_route = api::FindApiRoute(*route);
  KVS_CHECK(api_route != nullptr);  // every other route of the table is the API's
  switch (api_route->action) {
    case api::ApiAction::kModels:
      return HandleModels(ctx, route->prefix ? req.path.substr(path.size()) : "");
    // Everything below parses, renders or tokenizes: off the I/O threads.
    case api::ApiAction::kGenerate: {
      const api::Endpoint endpoint = api_route->endpoint;
      const api::Dialect dialect = api_route->dialect;
      return OnPrepPool(ctx, [this, endpoint, dialect](Ctx& c) { HandleGenerate(c, endpoint, dialect); });
    }
    case api::ApiAction::kTokenize: return OnPrepPool(ctx, [this](Ctx& c) { HandleTokenize(c); });
    case api::ApiAction::kDetokenize: return OnPrepPool(ctx, [this](Ctx& c) { HandleDetokenize(c); });
  }
}

void Service::OnPrepPool(Ctx& ctx, std::function<void(Ctx&)> work) {
  auto c = std::make_shared<Ctx>(ctx);
  if (prep_.TrySubmit([c, work = std::move(work)] { work(*c); })) return;
  ApiError e = MakeError(503,
                         fmt::format("the server is busy preparing other requests ({} threads, {} waiting: "
                                     "server.prep_threads, server.prep_queue); retry shortly",
                                     prep_.threads(), prep_.max_queued()),
                         "service_unavailable", "server_overloaded");
  e.retry_after_seconds = 1;
  ReplyError(ctx, e);
}

bool Service::Authorize(Ctx& ctx) {
  const std::shared_ptr<const std::vector<std::string>> digests = std::atomic_load(&key_digests_);
  if (digests->empty()) return true;
  struct Caller {
    std::string key_id;
    std::string digest;
  };
  const auto lookup = [&](std::string_view key) -> std::optional<Caller> {
    // Compare digests, in constant time, against every key.
    const std::string digest = Sha256Hex(key);
    bool ok = false;
    for (const auto& d : *digests) ok |= CRYPTO_memcmp(d.data(), digest.data(), d.size()) == 0;
    if (!ok) return std::nullopt;
    return Caller{KeyId(key), digest};
  };
  auto auth = api::Authenticate(api::KeyHeaders::Of(ctx.ex->request()), lookup);
  if (!auth.ok()) {
    ReplyError(ctx, *auth.error);
    return false;
  }
  ctx.key_id = std::move(auth.identity->key_id);
  ctx.key_digest = std::move(auth.identity->digest);
  return true;
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

void Service::RefreshMetrics() {
  metrics_->prep_running.Set(static_cast<double>(prep_.busy()));
  metrics_->prep_waiting.Set(static_cast<double>(prep_.queued()));
  InferenceBackend* b = backend_.load();
  if (b) {
    BackendStats s = b->Stats();
    metrics_->Refresh(&s);
  } else {
    metrics_->Refresh(nullptr);
  }
}

void Service::SampleStatus() {
  RefreshMetrics();
  status_board_.Sample();
}

void Service::HandleStatusPage(Ctx& ctx) {
  http::HttpResponse res;
  res.status = 200;
  res.SetHeader("Content-Type", "text/html; charset=utf-8");
  res.SetHeader("Cache-Control", "no-cache");
  res.SetHeader("X-Request-Id", ctx.id);
  res.body = std::string(metrics::StatusPageHtml());
  ctx.ex->Respond(std::move(res));
  Log(ctx, 200, nullptr);
}

void Service::HandleStatus(Ctx& ctx) {
  RefreshMetrics();
  StatusIdentity id;
  const State st = state_.load();
  id.state = st == State::kReady ? "ready" : st == State::kLoading ? "loading" : "draining";
  if (backend_.load()) {  // card_ is written before the backend is published
    id.model_id = card_.id;
    id.model_path = card_.path;
    id.sha256 = card_.sha256;
    id.max_context_length = card_.max_context_length;
  }
  Reply(ctx, 200, status_board_.ToJson(id), {{"Cache-Control", "no-cache"}});
}

void Service::HandleMetrics(Ctx& ctx) {
  RefreshMetrics();
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
      ApiError e = MakeError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", api::Clip(model_id, 64), card_.id),
                             "invalid_request_error", "model_not_found");
      e.param = "model";
      return ReplyError(ctx, e);
    }
    return Reply(ctx, 200, m);
  }
  Reply(ctx, 200, {{"object", "list"}, {"data", json::array({m})}});
}

namespace {

// The value of `name` in a query string ("a=1&b=2"); nullopt when absent.
std::optional<std::string_view> QueryValue(std::string_view query, std::string_view name) {
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    const size_t eq = part.find('=');
    if (part.substr(0, eq) == name) return eq == std::string_view::npos ? std::string_view() : part.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// An unsigned integer query parameter in `base`; false when malformed.
bool QueryUint(std::string_view query, std::string_view name, int base, uint64_t* out) {
  auto v = QueryValue(query, name);
  if (!v) return true;
  const char* end = v->data() + v->size();
  auto [p, ec] = std::from_chars(v->data(), end, *out, base);
  return ec == std::errc() && p == end && !v->empty();
}

}  // namespace

// The prefix cache's block hashes for a router: events after `since` of log
// `epoch`, or (unknown epoch, too far behind) the whole held set, in the
// format of kvcache/cache_events_json.h (with a sliding-window model, also
// the window group's).
void Service::HandleCacheBlocks(Ctx& ctx) {
  InferenceBackend* b = backend_.load();
  const std::string& target = ctx.ex->request().target;
  const size_t q = target.find('?');
  const std::string_view query = q == std::string::npos ? std::string_view() : std::string_view(target).substr(q + 1);
  uint64_t epoch = 0, since = 0, limit = 10000;
  for (const auto& [name, base, out] : {std::tuple{"epoch", 16, &epoch}, {"since", 10, &since}, {"limit", 10, &limit}}) {
    if (!QueryUint(query, name, base, out)) {
      ApiError e = BadRequest(fmt::format("query parameter '{}' must be an unsigned integer{}", name,
                                          base == 16 ? " in hex digits" : ""),
                              name, "invalid_value");
      return ReplyError(ctx, e);
    }
  }
  limit = std::clamp<uint64_t>(limit, 1, 100000);
  auto page = b ? b->CacheEvents(epoch, since, limit) : std::nullopt;
  if (!page) {
    return ReplyError(ctx, MakeError(404, "this server publishes no prefix-cache blocks (prefix caching is off)",
                                     "not_found_error", "prefix_cache_disabled"));
  }
  const engine::EngineStats stats = b->Stats().engine;
  const json out = kvcache::CacheBlocksJson(*page, stats.block_size, stats.window, stats.kv_disk_enabled);
  Reply(ctx, 200, out);
}

namespace {

// The OpenAI error for a prompt that engine::ValidateRequest refused.
ApiError RequestError(const Status& st, const std::string& prompt_param, const api::ParsedRequest& req,
                      int64_t prompt_tokens, int64_t max_tokens, int64_t limit) {
  if (st.code() == StatusCode::kOutOfRange) {
    // Which field to shorten: the prompt when it alone leaves no room.
    const bool blame_max_tokens = req.max_tokens.has_value() && prompt_tokens < limit;
    const std::string param = blame_max_tokens ? req.max_tokens_param : prompt_param;
    ApiError e = BadRequest(fmt::format("{}; shorten the prompt or lower {}", st.message(), req.max_tokens_param), param,
                            "context_length_exceeded");
    e.extra["prompt_tokens"] = prompt_tokens;
    e.extra["max_tokens"] = max_tokens;
    e.extra["max_context_length"] = limit;
    return e;
  }
  ApiError e = ErrorFromStatus(st);
  // ValidateRequest's messages start with what is wrong: a prompt token or
  // a stop token id (every other sampling field was range-checked when the
  // body was parsed).
  e.param = st.message().rfind("stop token id", 0) == 0       ? "stop_token_ids"
            : st.message().rfind("logit_bias", 0) == 0        ? "logit_bias"
                                                              : prompt_param;
  return e;
}

}  // namespace

std::optional<ApiError> Service::CompileConstraint(const api::ParsedRequest& req, InferenceBackend* b,
                                                   grammar::ReasoningStart reasoning_start,
                                                   std::shared_ptr<const grammar::CompiledGrammar>* out) {
  using TC = api::ParsedRequest::ToolChoice;
  const bool force_call = req.tool_choice == TC::kRequired || req.tool_choice == TC::kNamed;
  if (!req.constraint && !force_call) return std::nullopt;
  const std::string param = force_call ? "tool_choice" : req.constraint_param;
  std::shared_ptr<const grammar::Vocabulary> vocab = b->GrammarVocabulary();
  if (!vocab) {
    return api::BadRequest(fmt::format("'{}' is not supported: this model cannot constrain its output", param), param,
                           "unsupported_parameter");
  }
  std::shared_ptr<const grammar::Grammar> constraint = req.constraint;
  if (force_call) {
    // A reply that is one (or, with parallel_tool_calls, several) calls in
    // the model's own syntax, arguments valid against the function's schema.
    const grammar::ToolCallFormat format = b->ToolCallFormat();
    if (format == grammar::ToolCallFormat::kNone) {
      return api::BadRequest("'tool_choice' cannot force a call: the model's chat template shows no tool-call syntax",
                             param, "unsupported_parameter");
    }
    grammar::ToolChoice choice;
    choice.mode = req.tool_choice == TC::kNamed ? grammar::ToolChoice::Mode::kNamed : grammar::ToolChoice::Mode::kRequired;
    choice.name = req.tool_choice_name;
    auto g = grammar::ToolCallGrammar(format, req.tools, choice, req.parallel_tool_calls);
    if (!g.ok()) return api::BadRequest(fmt::format("'tool_choice' cannot be served: {}", g.status().message()), param);
    constraint = std::make_shared<const grammar::Grammar>(std::move(g).value());
  }
  if (reasoning_start != grammar::ReasoningStart::kContent) {
    // The reasoning section stays free: the constraint starts after its end
    // tag (and binds the whole reply when the model does not think).
    auto g = grammar::WithReasoningSection(*constraint, b->ReasoningFormat(), reasoning_start, force_call);
    if (!g.ok()) return api::BadRequest(fmt::format("'{}' cannot be served: {}", param, g.status().message()), param);
    constraint = std::make_shared<const grammar::Grammar>(std::move(g).value());
  }
  const std::string key = constraint->ToGbnf();
  {
    std::lock_guard<std::mutex> lock(grammars_mu_);
    if (grammars_vocab_ == vocab.get()) {
      if (auto it = grammars_.find(key); it != grammars_.end()) {
        *out = it->second;
        return std::nullopt;
      }
    }
  }
  // Compiled outside the lock (bounded by GrammarLimits::max_compile_work);
  // two requests with a new grammar may both compile it, one result is kept.
  auto compiled = grammar::CompiledGrammar::Compile(*constraint, vocab);
  if (!compiled.ok()) {
    return api::BadRequest(fmt::format("'{}' cannot be served: {}", param, compiled.status().message()), param);
  }
  *out = *compiled;
  std::lock_guard<std::mutex> lock(grammars_mu_);
  if (grammars_vocab_ != vocab.get() || grammars_.size() >= kMaxCachedGrammars) {
    grammars_.clear();
    grammars_vocab_ = vocab.get();
  }
  grammars_.emplace(key, *out);
  return std::nullopt;
}

namespace {

// The backend as prompt preparation (api/prompt.h) sees it: EngineBackend
// renders with the model's template (api::RenderChatPrompt), a test fake
// with its own.
class BackendPromptModel final : public api::PromptModel {
 public:
  explicit BackendPromptModel(InferenceBackend* b) : b_(b) {}
  StatusOr<std::vector<int32_t>> Tokenize(std::string_view text, bool add_special) const override {
    return b_->Tokenize(text, add_special);
  }
  StatusOr<api::ChatPrompt> RenderChat(const api::Json& messages, const api::Json& tools, bool add_generation_prompt,
                                       const api::Json& template_kwargs) const override {
    return b_->RenderChatPrompt(messages, tools, add_generation_prompt, template_kwargs);
  }

 private:
  InferenceBackend* b_;
};

}  // namespace

std::optional<ApiError> Service::Prepare(const api::ParsedRequest& req, std::vector<PreparedPrompt>* out) {
  InferenceBackend* b = backend_.load();
  const engine::RequestLimits& limits = b->Info().limits;
  const int64_t limit = limits.max_context_length;
  const bool chat = req.endpoint == api::Endpoint::kChatCompletions;
  // Parsed -> rendered -> tokenized as the gateway counts it (api/prompt.h).
  std::vector<api::Prompt> prompts;
  if (auto e = api::PreparePrompt(req, BackendPromptModel(b), &prompts)) return e;
  grammar::ReasoningStart reasoning_start = grammar::ReasoningStart::kContent;
  if (chat) {
    // Whether the reply starts inside a reasoning section the prompt opened.
    reasoning_start = grammar::ReasoningStartOf(b->ReasoningFormat(), *prompts[0].text);
  }
  std::shared_ptr<const grammar::CompiledGrammar> grammar;
  if (auto e = CompileConstraint(req, b, reasoning_start, &grammar)) return e;
  for (size_t i = 0; i < prompts.size(); ++i) {
    api::Prompt& in = prompts[i];
    const std::string param = chat ? "messages" : prompts.size() > 1 ? fmt::format("prompt[{}]", i) : "prompt";
    PreparedPrompt p;
    const auto n = static_cast<int64_t>(in.tokens.size());
    const int64_t max_tokens = req.max_tokens.value_or(api::DefaultMaxTokens(chat, n, limit));
    engine::Request check;
    check.prompt_token_ids = std::move(in.tokens);
    check.sampling = req.sampling;
    check.sampling.max_tokens = static_cast<int32_t>(std::min<int64_t>(max_tokens, INT32_MAX));
    check.grammar = grammar;
    check.cache_salt = req.cache_salt;
    check.priority = req.priority;
    // The one validation: the backend and its engine trust the result.
    auto validated = engine::ValidatedRequest::Validate(std::move(check), limits);
    if (!validated.ok()) return RequestError(validated.status(), param, req, n, max_tokens, limit);
    p.request = std::move(*validated);
    p.reasoning_start = reasoning_start;
    if (req.echo) {
      // The prompt's text (chat: the rendered template); a token-id prompt's
      // decoded once its ids are known to be in the vocabulary.
      if (in.text) {
        p.echo_text = std::move(*in.text);
      } else {
        auto text = b->Detokenize(p.tokens());
        if (!text.ok()) return ErrorFromStatus(text.status());
        p.echo_text = std::move(*text);
      }
    }
    out->push_back(std::move(p));
  }
  return std::nullopt;
}

void Service::HandleGenerate(Ctx& ctx, api::Endpoint endpoint, api::Dialect dialect) {
  const bool chat = endpoint == api::Endpoint::kChatCompletions;
  api::Json body;
  api::ParsedRequest req;
  if (auto e = api::ParseJsonObject(ctx.ex->request().body, &body)) return ReplyError(ctx, *e);
  if (auto e = api::ParseGenerateRequest(endpoint, dialect, body, &req)) return ReplyError(ctx, *e);
  if (req.model != card_.id) {
    ApiError e = MakeError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", api::Clip(req.model, 64), card_.id),
                           "invalid_request_error", "model_not_found");
    e.param = "model";
    return ReplyError(ctx, e);
  }
  req.cache_salt = PrefixCacheNamespace(ctx.key_digest, req.cache_salt);
  auto prompts = std::make_shared<std::vector<PreparedPrompt>>();
  if (auto e = Prepare(req, prompts.get())) return ReplyError(ctx, *e);
  auto parsed = std::make_shared<api::ParsedRequest>(std::move(req));
  ctx.ex->Post([this, ctx, chat, parsed, prompts]() mutable { StartGeneration(ctx, chat, std::move(*parsed), std::move(*prompts)); });
}

void Service::StartGeneration(Ctx& ctx, bool chat, api::ParsedRequest req, std::vector<PreparedPrompt> prompts) {
  // Admission: reserve one slot per sequence, or refuse.
  const int64_t need = static_cast<int64_t>(prompts.size()) * req.n;
  const int64_t bound = max_sequences_.load();
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

  ctx.id = (req.dialect == api::Dialect::kResponses   ? "resp_"
            : req.dialect == api::Dialect::kAnthropic ? "msg_"
            : chat                                    ? "chatcmpl-"
                                                      : "cmpl-") +
           RandomHex(24);
  JobEnv env;
  env.backend = backend_.load();
  env.metrics = metrics_;
  env.sequences_in_flight = &sequences_in_flight_;
  env.model_name = card_.id;
  env.timeout_seconds = request_timeout_seconds_.load();
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
  api::Json body;
  api::TokenizeRequest req;
  if (auto e = api::ParseJsonObject(ctx.ex->request().body, &body)) return ReplyError(ctx, *e);
  if (auto e = api::ParseTokenizeRequest(body, &req)) return ReplyError(ctx, *e);
  if (req.model && *req.model != card_.id) {
    ApiError e = MakeError(404, fmt::format("the model '{}' does not exist; this server serves '{}'", api::Clip(*req.model, 64), card_.id),
                           "invalid_request_error", "model_not_found");
    e.param = "model";
    return ReplyError(ctx, e);
  }
  InferenceBackend* b = backend_.load();
  StatusOr<std::vector<int32_t>> tokens = std::vector<int32_t>{};
  if (req.prompt) {
    tokens = b->Tokenize(*req.prompt, req.add_special_tokens);
  } else {
    // Messages count exactly as a chat request with them would.
    auto rendered =
        b->RenderChatPrompt(req.chat.messages, req.chat.tools, req.add_generation_prompt, req.chat.template_kwargs);
    if (!rendered.ok()) {
      ApiError e = ErrorFromStatus(rendered.status());
      e.message = "cannot apply the chat template: " + e.message;
      return ReplyError(ctx, e);
    }
    tokens = std::move(rendered->tokens);
  }
  if (!tokens.ok()) return ReplyError(ctx, ErrorFromStatus(tokens.status()));
  json out = {{"count", tokens->size()}, {"max_model_len", card_.max_context_length}, {"tokens", *tokens}};
  if (req.return_token_strs) {
    json strs = json::array();
    for (int32_t id : *tokens) strs.push_back(b->TokenString(id));
    out["token_strs"] = strs;
  } else {
    out["token_strs"] = nullptr;
  }
  Reply(ctx, 200, out);
}

void Service::HandleDetokenize(Ctx& ctx) {
  api::Json body;
  api::DetokenizeRequest req;
  if (auto e = api::ParseJsonObject(ctx.ex->request().body, &body)) return ReplyError(ctx, *e);
  if (auto e = api::ParseDetokenizeRequest(body, &req)) return ReplyError(ctx, *e);
  auto text = backend_.load()->Detokenize(req.tokens);
  if (!text.ok()) {
    ApiError e = ErrorFromStatus(text.status());
    e.param = "tokens";
    return ReplyError(ctx, e);
  }
  Reply(ctx, 200, {{"prompt", *text}});
}

}  // namespace kvs::server
