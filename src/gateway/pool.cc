#include "gateway/pool.h"

#include <algorithm>
#include <limits>

#include "base/sha256.h"

namespace kvs::gateway {

Replica::Replica(std::string pool, http::Url url, double weight, std::string version, int dns_entry)
    : pool_(std::move(pool)), url_(std::move(url)), name_(url_.ToString()), version_(std::move(version)),
      dns_entry_(dns_entry), weight_(weight) {}

void Replica::set_listed(bool listed) {
  std::lock_guard<std::mutex> lock(mu_);
  if (listed_.load() == listed) return;
  if (!listed) {
    // Out of the pool: whatever is known of it is stale when it comes back.
    health_.store(Health::kUnknown);
    good_probes_ = 0;
    consecutive_failures_.store(0);
    warming_.store(false);
    draining_.store(false);
    prefix_index_.MarkFailed();
  }
  listed_.store(listed);
}

Replica* ReplicaList::Add(std::unique_ptr<Replica> r) {
  std::lock_guard<std::mutex> lock(add_mu_);
  const size_t n = size_.load(std::memory_order_relaxed);
  if (n >= kCapacity) return nullptr;
  slots_[n] = std::move(r);
  size_.store(n + 1, std::memory_order_release);
  return slots_[n].get();
}

Replica* ReplicaList::Find(const std::string& name) const {
  for (Replica* r : *this) {
    if (r->name() == name) return r;
  }
  return nullptr;
}

std::vector<Replica*> ReplicaList::Listed() const {
  std::vector<Replica*> out;
  for (Replica* r : *this) {
    if (r->listed()) out.push_back(r);
  }
  return out;
}

size_t ReplicaList::num_listed() const {
  size_t n = 0;
  for (Replica* r : *this) n += r->listed() ? 1 : 0;
  return n;
}

void Replica::SetScraped(double waiting, double running, double kv_usage) {
  queue_length_.store(waiting);
  running_.store(running);
  kv_usage_.store(kv_usage);
}

double Replica::EffectiveWeight(std::chrono::steady_clock::time_point now,
                                std::chrono::steady_clock::duration ramp) const {
  const double w = weight();
  if (ramp <= std::chrono::steady_clock::duration::zero()) return w;
  const double f = std::chrono::duration<double>(now - ready_since_.load()) / std::chrono::duration<double>(ramp);
  return w * std::clamp(f, 0.1, 1.0);
}

bool Replica::OnFailure(int64_t eject_after) {
  const int64_t n = consecutive_failures_.fetch_add(1) + 1;
  if (n < eject_after) return false;
  std::lock_guard<std::mutex> lock(mu_);
  good_probes_ = 0;
  if (health_.load() != Health::kHealthy) return false;
  health_.store(Health::kEjected);
  return true;
}

int Replica::OnProbe(bool ready, bool draining, int64_t readmit_after) {
  std::lock_guard<std::mutex> lock(mu_);
  draining_.store(draining);
  const Health h = health_.load();
  if (!ready) {
    good_probes_ = 0;
    if (draining) return 0;  // draining is not a failure: it just gets no new work
    if (h == Health::kEjected) return 0;
    health_.store(Health::kEjected);
    return h == Health::kHealthy ? -1 : 0;
  }
  ++good_probes_;
  if (h == Health::kHealthy) return 0;
  // The first probe of a replica never seen admits it at once; an ejected
  // one has to prove itself readmit_after times in a row.
  if (h == Health::kUnknown || good_probes_ >= readmit_after) {
    consecutive_failures_.store(0);
    ready_since_.store(std::chrono::steady_clock::now());
    if (warm_on_join_.load()) {
      warming_.store(true);
      joins_.fetch_add(1);
    }
    health_.store(Health::kHealthy);
    return h == Health::kEjected ? 1 : 0;
  }
  return 0;
}

void Replica::EndWarmup() {
  ready_since_.store(std::chrono::steady_clock::now());
  warming_.store(false);
}

std::vector<std::string> Replica::models() const {
  std::lock_guard<std::mutex> lock(models_mu_);
  return models_;
}

void Replica::set_models(std::vector<std::string> m) {
  std::lock_guard<std::mutex> lock(models_mu_);
  models_ = std::move(m);
}

bool Pool::saturated() const {
  const int64_t limit = config.max_requests_per_replica;
  if (limit <= 0) return false;
  return std::all_of(replicas.begin(), replicas.end(),
                     [limit](const Replica* r) { return !r->available() || r->outstanding_requests() >= limit; });
}

bool Pool::has_available() const {
  return std::any_of(replicas.begin(), replicas.end(), [](const Replica* r) { return r->available(); });
}

bool WithinLimits(const Pool& pool, const Replica& r) {
  if (pool.config.max_kv_usage < 1 && r.kv_usage() >= pool.config.max_kv_usage) return false;
  if (pool.config.max_queue > 0 && r.queue_length() >= static_cast<double>(pool.config.max_queue)) return false;
  return true;
}

void Pool::set_api_key(const std::string& key) {
  auto c = std::make_shared<Credentials>();
  c->api_key = key;
  c->key_digest = key.empty() ? "" : Sha256Hex(key);
  std::atomic_store(&credentials_, std::shared_ptr<const Credentials>(std::move(c)));
}

std::vector<std::pair<std::string, std::string>> Pool::AuthHeaders() const {
  auto c = credentials();
  if (c->api_key.empty()) return {};
  return {{"Authorization", "Bearer " + c->api_key}};
}

}  // namespace kvs::gateway
