// FairQueue: requests waiting for a pool whose replicas are all at
// max_requests_per_replica, served by weighted fair queueing across
// tenants (self-clocked fair queueing): a request of tenant t costing c
// tokens gets the finish tag F = max(V, F_last(t)) + c / weight(t), the
// smallest tag is served first and V becomes its tag. So each backlogged
// tenant gets capacity in proportion to its weight (key file
// tenants.X.weight), whatever the others send: one tenant's burst of long
// prompts queues behind its own earlier requests, not in front of others.
// A tenant that was idle starts at V (no credit saved up while idle).
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace kvs::gateway {

class FairQueue {
 public:
  using Resume = std::function<void()>;
  using Cancel = std::shared_ptr<std::atomic<bool>>;  // set it to drop a waiting request

  // Adds a waiting request; `resume` runs (on the caller of PopAndResume)
  // when it is its turn.
  Cancel Push(const std::string& tenant, double weight, double cost, Resume resume);
  // Runs the resume of the waiting request with the smallest tag, skipping
  // cancelled ones; false when none waits.
  bool PopAndResume();
  size_t size() const;

 private:
  struct Entry {
    std::string tenant;
    Resume resume;
    Cancel cancelled;
  };
  mutable std::mutex mu_;
  double vtime_ = 0;                                          // guarded by mu_
  uint64_t next_seq_ = 0;                                     // guarded by mu_
  std::map<std::string, double> last_finish_;                 // guarded by mu_
  std::map<std::tuple<double, uint64_t>, Entry> waiting_;     // guarded by mu_; by (tag, arrival)
};

}  // namespace kvs::gateway
