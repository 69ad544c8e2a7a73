// `kvserve gateway`: the access layer in front of `kvserve serve` replicas.
//   kvserve gateway --config configs/gateway.yaml [--section.key VALUE | --alias VALUE]...
//   kvserve gateway keys add --file keys.yaml --tenant NAME [--tokens-per-minute N] [--requests-per-second R]
//                                [--max-concurrent N] [--burst B] [--priority P] [--weight W]
//   kvserve gateway keys list --file keys.yaml
//   kvserve gateway keys revoke --file keys.yaml KEY_ID
// Exit codes: 0 after a drain (SIGTERM/SIGINT), 1 when the port cannot be
// used, 2 for bad configuration or a bad key-file command.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/default_model.h"
#include "gateway/config.h"
#include "gateway/gateway.h"
#include "gateway/keys.h"

namespace kvs::cli {
namespace {

struct KeyArgs {
  std::string file;
  std::string tenant;
  std::string id;
  double rps = -1, burst = -1;
  int64_t tpm = -1, concurrent = -1;
  std::optional<int64_t> priority;
  std::optional<double> weight;
};

std::string NowIso() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

StatusOr<gateway::KeyFile> LoadOrEmpty(const std::string& path) {
  if (std::FILE* f = std::fopen(path.c_str(), "r")) {
    std::fclose(f);
    return gateway::KeyFile::Load(path);
  }
  return gateway::KeyFile{};
}

int Fail(const Status& s) {
  std::fprintf(stderr, "kvserve gateway keys: %s\n", s.message().c_str());
  return 2;
}

int KeysAdd(const KeyArgs& a) {
  auto lock = gateway::KeyFileLock::Acquire(a.file);
  if (!lock.ok()) return Fail(lock.status());
  auto f = LoadOrEmpty(a.file);
  if (!f.ok()) return Fail(f.status());
  auto key = gateway::GenerateApiKey();
  if (!key.ok()) return Fail(key.status());
  gateway::TenantLimits& l = f->tenants[a.tenant];
  if (a.rps >= 0) l.requests_per_second = a.rps;
  if (a.burst >= 0) l.burst = a.burst;
  if (a.tpm >= 0) l.tokens_per_minute = a.tpm;
  if (a.concurrent >= 0) l.max_concurrent = a.concurrent;
  if (a.priority) l.priority = *a.priority;
  if (a.weight) l.weight = *a.weight;
  gateway::KeyEntry e;
  e.sha256 = gateway::KeyDigest(*key);
  e.id = gateway::KeyIdOfDigest(e.sha256);
  e.tenant = a.tenant;
  e.created = NowIso();
  f->keys.push_back(e);
  if (Status s = f->Save(a.file); !s.ok()) return Fail(s);
  std::fprintf(stderr, "added key %s for tenant %s to %s; the key is shown only now:\n", e.id.c_str(),
               a.tenant.c_str(), a.file.c_str());
  std::printf("%s\n", key->c_str());
  return 0;
}

int KeysList(const KeyArgs& a) {
  auto f = gateway::KeyFile::Load(a.file);
  if (!f.ok()) return Fail(f.status());
  std::printf("%-12s %-16s %-22s %s\n", "ID", "TENANT", "CREATED", "TENANT LIMITS (rps/burst/tokens per min/concurrent)");
  for (const auto& k : f->keys) {
    const auto& l = f->tenants[k.tenant];
    std::printf("%-12s %-16s %-22s %g/%g/%lld/%lld\n", k.id.c_str(), k.tenant.c_str(), k.created.c_str(),
                l.requests_per_second, l.burst, static_cast<long long>(l.tokens_per_minute),
                static_cast<long long>(l.max_concurrent));
  }
  return 0;
}

int KeysRevoke(const KeyArgs& a) {
  auto lock = gateway::KeyFileLock::Acquire(a.file);
  if (!lock.ok()) return Fail(lock.status());
  auto f = gateway::KeyFile::Load(a.file);
  if (!f.ok()) return Fail(f.status());
  const size_t before = f->keys.size();
  std::erase_if(f->keys, [&](const gateway::KeyEntry& e) { return e.id == a.id; });
  if (f->keys.size() == before) return Fail(NotFound("no key with id {} in {}", a.id, a.file));
  if (Status s = f->Save(a.file); !s.ok()) return Fail(s);
  std::fprintf(stderr, "revoked %s; running gateways drop it at their next reload of %s\n", a.id.c_str(),
               a.file.c_str());
  return 0;
}

const Registrar kRegister_gateway({"gateway", "Serve as the gateway (auth, rate limits, routing) in front of serve replicas",
               [](CLI::App* app) {
                 auto config = std::make_shared<std::string>();
                 auto print_config = std::make_shared<bool>(false);
                 app->add_option("-c,--config", *config, "YAML configuration file (see configs/gateway.yaml)");
                 app->add_flag("--print-config", *print_config, "Print the effective configuration as JSON and exit");
                 app->allow_extras();
                 app->footer(gateway::GatewayConfigHelp());

                 auto a = std::make_shared<KeyArgs>();
                 auto* keys = app->add_subcommand("keys", "Manage the key file: add, list, revoke");
                 keys->require_subcommand(1);
                 auto* add = keys->add_subcommand("add", "Create a key for a tenant (printed once) and set its limits");
                 add->add_option("--file", a->file, "Key file (created if missing)")->required();
                 add->add_option("--tenant", a->tenant, "Tenant the key belongs to")->required();
                 add->add_option("--requests-per-second", a->rps, "Tenant limit (0: none)")->check(CLI::NonNegativeNumber);
                 add->add_option("--burst", a->burst, "Tenant request burst (0: = requests-per-second)")
                     ->check(CLI::NonNegativeNumber);
                 add->add_option("--tokens-per-minute", a->tpm, "Tenant limit (0: none)")->check(CLI::NonNegativeNumber);
                 add->add_option("--max-concurrent", a->concurrent, "Tenant limit (0: none)")
                     ->check(CLI::NonNegativeNumber);
                 add->add_option("--priority", a->priority,
                                 "Tenant priority class: the replicas' `priority` (lower first) its requests run at "
                                 "at best (default 0)")
                     ->check(CLI::Range(-1000000, 1000000));
                 add->add_option("--weight", a->weight,
                                 "Tenant share when requests wait in the gateway (weighted fair queueing; default 1)")
                     ->check(CLI::Range(1e-3, 1e6));
                 auto* list = keys->add_subcommand("list", "List key ids, tenants and limits (never the keys)");
                 list->add_option("--file", a->file, "Key file")->required();
                 auto* revoke = keys->add_subcommand("revoke", "Remove a key by its id");
                 revoke->add_option("--file", a->file, "Key file")->required();
                 revoke->add_option("id", a->id, "Key id (k-xxxxxxxx, from `keys list`)")->required();

                 return [app, keys, add, list, revoke, a, config, print_config]() -> int {
                   if (keys->parsed()) {
                     if (add->parsed()) return KeysAdd(*a);
                     if (list->parsed()) return KeysList(*a);
                     if (revoke->parsed()) return KeysRevoke(*a);
                     return 2;
                   }
                   gateway::GatewayConfig cfg;
                   if (!config->empty()) {
                     if (Status s = gateway::LoadGatewayConfigFile(*config, &cfg); !s.ok()) {
                       std::fprintf(stderr, "kvserve gateway: %s\n", s.message().c_str());
                       return 2;
                     }
                   }
                   if (Status s = gateway::ApplyGatewayOverrides(app->remaining(), &cfg); !s.ok()) {
                     std::fprintf(stderr, "kvserve gateway: %s\n", s.message().c_str());
                     return 2;
                   }
                   if (Status s = gateway::ValidateGatewayConfig(cfg); !s.ok()) {
                     std::fprintf(stderr, "kvserve gateway: %s\n", s.message().c_str());
                     return 2;
                   }
                   if (Status s = gateway::ResolveGatewaySecrets(&cfg); !s.ok()) {
                     std::fprintf(stderr, "kvserve gateway: %s\n", s.message().c_str());
                     return 2;
                   }
                   if (cfg.model.path.empty()) cfg.model.path = DefaultModelPath();
                   if (cfg.model.path.empty()) {
                     std::fprintf(stderr, "kvserve gateway: %s\n", kNoModelMessage);
                     return 2;
                   }
                   if (*print_config) {
                     std::printf("%s\n", gateway::GatewayConfigToJson(cfg).dump(2).c_str());
                     return 0;
                   }
                   // SIGHUP: the same file and overrides, read again.
                   auto reload = [path = *config, args = app->remaining()]() -> StatusOr<gateway::GatewayConfig> {
                     gateway::GatewayConfig fresh;
                     if (!path.empty()) KVS_RETURN_IF_ERROR(gateway::LoadGatewayConfigFile(path, &fresh));
                     KVS_RETURN_IF_ERROR(gateway::ApplyGatewayOverrides(args, &fresh));
                     KVS_RETURN_IF_ERROR(gateway::ValidateGatewayConfig(fresh));
                     KVS_RETURN_IF_ERROR(gateway::ResolveGatewaySecrets(&fresh));
                     return fresh;
                   };
                   return gateway::RunGateway(cfg, reload);
                 };
               }});

}  // namespace
}  // namespace kvs::cli
