#include "gateway/gateway.h"

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "api/auth.h"
#include "api/error.h"
#include "api/routes.h"
#include "base/file_stamp.h"
#include "base/random_id.h"
#include "base/signal_block.h"
#include "gateway/proxy.h"
#include "gateway/proxy_errors.h"
#include "gateway/redis_limiter.h"
#include "metrics/status_page.h"

namespace kvs::gateway {

namespace {

using nlohmann::json;

void ReplyJson(const std::shared_ptr<http::Exchange>& ex, int status, const json& body,
               std::vector<std::pair<std::string, std::string>> headers = {}) {
  http::HttpResponse res;
  res.status = status;
  res.SetHeader("Content-Type", "application/json");
  for (auto& [k, v] : headers) res.SetHeader(k, v);
  res.body = api::Dump(body);
  ex->Respond(std::move(res));
}

std::chrono::milliseconds Seconds(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

// The public port's routes: the probes, then the replicas' whole public API
// (api/routes.h), every route of which needs a key.
const std::vector<api::Route>& PublicRoutes() {
  static const std::vector<api::Route> routes = api::RouteTable({{"/health", "GET", false}, {"/ready", "GET", false}});
  return routes;
}
// The admin listener's: no key, not reachable from the public network.
constexpr api::Route kAdminRoutes[] = {
    {"/", "GET", false}, {"/status", "GET", false}, {"/metrics", "GET", false},
    {"/health", "GET", false}, {"/ready", "GET", false},
};

bool IsPublicProbe(std::string_view path) { return path == "/health" || path == "/ready"; }


http::TlsServerFiles PublicTlsFiles(const GatewayConfig& cfg) {
  return {cfg.gateway.tls_cert_file, cfg.gateway.tls_key_file, "gateway.tls_cert_file", "gateway.tls_key_file"};
}

}  // namespace

StatusOr<Gateway::Parts> Gateway::BuildParts(const GatewayConfig& cfg) {
  Parts p;
  KVS_ASSIGN_OR_RETURN(p.counter, PromptCounter::Load(cfg.model.path, cfg.model.chat_template));
  auto auth = Authenticator::Open(cfg.gateway.key_file);
  if (!auth.ok()) return auth.status().WithContext("gateway.key_file");
  p.auth = std::move(*auth);
  auto audit = AuditLog::Open(cfg.logging.audit_log);
  if (!audit.ok()) return audit.status();
  p.audit = std::move(*audit);
  for (const PoolConfig& pc : cfg.pools) {
    if (pc.warm_prompts_file.empty()) continue;
    auto prompts = LoadWarmPrompts(pc.warm_prompts_file, cfg.gateway.prefix_cache_scope == "tenant");
    if (!prompts.ok()) return prompts.status().WithContext("pool " + pc.name + ": warm_prompts_file");
    p.warm_prompts[pc.name] = std::move(*prompts);
  }
  // A certificate that does not load stops start-up here, as a
  // configuration error (the listener loads it again when it starts).
  if (!cfg.gateway.tls_cert_file.empty()) KVS_RETURN_IF_ERROR(http::MakeServerTlsContext(PublicTlsFiles(cfg)).status());
  if (cfg.gateway.shared_state.empty()) {
    p.limiter = std::make_unique<LocalRateLimiter>();
  } else {
    RedisLimiterOptions o;
    auto address = RedisAddress::Parse(cfg.gateway.shared_state);
    if (!address.ok()) return address.status().WithContext("gateway.shared_state");
    o.address = std::move(*address);
    if (const std::string& env = cfg.gateway.shared_state_password_env; !env.empty()) {
      const char* pw = std::getenv(env.c_str());
      if (pw == nullptr || *pw == '\0') {
        return InvalidArgument("gateway.shared_state_password_env: the environment variable {} is not set", env);
      }
      o.address.password = pw;
    }
    if (o.address.url.tls) {
      auto tls = http::MakeClientTlsContext(cfg.gateway.shared_state_tls_ca_file);
      if (!tls.ok()) return tls.status().WithContext("gateway.shared_state_tls_ca_file");
      o.tls = std::move(*tls);
    }
    o.timeout = Seconds(cfg.gateway.shared_state_timeout_seconds);
    o.failure = cfg.gateway.shared_state_failure;
    p.limiter = std::make_unique<RedisRateLimiter>(o);
  }
  return p;
}

Gateway::Gateway(GatewayConfig cfg, Parts parts)
    : cfg_(std::move(cfg)), parts_(std::move(parts)), status_board_(&metrics_) {
  if (auto t = TrustedProxies::Parse(cfg_.gateway.trusted_proxies); t.ok()) trusted_proxies_ = std::move(*t);  // validated
  router_ = std::make_unique<Router>(cfg_.pools, nullptr, cfg_.gateway.health_interval_seconds);
  if (auto* redis = dynamic_cast<RedisRateLimiter*>(parts_.limiter.get())) {
    redis->set_error_counter(&metrics_.shared_state_errors);
  }
  for (Replica* r : router_->AllReplicas()) OnReplicaListed(r);
  RestoreState();
  for (const auto& p : router_->pools()) {
    metrics_.retries.With({p->name()});
    metrics_.pool_replicas.With({p->name()}).Set(static_cast<double>(p->replicas.num_listed()));
  }
}

void Gateway::OnReplicaListed(Replica* r) {
  // Every bounded label set is exported from the start (at 0): Prometheus'
  // increase() cannot see a counter's first increment when the series only
  // appears with it, so the first ejection would not fire the alert.
  metrics_.registry.SetHidden("replica", r->name(), false);
  metrics_.replica_healthy.With({r->pool(), r->name()}).Set(0);
  metrics_.replica_outstanding_tokens.With({r->pool(), r->name()}).Set(0);
  for (const char* cause : {"probe", "failures"}) metrics_.ejections.With({r->pool(), r->name(), cause});
  metrics_.readmissions.With({r->pool(), r->name()});
  if (parts_.warm_prompts.count(r->pool())) {
    r->set_warm_on_join(true);
    metrics_.warmups_started.With({r->pool(), r->name()});
    for (const char* outcome : {"completed", "failed"}) metrics_.warmups_finished.With({r->pool(), r->name(), outcome});
    for (const char* outcome : {"ok", "error"}) metrics_.warm_prompts.With({r->pool(), r->name(), outcome});
    metrics_.replica_warming.With({r->pool(), r->name()}).Set(0);
  }
}

void Gateway::RestoreState() {
  for (const auto& p : router_->pools()) {
    // Exported at 0 from the start: increase() (KvserveCanaryRolledBack)
    // sees no first rollback in a series that begins at 1.
    metrics_.canary_rollbacks.With({p->name()});
    metrics_.canary_rolled_back.With({p->name()}).Set(0);
    if (p->canary->enabled()) metrics_.canary_version.With({p->name(), p->canary->version()}).Set(1);
  }
  if (cfg_.gateway.state_file.empty()) return;
  std::ifstream in(cfg_.gateway.state_file);
  if (!in) return;  // none yet
  const json state = json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!state.is_object() || !state.contains("canary_rolled_back") || !state["canary_rolled_back"].is_object()) {
    spdlog::error("gateway: {}: not a state file this gateway wrote; ignored", cfg_.gateway.state_file);
    return;
  }
  for (const auto& [pool, version] : state["canary_rolled_back"].items()) {
    Pool* p = router_->FindPool(pool);
    if (!p || !version.is_string() || !p->canary->enabled() || p->canary->version() != version.get<std::string>()) {
      continue;  // another release since: the record no longer applies
    }
    const PoolConfig* pc = nullptr;
    for (const PoolConfig& c : cfg_.pools) pc = c.name == pool ? &c : pc;
    if (pc && pc->canary_weight <= 0) continue;  // acknowledged: the configuration says 0 as well

    p->canary->MarkRolledBack();
    metrics_.canary_rolled_back.With({pool}).Set(1);
    spdlog::warn("gateway: pool {}: canary {} was rolled back before this start ({}); its weight stays 0", pool,
                 p->canary->version(), cfg_.gateway.state_file);
  }
  SaveState();  // drops the records that no longer apply
}

void Gateway::SaveState() {
  if (cfg_.gateway.state_file.empty()) return;
  std::lock_guard<std::mutex> lock(state_mu_);
  json rolled = json::object();
  for (const auto& p : router_->pools()) {
    if (p->canary->rolled_back()) rolled[p->name()] = p->canary->version();
  }
  const std::string tmp = cfg_.gateway.state_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << json{{"canary_rolled_back", rolled}}.dump(2) << "\n";
    if (!out.flush()) {
      spdlog::error("gateway: cannot write {}: the rollback holds until a restart only", tmp);
      return;
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, cfg_.gateway.state_file, ec);
  if (ec) spdlog::error("gateway: cannot replace {}: {}", cfg_.gateway.state_file, ec.message());
}

void Gateway::CanaryRolledBack(Pool& pool) {
  metrics_.canary_rolled_back.With({pool.name()}).Set(1);
  SaveState();
}

void Gateway::OnReplicaUnlisted(Replica* r) {
  metrics_.replica_healthy.With({r->pool(), r->name()}).Set(0);
  metrics_.registry.SetHidden("replica", r->name(), true);
}

Gateway::~Gateway() { Stop(); }

Status Gateway::Start() {
  http::ClientOptions co;
  co.io_threads = static_cast<int>(cfg_.gateway.upstream_threads);
  client_ = std::make_unique<http::HttpClient>(co);
  prep_ = std::make_unique<frontend::WorkQueue>(static_cast<int>(cfg_.gateway.prep_threads), cfg_.gateway.prep_queue);
  HealthOptions ho;
  ho.interval = Seconds(cfg_.gateway.health_interval_seconds);
  ho.readmit_after_probes = cfg_.gateway.readmit_after_probes;
  warmer_ = std::make_unique<Warmer>(router_.get(), client_.get(), &metrics_, std::move(parts_.warm_prompts));
  ho.on_warming = [this](Replica* r) { warmer_->Begin(r); };
  health_ = std::make_unique<HealthChecker>(router_.get(), client_.get(), &metrics_, ho);
  ReplicaDiscovery::Hooks hooks;
  hooks.listed = [this](Replica* r) { OnReplicaListed(r); };
  hooks.unlisted = [this](Replica* r) { OnReplicaUnlisted(r); };
  discovery_ = std::make_unique<ReplicaDiscovery>(router_.get(), ReplicaDiscovery::SystemResolver(), std::move(hooks),
                                                  Seconds(cfg_.gateway.dns_refresh_seconds), &metrics_);
  if (discovery_->active()) {
    discovery_->RefreshAll();
    discovery_->Start();
  }
  // Know which replicas are up before the first request.
  health_->ProbeAllAndWait(std::max(ho.interval, std::chrono::milliseconds(1000)));
  health_->Start();

  http::ServerOptions so;
  so.host = cfg_.gateway.host;
  so.port = static_cast<uint16_t>(cfg_.gateway.port);
  so.io_threads = static_cast<int>(cfg_.gateway.io_threads);
  so.max_body_bytes = static_cast<uint64_t>(cfg_.gateway.max_body_bytes);
  so.keep_alive_timeout = Seconds(cfg_.gateway.keep_alive_timeout_seconds);
  so.max_connections = static_cast<int>(cfg_.gateway.max_connections);
  so.max_connections_per_client = static_cast<int>(cfg_.gateway.max_connections_per_client);
  so.header_check = [this](const http::HttpRequest& head, std::string* message) { return CheckHeader(head, message); };
  const http::TlsServerFiles tls_files = PublicTlsFiles(cfg_);
  so.tls_cert_file = tls_files.cert_file;
  so.tls_key_file = tls_files.key_file;
  so.tls_cert_setting = tls_files.cert_setting;
  so.tls_key_setting = tls_files.key_setting;
  if (so.tls()) {
    std::lock_guard<std::mutex> lock(tls_mu_);
    tls_stamp_ = TlsStamp();
  }
  server_ = std::make_unique<http::HttpServer>(so);
  KVS_RETURN_IF_ERROR(server_->Start([this](std::shared_ptr<http::Exchange> ex) { Handle(std::move(ex)); }));
  http::ServerOptions ao;
  ao.host = cfg_.gateway.admin_host;
  ao.port = static_cast<uint16_t>(cfg_.gateway.admin_port);
  ao.io_threads = 1;
  ao.max_body_bytes = 1 << 16;  // GETs only
  ao.max_connections = 64;
  admin_ = std::make_unique<http::HttpServer>(ao);
  if (Status s = admin_->Start([this](std::shared_ptr<http::Exchange> ex) { HandleAdmin(std::move(ex)); }); !s.ok()) {
    return s.WithContext("gateway.admin_port");
  }
  if (!parts_.auth->anonymous()) WatchKeyFile();
  if (server_->tls()) {
    for (const char* outcome : {"ok", "failed"}) metrics_.tls_cert_reloads.With({outcome});
    WatchTlsFiles();
  }
  SampleStatus();
  return Status::Ok();
}

void Gateway::SampleStatus() {
  server_->RunAfter(Seconds(StatusBoard::kSampleSeconds), [this] {
    if (stopped_.load()) return;
    RefreshMetrics();
    status_board_.Sample();
    SampleStatus();
  });
}

void Gateway::WatchKeyFile() {
  server_->RunAfter(Seconds(cfg_.gateway.key_file_poll_seconds), [this] {
    if (stopped_.load()) return;
    const uint64_t before = parts_.auth->reloads();
    Status s = parts_.auth->ReloadIfChanged();
    if (!s.ok()) {
      // Once per change of the file: its mtime is recorded as tried.
      metrics_.key_reload_failures.Inc();
      spdlog::error("gateway: key file not reloaded (the loaded keys stay in force): {}", s.message());
    } else if (parts_.auth->reloads() != before) {
      metrics_.key_reloads.Inc();
      spdlog::info("gateway: key file reloaded: {} keys", parts_.auth->Current()->size());
    }
    WatchKeyFile();
  });
}

std::pair<std::optional<FileStamp>, std::optional<FileStamp>> Gateway::TlsStamp() const {
  return {StampOf(cfg_.gateway.tls_cert_file), StampOf(cfg_.gateway.tls_key_file)};
}

void Gateway::WatchTlsFiles() {
  server_->RunAfter(Seconds(cfg_.gateway.key_file_poll_seconds), [this] {
    if (stopped_.load()) return;
    const auto stamp = TlsStamp();
    bool changed;
    {
      std::lock_guard<std::mutex> lock(tls_mu_);
      changed = stamp != tls_stamp_;
    }
    // A rotation that writes the certificate and then the key may be seen
    // half done: that try fails (counted, the old pair stays) and the next
    // change of either file tries again.
    if (changed) (void)ReloadTls();
    WatchTlsFiles();
  });
}

Status Gateway::ReloadTls() {
  if (client_) client_->ReloadTls();
  if (!server_ || !server_->tls()) return Status::Ok();
  std::lock_guard<std::mutex> lock(tls_mu_);
  // Stamped before reading, so a file rewritten during the load is seen as
  // changed at the next poll.
  tls_stamp_ = TlsStamp();
  Status s = server_->ReloadTls();
  if (s.ok()) {
    metrics_.tls_cert_reloads.With({"ok"}).Inc();
    spdlog::info("gateway: TLS certificate reloaded from {} and {}", cfg_.gateway.tls_cert_file,
                 cfg_.gateway.tls_key_file);
  } else {
    metrics_.tls_cert_reloads.With({"failed"}).Inc();
    spdlog::error("gateway: TLS certificate not reloaded (the previous one stays in force): {}", s.message());
  }
  return s;
}

Status Gateway::ReloadKeys() {
  Status s = parts_.auth->Reload();
  if (s.ok()) {
    metrics_.key_reloads.Inc();
    spdlog::info("gateway: key file reloaded: {} keys", parts_.auth->Current()->size());
  } else {
    metrics_.key_reload_failures.Inc();
    spdlog::error("gateway: key file not reloaded (the loaded keys stay in force): {}", s.message());
  }
  return s;
}

std::vector<std::string> Gateway::ReloadConfig(const GatewayConfig& fresh) {
  std::vector<std::string> not_applied;
  size_t replicas = 0;
  for (const PoolConfig& pc : fresh.pools) {
    Pool* pool = router_->FindPool(pc.name);
    if (!pool) {
      not_applied.push_back("new pool " + pc.name);
      continue;
    }
    for (const ReplicaConfig& rc : pc.replicas) {
      auto url = http::Url::Parse(rc.url);
      Replica* found = nullptr;
      for (Replica* r : pool->replicas) {
        if (url.ok() && r->name() == url->ToString()) found = r;
      }
      if (!found) {
        not_applied.push_back("new replica " + rc.url + " in pool " + pc.name);
        continue;
      }
      ++replicas;
      if (found->weight() != rc.weight) {
        spdlog::info("gateway: replica {} (pool {}) weight {} -> {}", found->name(), pc.name, found->weight(), rc.weight);
        found->set_weight(rc.weight);
      }
      if (found->fault_rate() != rc.fault_rate) {
        spdlog::info("gateway: replica {} (pool {}) fault_rate {} -> {}", found->name(), pc.name, found->fault_rate(),
                     rc.fault_rate);
        found->set_fault_rate(rc.fault_rate);
      }
      if (found->version() != rc.version) not_applied.push_back("the version of replica " + rc.url);
    }
    if (pool->config.replicas_dns != pc.replicas_dns) not_applied.push_back("the replicas_dns entries of pool " + pc.name);
    if (pool->credentials()->api_key != pc.api_key) {
      // Rotation: requests from now on carry the new key (the replicas'
      // prefix-cache namespace follows the key, so cached prefixes start over).
      spdlog::info("gateway: pool {}: the replicas' API key changed; using the new one", pc.name);
      pool->set_api_key(pc.api_key);
    }
    const PoolConfig& now = pool->config;
    if (pc.warm_prompts_file != now.warm_prompts_file || pc.warm_timeout_seconds != now.warm_timeout_seconds ||
        pc.warm_concurrency != now.warm_concurrency) {
      not_applied.push_back("the warm-up settings of pool " + pc.name);
    }
    // The canary split moves at once; requests in flight keep their replica.
    // A canary the gateway rolled back stays at 0 while the file still says
    // 50 % for the release that failed; once the file says 0 too, the
    // rollback is acknowledged and a later weight starts a new canary.
    if (pc.canary_version != pool->canary->version()) {
      spdlog::info("gateway: pool {} canary_version \"{}\" -> \"{}\" at {}%", pc.name, pool->canary->version(),
                   pc.canary_version, pc.canary_version.empty() ? 0 : pc.canary_weight);
      const std::string before = pool->canary->version();
      pool->canary->Reset(pc.canary_version, pc.canary_weight);
      if (!before.empty()) metrics_.canary_version.With({pc.name, before}).Set(0);
      if (!pc.canary_version.empty()) metrics_.canary_version.With({pc.name, pc.canary_version}).Set(1);
      metrics_.canary_weight.With({pc.name}).Set(pool->canary->weight());
      metrics_.canary_rolled_back.With({pc.name}).Set(0);
      SaveState();
    } else if (pool->canary->rolled_back() && pc.canary_weight > 0) {
      spdlog::warn("gateway: pool {}: canary {} was rolled back; its weight stays 0 (not {}%): set canary_weight "
                   "to 0 to acknowledge it (then a new release may start a new canary)",
                   pc.name, pc.canary_version, pc.canary_weight);
    } else if (pool->canary->rolled_back()) {
      pool->canary->Acknowledge();
      metrics_.canary_rolled_back.With({pc.name}).Set(0);
      SaveState();
      spdlog::info("gateway: pool {}: the rollback of canary {} is acknowledged (canary_weight 0 in the "
                   "configuration)",
                   pc.name, pc.canary_version);
    } else if (pool->canary->enabled() && pool->canary->weight() != pc.canary_weight) {
      spdlog::info("gateway: pool {} canary {} weight {}% -> {}%", pc.name, pc.canary_version, pool->canary->weight(),
                   pc.canary_weight);
      pool->canary->set_weight(pc.canary_weight);
      metrics_.canary_weight.With({pc.name}).Set(pc.canary_weight);
    }
  }
  size_t configured = 0;  // the running pools' replicas from the configuration (not from DNS)
  for (Replica* r : router_->AllReplicas()) configured += r->dns_entry() < 0 ? 1 : 0;
  if (fresh.pools.size() != router_->pools().size() || replicas != configured) {
    not_applied.push_back("removed pools or replicas");
  }
  for (const auto& what : not_applied) spdlog::warn("gateway: reload: {} needs a restart", what);
  return not_applied;
}

void Gateway::BeginDrain() {
  draining_.store(true);
  if (server_) {
    server_->StopAccepting();
    server_->SetDraining();
  }
}

void Gateway::Stop() {
  if (stopped_.exchange(true)) return;
  if (discovery_) discovery_->Stop();
  if (health_) health_->Stop();
  if (admin_) admin_->Stop();
  if (server_) server_->Stop();
  if (client_) client_->Stop();
  if (prep_) prep_->Stop();
}

std::string Gateway::ClientAddress(const http::Exchange& ex) const {
  const std::string_view peer = PeerAddress(ex.remote());
  if (!trusted_proxies_.Contains(peer)) return ex.remote();  // the peer is the client ("IP:PORT")
  return trusted_proxies_.ClientOf(peer, ex.request().Header("X-Forwarded-For"));
}

std::string Gateway::ClientIp(const http::Exchange& ex) const {
  return trusted_proxies_.ClientOf(PeerAddress(ex.remote()), ex.request().Header("X-Forwarded-For"));
}

int Gateway::CheckHeader(const http::HttpRequest& head, std::string* message) const {
  if (parts_.auth->anonymous()) return 0;
  const api::RouteMatch match = api::MatchRoute(PublicRoutes(), head.method, head.path);
  if (match.error || IsPublicProbe(match.route->path)) return 0;  // answered by the handler
  const std::shared_ptr<const KeyStore> keys = parts_.auth->Current();
  const auto lookup = [&](std::string_view key) { return keys->Authenticate(key); };
  auto auth = api::Authenticate(api::KeyHeaders::Of(head), lookup);
  if (auth.ok()) return 0;
  *message = auth.error->message;
  return auth.error->status;
}

void Gateway::HandleAdmin(std::shared_ptr<http::Exchange> ex) {
  const http::HttpRequest& req = ex->request();
  if (int status = ex->transport_error()) {
    return ReplyJson(ex, status, api::TransportError(status, ex->transport_error_message()).ToJson());
  }
  const api::RouteMatch match = api::MatchRoute(kAdminRoutes, req.method, req.path);
  if (match.error) return ReplyJson(ex, match.error->status, match.error->ToJson());
  const std::string_view path = match.route->path;
  if (path == "/health") return ReplyJson(ex, 200, {{"status", draining_ ? "draining" : "ok"}});
  if (path == "/ready") return HandleReady(ex);
  if (path == "/metrics") return HandleMetrics(ex);
  if (path == "/") return HandleStatusPage(ex);
  return HandleStatus(ex);
}

void Gateway::Handle(std::shared_ptr<http::Exchange> ex) {
  const std::string id = "gw-" + RandomHex(24);
  const http::HttpRequest& req = ex->request();
  const api::RouteMatch match = api::MatchRoute(PublicRoutes(), req.method, req.path);
  const api::Route* route = match.route;
  if (int status = ex->transport_error()) {
    return ReplyGatewayError(this, ex, api::TransportError(status, ex->transport_error_message()), id, nullptr, route);
  }
  if (match.error) return ReplyGatewayError(this, ex, *match.error, id, nullptr, route);
  const std::string_view path = route->path;
  if (path == "/health") return ReplyJson(ex, 200, {{"status", draining_ ? "draining" : "ok"}});
  if (path == "/ready") return HandleReady(ex);

  // Everything else needs a key (checked from the header already; again
  // here for the principal, and for a key revoked in between).
  Principal principal;
  if (parts_.auth->anonymous()) {
    principal.tenant = kAnonymousTenant;
  } else {
    const std::shared_ptr<const KeyStore> keys = parts_.auth->Current();
    const auto lookup = [&](std::string_view key) { return keys->Authenticate(key); };
    auto auth = api::Authenticate(api::KeyHeaders::Of(req), lookup);
    if (!auth.ok()) return ReplyGatewayError(this, ex, *auth.error, id, nullptr, route);
    principal = std::move(*auth.identity);
  }
  if (draining_) {
    api::ApiError e = api::MakeError(503, "the gateway is shutting down and accepts no new requests",
                                   "service_unavailable", "server_draining");
    e.retry_after_seconds = 1;
    return ReplyGatewayError(this, ex, e, id, &principal, route);
  }
  const api::ApiRoute* api_route = api::FindApiRoute(*route);
  KVS_CHECK(api_route != nullptr);  // every other route of the table is the API's
  // The models list is the gateway's own (merged over its replicas).
  if (api_route->action == api::ApiAction::kModels) {
    return HandleModels(ex, route->prefix ? req.path.substr(path.size()) : "");
  }
  if (auto refused = RecentRefusal(principal.tenant)) {
    // Before its body is parsed and tokenized (the admission would refuse it anyway).
    metrics_.rate_limited.With({principal.tenant, LimitReasonName(refused->reason)}).Inc();
    return ReplyGatewayError(this, ex,
                             RateLimited(*refused, principal.limits, principal.tenant, cfg_.gateway.rate_limit_per_second, 0),
                             id, &principal, route);
  }
  StartProxy(this, std::move(ex), *api_route, std::move(principal), id);
}

void Gateway::RememberRefusal(const std::string& tenant, const AdmitResult& r) {
  if (r.reason != LimitReason::kRequests && r.reason != LimitReason::kGlobalRequests) return;
  if (r.retry_after_seconds <= 0) return;
  const auto now = std::chrono::steady_clock::now();
  const auto until = now + std::chrono::microseconds(static_cast<int64_t>(r.retry_after_seconds * 1e6));
  std::lock_guard<std::mutex> lock(refusals_mu_);
  if (refusals_.size() >= 10000) std::erase_if(refusals_, [&](const auto& kv) { return kv.second.first <= now; });
  if (refusals_.size() < 10000) refusals_[tenant] = {until, r};
}

std::optional<AdmitResult> Gateway::RecentRefusal(const std::string& tenant) const {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(refusals_mu_);
  auto it = refusals_.find(tenant);
  if (it == refusals_.end() || it->second.first <= now) return std::nullopt;
  AdmitResult r = it->second.second;
  r.retry_after_seconds = std::chrono::duration<double>(it->second.first - now).count();
  return r;
}

// Ready while not draining and at least one pool can serve: a pool without
// an available replica answers 503 for the requests that only it can take
// (and longer pools take its short ones), but it does not take the gateway,
// and with it every other pool's traffic, out of the load balancer.
bool Gateway::Ready(json* pools) const {
  bool any = false;
  for (const auto& p : router_->pools()) {
    int available = 0;
    for (Replica* r : p->replicas) available += r->available() ? 1 : 0;
    if (pools) {
      (*pools)[p->name()] = {{"ready", available > 0}, {"available_replicas", available},
                             {"replicas", p->replicas.num_listed()}};
    }
    any = any || available > 0;
  }
  return !draining_ && any;
}

std::string Gateway::StateName() const {
  return draining_ ? "draining" : Ready(nullptr) ? "ready" : "not_ready";
}

void Gateway::HandleReady(std::shared_ptr<http::Exchange> ex) {
  json pools = json::object();
  const bool ready = Ready(&pools);
  ReplyJson(ex, ready ? 200 : 503,
            {{"status", draining_ ? "draining" : ready ? "ready" : "not_ready"}, {"pools", pools}});
}

void Gateway::RefreshMetrics() {
  for (Replica* r : router_->AllReplicas()) {
    metrics_.replica_healthy.With({r->pool(), r->name()}).Set(r->available() ? 1 : 0);
    metrics_.replica_outstanding_tokens.With({r->pool(), r->name()}).Set(static_cast<double>(r->outstanding_tokens()));
  }
  for (const auto& p : router_->pools()) {
    if (p->canary->enabled()) metrics_.canary_weight.With({p->name()}).Set(p->canary->weight());
  }
  metrics_.ready.Set(Ready(nullptr) ? 1 : 0);
  metrics_.process.Refresh();
}

void Gateway::HandleStatusPage(std::shared_ptr<http::Exchange> ex) {
  http::HttpResponse res;
  res.status = 200;
  res.SetHeader("Content-Type", "text/html; charset=utf-8");
  res.SetHeader("Cache-Control", "no-cache");
  res.body = std::string(metrics::StatusPageHtml());
  ex->Respond(std::move(res));
}

void Gateway::HandleStatus(std::shared_ptr<http::Exchange> ex) {
  RefreshMetrics();
  std::vector<std::pair<std::string, std::string>> facts;
  std::string pools;
  for (const auto& p : router_->pools()) {
    if (!pools.empty()) pools += ", ";
    const size_t n = p->replicas.num_listed();
    pools += fmt::format("{} (up to {} tokens, {} replica{})", p->name(), p->config.max_context, n, n == 1 ? "" : "s");
  }
  facts.emplace_back("Pools", pools);
  // Releases: each pool's versions, and where a canary stands.
  std::string releases;
  for (const auto& p : router_->pools()) {
    std::vector<std::string> versions;
    for (Replica* r : p->replicas.Listed()) {
      if (std::find(versions.begin(), versions.end(), r->version()) == versions.end()) versions.push_back(r->version());
    }
    std::string canary;
    if (p->canary->enabled()) {
      canary = p->canary->rolled_back() ? fmt::format("; canary {} rolled back (0 %)", p->canary->version())
                                        : fmt::format("; canary {} at {} %", p->canary->version(), p->canary->weight());
    }
    releases += fmt::format("{}{}: {}{}", releases.empty() ? "" : ", ", p->name(), fmt::join(versions, " + "), canary);
  }
  facts.emplace_back("Releases", releases);
  std::string routing;
  for (const auto& p : router_->pools()) {
    routing += fmt::format("{}{}: {}", routing.empty() ? "" : ", ", p->name(), router_->policy(*p).name());
  }
  facts.emplace_back("Routing", routing);
  facts.emplace_back("Prompt tokens counted with", parts_.counter->path());
  facts.emplace_back("API keys", parts_.auth->anonymous()
                                     ? std::string("none (anonymous access)")
                                     : fmt::format("{} keys from {}", parts_.auth->Current()->size(), cfg_.gateway.key_file));
  facts.emplace_back("Rate-limit counters", parts_.limiter->name());
  ReplyJson(ex, 200, status_board_.ToJson(StateName(), facts, router_->AllReplicas()), {{"Cache-Control", "no-cache"}});
}

void Gateway::HandleMetrics(std::shared_ptr<http::Exchange> ex) {
  RefreshMetrics();
  http::HttpResponse res;
  res.status = 200;
  res.SetHeader("Content-Type", "text/plain; version=0.0.4; charset=utf-8");
  res.body = metrics_.registry.Render();
  ex->Respond(std::move(res));
}

void Gateway::HandleModels(std::shared_ptr<http::Exchange> ex, const std::string& id) {
  // model id -> the pools that serve it, from the replicas' /v1/models.
  std::map<std::string, std::vector<std::string>> served;
  for (const auto& p : router_->pools()) {
    for (Replica* r : p->replicas.Listed()) {
      for (const auto& m : r->models()) {
        auto& pools = served[m];
        if (std::find(pools.begin(), pools.end(), p->name()) == pools.end()) pools.push_back(p->name());
      }
    }
  }
  auto card = [&](const std::string& m, const std::vector<std::string>& pools) {
    int64_t context = 0;
    for (const auto& name : pools) context = std::max(context, router_->FindPool(name)->config.max_context);
    return json{{"id", m},           {"object", "model"},         {"created", 0},
                {"owned_by", "kvserve"}, {"max_model_len", context}, {"pools", pools}};
  };
  if (!id.empty()) {
    auto it = served.find(id);
    if (it == served.end()) {
      api::ApiError e = api::MakeError(404, fmt::format("the model '{}' does not exist", id), "invalid_request_error",
                                     "model_not_found");
      e.param = "model";
      return ReplyJson(ex, 404, e.ToJson());
    }
    return ReplyJson(ex, 200, card(it->first, it->second));
  }
  json data = json::array();
  for (const auto& [m, pools] : served) data.push_back(card(m, pools));
  ReplyJson(ex, 200, {{"object", "list"}, {"data", data}});
}

int RunGateway(const GatewayConfig& cfg, std::function<StatusOr<GatewayConfig>()> reload) {
  // A signal sent as soon as the port answers stays pending, not fatal,
  // until its handler is installed below. Blocked before any thread starts
  // (health checks, rate-limit counters, io threads): each thread inherits
  // the mask, and a signal the kernel hands to a thread not blocking it
  // would take its default action while no handler is installed.
  SignalBlock handled({SIGTERM, SIGINT, SIGHUP});
  // Logs go to stderr; stdout is the audit log's by default.
  if (!spdlog::get("kvserve")) spdlog::set_default_logger(spdlog::stderr_color_mt("kvserve"));
  spdlog::set_level(spdlog::level::from_str(cfg.logging.level));
  auto parts = Gateway::BuildParts(cfg);
  if (!parts.ok()) {
    spdlog::error("kvserve gateway: {}", parts.status().message());
    return 2;
  }
  spdlog::info("gateway: counting prompt tokens with {}; {} pools; rate-limit counters: {}",
               cfg.model.path, cfg.pools.size(), (*parts).limiter->name());
  if ((*parts).auth->anonymous()) spdlog::warn("gateway: no key file: requests are not authenticated");
  Gateway gw(cfg, std::move(*parts));
  if (Status s = gw.Start(); !s.ok()) {
    spdlog::error("kvserve gateway: {}", s.message());
    return 1;
  }
  for (const auto& p : gw.router().pools()) {
    int up = 0;
    for (Replica* r : p->replicas) up += r->available() ? 1 : 0;
    spdlog::info("gateway: pool {} (max_context {}): {} of {} replicas ready", p->name(), p->config.max_context, up,
                 p->replicas.num_listed());
  }
  spdlog::info("listening on {}://{}:{}", gw.server()->scheme(), cfg.gateway.host, gw.port());
  spdlog::info("admin listening on http://{}:{} (/metrics, /status)", cfg.gateway.admin_host, gw.admin_port());

  std::mutex mu;
  std::condition_variable cv;
  int signals = 0;
  gw.server()->OnSignal({SIGTERM, SIGINT}, [&](int) {
    std::lock_guard<std::mutex> lock(mu);
    ++signals;
    cv.notify_all();
  });
  gw.server()->OnSignal({SIGHUP}, [&](int) {
    (void)gw.ReloadKeys();
    if (Status s = gw.audit().Reopen(); !s.ok()) spdlog::error("gateway: audit log not reopened: {}", s.message());
    (void)gw.ReloadTls();
    if (!reload) return;
    auto fresh = reload();
    if (!fresh.ok()) {
      spdlog::error("gateway: configuration not reloaded: {}", fresh.status().message());
      return;
    }
    gw.ReloadConfig(*fresh);
  });
  handled.Release();
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return signals > 0; });
  spdlog::info("gateway: draining ({} requests in flight)", gw.in_flight());
  gw.BeginDrain();
  const auto end = std::chrono::steady_clock::now() + Seconds(cfg.gateway.drain_timeout_seconds);
  while (gw.in_flight() > 0 && std::chrono::steady_clock::now() < end && signals < 2) {
    cv.wait_for(lock, std::chrono::milliseconds(50));
  }
  lock.unlock();
  if (gw.in_flight() > 0) spdlog::warn("gateway: {} requests cut at the drain deadline", gw.in_flight());
  gw.Stop();
  spdlog::info("gateway: stopped");
  return 0;
}

}  // namespace kvs::gateway
