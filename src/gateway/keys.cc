#include "gateway/keys.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <cstring>
#include <cstdlib>
#include <utility>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <yaml-cpp/yaml.h>

#include "base/file_stamp.h"
#include "base/sha256.h"

namespace kvs::gateway {

namespace {

bool IsHex64(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

Status ReadNumber(const YAML::Node& n, const std::string& where, double lo, double hi, double* out) {
  double x = 0;
  const std::string t = n.IsScalar() ? n.Scalar() : "";
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
  if (!n.IsScalar() || n.Tag() == "!" || t.empty() || ec != std::errc() || p != t.data() + t.size() ||
      !std::isfinite(x) || x < lo || x > hi) {
    return InvalidArgument("{}: expected a number in [{}, {}], got \"{}\"", where, lo, hi, t);
  }
  *out = x;
  return Status::Ok();
}

}  // namespace

std::string KeyDigest(std::string_view key) { return Sha256Hex(key); }
std::string KeyIdOfDigest(std::string_view digest) { return "k-" + std::string(digest.substr(0, 8)); }

StatusOr<std::string> GenerateApiKey() {
  unsigned char bytes[20];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return Internal("the random number generator failed");
  std::string key = "sk-kvs-";
  for (unsigned char b : bytes) key += fmt::format("{:02x}", b);
  return key;
}

StatusOr<KeyFile> KeyFile::Parse(std::string_view yaml) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(yaml));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("YAML syntax error at line {}, column {}: {}", e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  KeyFile f;
  if (root.IsNull()) return f;
  if (!root.IsMap()) return InvalidArgument("expected a mapping with tenants and keys");
  for (const auto& sec : root) {
    const std::string name = sec.first.Scalar();
    if (name == "tenants") {
      if (sec.second.IsNull()) continue;
      if (!sec.second.IsMap()) return InvalidArgument("tenants: expected a mapping of tenant names to limits");
      for (const auto& t : sec.second) {
        const std::string tenant = t.first.Scalar();
        TenantLimits l;
        if (!t.second.IsNull()) {
          if (!t.second.IsMap()) return InvalidArgument("tenants.{}: expected a mapping of limits", tenant);
          for (const auto& kv : t.second) {
            const std::string k = kv.first.Scalar();
            const std::string where = "tenants." + tenant + "." + k;
            double x = 0;
            if (k == "requests_per_second") {
              KVS_RETURN_IF_ERROR(ReadNumber(kv.second, where, 0, 1e9, &l.requests_per_second));
            } else if (k == "burst") {
              KVS_RETURN_IF_ERROR(ReadNumber(kv.second, where, 0, 1e9, &l.burst));
            } else if (k == "tokens_per_minute") {
              KVS_RETURN_IF_ERROR(ReadNumber(kv.second, where, 0, 1e15, &x));
              l.tokens_per_minute = static_cast<int64_t>(x);
            } else if (k == "max_concurrent") {
              KVS_RETURN_IF_ERROR(ReadNumber(kv.second, where, 0, 1e9, &x));
              l.max_concurrent = static_cast<int64_t>(x);
            } else if (k == "weight") {
              KVS_RETURN_IF_ERROR(ReadNumber(kv.second, where, 1e-3, 1e6, &l.weight));
            } else if (k == "priority") {
              KVS_RETURN_IF_ERROR(ReadNumber(kv.second, where, -1000000, 1000000, &x));
              if (x != std::floor(x)) return InvalidArgument("{}: expected an integer, got {}", where, x);
              l.priority = static_cast<int64_t>(x);
            } else {
              return InvalidArgument(
                  "unknown key \"{}\"; limits are requests_per_second, burst, tokens_per_minute, max_concurrent, priority, weight",
                  where);
            }
          }
        }
        f.tenants[tenant] = l;
      }
    } else if (name == "keys") {
      if (sec.second.IsNull()) continue;
      if (!sec.second.IsSequence()) return InvalidArgument("keys: expected a list");
      for (size_t i = 0; i < sec.second.size(); ++i) {
        const YAML::Node& k = sec.second[i];
        if (!k.IsMap()) return InvalidArgument("keys[{}]: expected a mapping (id, tenant, sha256, created)", i);
        KeyEntry e;
        for (const auto& kv : k) {
          const std::string field = kv.first.Scalar();
          if (!kv.second.IsScalar()) return InvalidArgument("keys[{}].{}: expected a string", i, field);
          const std::string v = kv.second.Scalar();
          if (field == "id") {
            e.id = v;
          } else if (field == "tenant") {
            e.tenant = v;
          } else if (field == "sha256") {
            e.sha256 = v;
          } else if (field == "created") {
            e.created = v;
          } else {
            return InvalidArgument("keys[{}]: unknown field \"{}\"; fields are id, tenant, sha256, created", i, field);
          }
        }
        if (!IsHex64(e.sha256)) return InvalidArgument("keys[{}].sha256: expected 64 lowercase hex digits", i);
        if (e.tenant.empty()) return InvalidArgument("keys[{}].tenant: required", i);
        if (e.id.empty()) e.id = KeyIdOfDigest(e.sha256);
        f.keys.push_back(std::move(e));
      }
    } else {
      return InvalidArgument("unknown section \"{}\"; sections are tenants, keys", name);
    }
  }
  // A key whose tenant has no entry would run without limits: a typo in a
  // tenant name must not hand out an unlimited key.
  for (size_t i = 0; i < f.keys.size(); ++i) {
    if (!f.tenants.count(f.keys[i].tenant)) {
      return InvalidArgument("keys[{}].tenant: tenant \"{}\" has no entry under tenants (give it its limits; 0 "
                             "means none)",
                             i, f.keys[i].tenant);
    }
  }
  return f;
}

StatusOr<KeyFile> KeyFile::Load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot read the key file \"{}\"", path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto f = Parse(ss.str());
  if (!f.ok()) return f.status().WithContext(path);
  return f;
}

std::string KeyFile::Serialize() const {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "tenants" << YAML::Value << YAML::BeginMap;
  for (const auto& [name, l] : tenants) {
    out << YAML::Key << name << YAML::Value << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "requests_per_second" << YAML::Value << l.requests_per_second;
    if (l.burst > 0) out << YAML::Key << "burst" << YAML::Value << l.burst;
    out << YAML::Key << "tokens_per_minute" << YAML::Value << l.tokens_per_minute;
    out << YAML::Key << "max_concurrent" << YAML::Value << l.max_concurrent;
    if (l.priority != 0) out << YAML::Key << "priority" << YAML::Value << l.priority;
    if (l.weight != 1) out << YAML::Key << "weight" << YAML::Value << l.weight;
    out << YAML::EndMap;
  }
  out << YAML::EndMap;
  out << YAML::Key << "keys" << YAML::Value << YAML::BeginSeq;
  for (const auto& k : keys) {
    out << YAML::Flow << YAML::BeginMap;
    out << YAML::Key << "id" << YAML::Value << k.id;
    out << YAML::Key << "tenant" << YAML::Value << k.tenant;
    out << YAML::Key << "sha256" << YAML::Value << k.sha256;
    out << YAML::Key << "created" << YAML::Value << k.created;
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return "# kvserve gateway key file: tenants, their limits (0: none) and SHA-256 digests of their API keys.\n"
         "# Written by `kvserve gateway keys add|revoke`; the gateway reloads it when it changes.\n" +
         std::string(out.c_str()) + "\n";
}

Status KeyFile::Save(const std::string& path) const {
  // A fresh temporary file of a random name (O_EXCL: never one that exists,
  // so never through a symlink planted at a guessable name), created 0600
  // whatever the umask, synced, then renamed over the file (rename replaces
  // a symlink at `path` itself, never its target).
  std::string tmp = path + ".XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return IoError("cannot create a temporary file next to \"{}\": {}", path, std::strerror(errno));
  bool ok = ::fchmod(fd, 0600) == 0;
  const std::string text = Serialize();
  for (size_t done = 0; ok && done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  ok = ::close(fd) == 0 && ok;
  if (!ok) {
    ::unlink(tmp.c_str());
    return IoError("cannot write \"{}\"", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    return IoError("cannot replace \"{}\"", path);
  }
  return Status::Ok();
}

StatusOr<KeyFileLock> KeyFileLock::Acquire(const std::string& path) {
  const std::string lock_path = path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("cannot open the lock file \"{}\": {}", lock_path, std::strerror(errno));
  if (::flock(fd, LOCK_EX) != 0) {
    const int err = errno;
    ::close(fd);
    return IoError("cannot lock \"{}\": {}", lock_path, std::strerror(err));
  }
  KeyFileLock l;
  l.fd_ = fd;
  return l;
}

KeyFileLock::KeyFileLock(KeyFileLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}

KeyFileLock::~KeyFileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

std::optional<Principal> KeyStore::Authenticate(std::string_view key) const {
  if (key.empty()) return std::nullopt;
  const std::string digest = KeyDigest(key);
  const KeyEntry* found = nullptr;
  for (const auto& e : file_.keys) {
    // Every entry is compared, whatever matched before.
    const bool eq = CRYPTO_memcmp(e.sha256.data(), digest.data(), digest.size()) == 0;
    if (eq && !found) found = &e;
  }
  if (!found) return std::nullopt;
  Principal p;
  p.key_id = found->id;
  p.tenant = found->tenant;
  auto it = file_.tenants.find(found->tenant);
  if (it != file_.tenants.end()) p.limits = it->second;
  return p;
}

StatusOr<std::unique_ptr<Authenticator>> Authenticator::Open(const std::string& path) {
  std::unique_ptr<Authenticator> a(new Authenticator(path));
  if (path.empty()) {
    a->store_ = std::make_shared<const KeyStore>(KeyFile{});
    return a;
  }
  KVS_RETURN_IF_ERROR(a->Reload());
  return a;
}

std::shared_ptr<const KeyStore> Authenticator::Current() const {
  std::lock_guard<std::mutex> lock(mu_);
  return store_;
}

Status Authenticator::Reload() {
  if (path_.empty()) return Status::Ok();
  const std::optional<FileStamp> stamp = StampOf(path_);
  KVS_ASSIGN_OR_RETURN(KeyFile f, KeyFile::Load(path_));
  auto store = std::make_shared<const KeyStore>(std::move(f));
  std::lock_guard<std::mutex> lock(mu_);
  store_ = std::move(store);
  if (stamp) watch_ = FileWatch(stamp);
  ++reloads_;
  return Status::Ok();
}

Status Authenticator::ReloadIfChanged() {
  if (path_.empty()) return Status::Ok();
  const std::optional<FileStamp> now = StampOf(path_);
  if (!now) return NotFound("the key file \"{}\" is gone; the loaded keys stay", path_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Once the change has held still for a poll (never a half-written
    // file), and tried once per change: a file that does not parse is
    // reported once, not at every poll, and tried again when it changes.
    if (!watch_.Poll(now)) return Status::Ok();
  }
  return Reload();
}

uint64_t Authenticator::reloads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reloads_;
}

}  // namespace kvs::gateway
