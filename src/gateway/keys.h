// Tenants and API keys of the gateway.
//
// The key file (YAML, written by `kvserve gateway keys add|revoke`) holds
// tenants with their limits, and keys as SHA-256 digests: the plain key is
// shown once when it is created and never stored. Each key belongs to one
// tenant; limits are per tenant, so rotating a key (add the new one, later
// revoke the old) never doubles a budget.
//
//   tenants:
//     acme: {requests_per_second: 10, tokens_per_minute: 20000, max_concurrent: 8}
//   keys:
//     - {id: k-1a2b3c4d, tenant: acme, sha256: <64 hex digits>, created: 2025-01-01T00:00:00Z}
//
// A limit of 0 means none. The key id ("k-" + the digest's first 8 hex digits,
// as `kvserve serve` names keys) is what logs, metrics and `keys list` show.
//
// KeyStore is an immutable snapshot; Authenticator holds the current one and
// swaps in a new one when the file changes (polled) or on SIGHUP, so requests
// in flight (open streams included) keep the snapshot they were admitted with.
// Thread-safety: KeyFile is a value type; KeyStore is immutable;
// Authenticator's methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/file_stamp.h"
#include "base/status.h"

namespace kvs::gateway {

struct TenantLimits {
  double requests_per_second = 0;  // token bucket rate; 0: no limit
  double burst = 0;                // bucket size; 0: max(1, requests_per_second)
  int64_t tokens_per_minute = 0;   // prompt + max_tokens at admission, corrected by real usage; 0: no limit
  int64_t max_concurrent = 0;      // requests in flight; 0: no limit
  // Priority class: the replicas' `priority` (lower first, with their
  // runtime.scheduling_policy priority). A request runs at no better
  // priority than its tenant's: max(client's priority, this).
  int64_t priority = 0;
  // Share of the replicas when requests wait in the gateway (fair_queue.h).
  double weight = 1;
};

struct KeyEntry {
  std::string id;       // "k-1a2b3c4d"
  std::string tenant;
  std::string sha256;   // 64 lowercase hex digits of the key
  std::string created;  // ISO 8601, UTC
};

struct KeyFile {
  std::map<std::string, TenantLimits> tenants;
  std::vector<KeyEntry> keys;

  static StatusOr<KeyFile> Load(const std::string& path);
  static StatusOr<KeyFile> Parse(std::string_view yaml);
  std::string Serialize() const;
  // Writes atomically (a new temporary file of a random name + rename),
  // mode 0600 whatever the umask; never writes through a symlink.
  Status Save(const std::string& path) const;
};

// An exclusive lock on a key file's edits (flock on PATH.lock), held from
// load to save by `keys add|revoke`, so two edits cannot interleave (one
// would write back a key the other revoked). Released when destroyed.
class KeyFileLock {
 public:
  static StatusOr<KeyFileLock> Acquire(const std::string& key_file_path);
  KeyFileLock(KeyFileLock&& o) noexcept;
  KeyFileLock& operator=(KeyFileLock&&) = delete;
  ~KeyFileLock();

 private:
  KeyFileLock() = default;
  int fd_ = -1;
};

// A new random key: "sk-kvs-" + 40 hex digits (160 bits) from OpenSSL's CSPRNG.
StatusOr<std::string> GenerateApiKey();
std::string KeyDigest(std::string_view key);  // SHA-256, hex
std::string KeyIdOfDigest(std::string_view digest);  // "k-" + first 8 hex digits

// The tenant of every request to a gateway without a key file.
inline constexpr const char* kAnonymousTenant = "anonymous";

struct Principal {
  std::string key_id;
  std::string tenant;
  TenantLimits limits;
};

class KeyStore {
 public:
  explicit KeyStore(KeyFile file) : file_(std::move(file)) {}
  // The key's principal, comparing the presented key's digest with every
  // stored digest in constant time (no early exit). nullopt if unknown.
  std::optional<Principal> Authenticate(std::string_view key) const;
  size_t size() const { return file_.keys.size(); }
  const KeyFile& file() const { return file_; }

 private:
  KeyFile file_;
};

class Authenticator {
 public:
  // path "" : anonymous mode (every request is the tenant "anonymous", no limits).
  static StatusOr<std::unique_ptr<Authenticator>> Open(const std::string& path);

  bool anonymous() const { return path_.empty(); }
  std::shared_ptr<const KeyStore> Current() const;
  // Re-reads the file. On error the old keys stay in force (logged by the caller).
  Status Reload();
  // Reloads when the file's modification time or size changed since the last load.
  Status ReloadIfChanged();
  uint64_t reloads() const;

 private:
  explicit Authenticator(std::string path) : path_(std::move(path)) {}
  std::string path_;
  mutable std::mutex mu_;
  std::shared_ptr<const KeyStore> store_;  // guarded by mu_
  FileWatch watch_{std::nullopt};          // guarded by mu_: the file at the last (tried) load
  uint64_t reloads_ = 0;                   // guarded by mu_
};

}  // namespace kvs::gateway
