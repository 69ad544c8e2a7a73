// ProxyRequest's preparation, on a prep thread (proxy_request.h).
#include <algorithm>

#include <fmt/format.h>

#include "api/error.h"
#include "api/prompt.h"
#include "gateway/cache_salt.h"
#include "gateway/context_policy.h"
#include "gateway/proxy_errors.h"
#include "gateway/proxy_request.h"
#include "gateway/routing.h"

namespace kvs::gateway {

ProxyRequest::ProxyRequest(ProxyHost* gw, std::shared_ptr<http::Exchange> ex, const api::ApiRoute& route,
                           Principal principal, std::string id)
    : gw_(gw),
      ex_(std::move(ex)),
      route_entry_(route),
      endpoint_(route.endpoint),
      dialect_(route.dialect),
      principal_(std::move(principal)),
      id_(std::move(id)) {}

void ProxyRequest::Prepare() {
  if (auto e = api::ParseJsonObject(ex_->request().body, &body_)) return PostError(*e);
  if (route_entry_.action == api::ApiAction::kGenerate) return PrepareGenerate();
  PrepareTokenizer();
}

void ProxyRequest::PrepareGenerate() {
  if (auto e = gw_->counter().Count(endpoint_, body_, &counted_, dialect_)) return PostError(*e);
  const api::ParsedRequest& req = counted_.req;
  stream_ = req.stream;
  client_wants_usage_ = req.include_usage;
  if (auto e = ChoosePoolsFitting()) return PostError(*e);
  if (auto e = CheckModel(counted_.req.model)) return PostError(*e);
  if (!Admit()) return;
  BuildUpstreamBody();
  deadline_ = Clock::now() + proxy_detail::ToMs(pools_.front()->config.total_timeout_seconds);
  auto self = shared_from_this();
  ex_->Post([self] { self->Begin(); });
}

// /tokenize and /detokenize: the replica's answer is the gateway's. They
// cost no generation, so they reserve no tokens; they count against the
// tenant's request rate and concurrency, and go to any pool (the smallest
// first) that has a replica of the model.
void ProxyRequest::PrepareTokenizer() {
  std::optional<std::string> model;
  if (route_entry_.action == api::ApiAction::kTokenize) {
    api::TokenizeRequest t;
    if (auto e = api::ParseTokenizeRequest(body_, &t)) return PostError(*e);
    model = t.model;
  } else {
    api::DetokenizeRequest t;
    if (auto e = api::ParseDetokenizeRequest(body_, &t)) return PostError(*e);
  }
  pools_ = gw_->router().PoolsFor(0);
  route_.tenant = principal_.tenant;
  route_.prompt_ids = &counted_.prompts;  // none: no prefix to route by
  if (model) {
    if (auto e = CheckModel(*model)) return PostError(*e);
  }
  if (!Admit()) return;
  upstream_body_ = ex_->request().body;
  deadline_ = Clock::now() + proxy_detail::ToMs(pools_.front()->config.total_timeout_seconds);
  auto self = shared_from_this();
  ex_->Post([self] { self->Begin(); });
}

// ChoosePools, with the pools' context policies (context_policy.h): the
// prompt cleaned where the chosen pool (or, for a prompt too long for every
// pool, the longest pool) says so, and an over-long prompt cut to fit the
// longest pool by its on_overflow. Each change is recounted, so routing,
// reservation and the upstream body all see the prompt the replica gets.
std::optional<api::ApiError> ProxyRequest::ChoosePoolsFitting() {
  std::optional<api::ApiError> e = ChoosePools();
  const bool overflow = e && e->code == "context_length_exceeded";
  if (e && !overflow) return e;
  const Pool& policy_pool = overflow ? *gw_->router().pools().back() : *pools_.front();
  const PoolConfig& pc = policy_pool.config;
  if (pc.clean_content) {
    const int64_t removed = CleanRequestBody(endpoint_, dialect_, &body_);
    if (removed > 0) {
      cleaned_chars_ = removed;
      gw_->metrics().content_cleaned.With({policy_pool.name()}).Inc(static_cast<double>(removed));
      counted_ = CountedRequest{};
      if (auto ce = gw_->counter().Count(endpoint_, body_, &counted_, dialect_)) return ce;
      e = ChoosePools();
    }
  }
  if (!e || e->code != "context_length_exceeded") return e;
  const OverflowPolicy policy = ParseOverflowPolicy(pc.on_overflow);
  if (policy == OverflowPolicy::kReject) return e;
  const api::ParsedRequest& req = counted_.req;
  const bool chat = endpoint_ == api::Endpoint::kChatCompletions;
  const int64_t reserve = req.max_tokens ? *req.max_tokens : chat ? pc.default_max_tokens : api::DefaultMaxTokens(false, 0, pc.max_context);
  Fitted fitted;
  if (auto fe = FitPrompt(gw_->counter(), endpoint_, dialect_, policy, pc.max_context - reserve, &body_, &counted_, &fitted)) {
    return fe;
  }
  truncated_tokens_ = fitted.dropped_tokens;
  truncation_note_ = fmt::format("prompt truncated ({}): {} -> {} tokens", OverflowPolicyName(policy),
                                 fitted.prompt_tokens_before, counted_.max_prompt_tokens);
  if (fitted.dropped_messages > 0) truncation_note_ += fmt::format(", {} messages dropped", fitted.dropped_messages);
  gw_->metrics().prompts_truncated.With({policy_pool.name(), std::string(OverflowPolicyName(policy))}).Inc();
  gw_->metrics().prompt_tokens_truncated.With({policy_pool.name()}).Inc(static_cast<double>(truncated_tokens_));
  return ChoosePools();
}

bool ProxyRequest::Admit() {
  AdmitRequest ar;
  ar.tenant = principal_.tenant;
  ar.limits = principal_.limits;
  ar.tokens = reserved_;
  ar.global_rps = gw_->config().gateway.rate_limit_per_second;
  ar.lease_id = id_;
  ar.lease_seconds = pools_.front()->config.total_timeout_seconds + 60;
  AdmitResult r = gw_->limiter().Admit(ar);
  if (!r.admitted) {
    PostError(LimitError(r));
    return false;
  }
  lease_ = r.lease;
  admitted_ = true;
  gw_->metrics().tokens_reserved.With({principal_.tenant}).Inc(static_cast<double>(reserved_));
  gw_->metrics().tenant_in_flight.With({principal_.tenant}).Inc();
  return true;
}

void ProxyRequest::PostError(const api::ApiError& e) {
  auto self = shared_from_this();
  ex_->Post([self, e] { self->FinishWithError(e); });
}

std::optional<api::ApiError> ProxyRequest::ChoosePools() {
  const api::ParsedRequest& req = counted_.req;
  const int64_t prompt = counted_.max_prompt_tokens;
  const Router& router = gw_->router();
  const int64_t largest = router.largest_context();
  const bool chat = endpoint_ == api::Endpoint::kChatCompletions;
  if (req.max_tokens) {
    max_tokens_ = *req.max_tokens;
  } else {
    // The replica's own default (api::DefaultMaxTokens) in the largest
    // context. Chat: the smallest pool whose default_max_tokens fits comes
    // first, and the choice is sent along, so the replica generates what was
    // charged. (Messages requests always have max_tokens: their parser
    // requires it.) A prompt that fills the largest context gets 1, and then
    // no pool (below).
    max_tokens_ = api::DefaultMaxTokens(chat, prompt, largest);
    if (chat) {
      for (const auto& p : router.pools()) {
        if (prompt + p->config.default_max_tokens <= p->config.max_context) {
          max_tokens_ = p->config.default_max_tokens;
          break;
        }
      }
      inject_max_tokens_ = true;
    }
  }
  const int64_t wanted = std::max<int64_t>(max_tokens_, 1);
  pools_ = router.PoolsFor(prompt + wanted);
  if (pools_.empty()) {
    const bool responses = dialect_ == api::Dialect::kResponses;
    const std::string prompt_param = responses ? "input" : chat ? "messages" : "prompt";
    const std::string max_param = !req.max_tokens ? "" : responses ? "max_output_tokens" : req.max_tokens_param;
    return ContextTooLong(prompt_param, max_param, prompt, wanted, largest);
  }
  const int64_t sequences = static_cast<int64_t>(counted_.prompts.size()) * req.n;
  reserved_ = counted_.total_prompt_tokens + sequences * max_tokens_;
  route_.prompt_tokens = prompt;
  route_.cost = reserved_;
  route_.tenant = principal_.tenant;
  route_.prompt_ids = &counted_.prompts;
  // The replica's prefix-cache namespace: the tenant's own unless the
  // deployment shares one (gateway.prefix_cache_scope). Routing hashes
  // blocks with the salt the replica will see.
  isolate_cache_ = gw_->config().gateway.prefix_cache_scope == "tenant";
  route_.cache_salt = isolate_cache_ ? TenantCacheSalt(principal_.tenant, req.cache_salt) : req.cache_salt;
  return std::nullopt;
}

std::optional<api::ApiError> ProxyRequest::CheckModel(const std::string& model) {
  std::vector<std::string> served;
  for (Pool* p : pools_) {
    for (Replica* r : p->replicas.Listed()) {
      for (auto& m : r->models()) {
        if (std::find(served.begin(), served.end(), m) == served.end()) served.push_back(std::move(m));
      }
    }
  }
  // Nothing known yet (no replica answered): the replica will judge.
  if (served.empty() || std::find(served.begin(), served.end(), model) != served.end()) return std::nullopt;
  return ModelNotFound(model, served);
}

api::ApiError ProxyRequest::LimitError(const AdmitResult& r) {
  gw_->metrics().rate_limited.With({principal_.tenant, LimitReasonName(r.reason)}).Inc();
  gw_->metrics().rate_limited_tokens.With({principal_.tenant}).Inc(static_cast<double>(reserved_));
  error_note_ = fmt::format("rate_limited:{}", LimitReasonName(r.reason));
  gw_->RememberRefusal(principal_.tenant, r);
  return RateLimited(r, principal_.limits, principal_.tenant, gw_->config().gateway.rate_limit_per_second, reserved_);
}

void ProxyRequest::BuildUpstreamBody() {
  // The tenant's priority class bounds the request's (lower runs first).
  const int64_t tenant_priority = principal_.limits.priority;
  const bool raise_priority = tenant_priority > counted_.req.priority;
  // Only chat and completions streams report usage on request (the other
  // dialects always end with it).
  const bool ask_usage = stream_ && openai();
  // A cleaned or truncated body is the one the replica must see.
  const bool rewrite = ask_usage || inject_max_tokens_ || raise_priority || isolate_cache_ || cleaned_chars_ > 0 ||
                       truncated_tokens_ > 0;
  if (!rewrite) {
    upstream_body_ = ex_->request().body;
    return;
  }
  // The client's body, parsed once (in its key order), is edited in place;
  // every dialect's parser reads priority and cache_salt as chat's does.
  api::Json& j = body_;
  if (inject_max_tokens_) j[dialect_ == api::Dialect::kResponses ? "max_output_tokens" : "max_tokens"] = max_tokens_;
  if (raise_priority) j["priority"] = tenant_priority;
  if (isolate_cache_) j["cache_salt"] = route_.cache_salt;
  if (ask_usage) {
    if (!j.contains("stream_options") || !j["stream_options"].is_object()) {
      j["stream_options"] = nlohmann::ordered_json::object();
    }
    j["stream_options"]["include_usage"] = true;
  }
  upstream_body_ = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace kvs::gateway
