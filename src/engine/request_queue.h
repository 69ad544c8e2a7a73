// RequestQueue: the engine's inbox, the only structure (besides the
// per-request streams) that other threads share with the engine thread.
// Producers push new requests and cancels; the engine thread drains them at
// the start of each step and sleeps on it when it has nothing to do.
//
// It also keeps what admission control needs across threads: the set of live
// request ids (unique; needed to route Cancel) and the number of queued
// requests (submitted, never yet scheduled, not finished), bounded by
// max_queued_requests.
// Thread-safety: all methods are thread-safe (one mutex).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

#include "base/status.h"
#include "engine/request.h"

namespace kvs::engine {

struct PendingRequest {
  Request request;  // request_id filled in
  std::shared_ptr<RequestStream> stream;
  Clock::time_point arrival_time;
};

class RequestQueue {
 public:
  explicit RequestQueue(int32_t max_queued_requests) : max_queued_(max_queued_requests) {}

  // Producer side. Assigns an id if the request has none. Unavailable once
  // closed; InvalidArgument for an id already live; ResourceExhausted when
  // max_queued_requests requests are queued.
  StatusOr<std::shared_ptr<RequestStream>> Push(Request request);
  // NotFound when no live request has this id (never submitted, or finished).
  Status Cancel(const std::string& request_id);

  // Engine side. Blocks until there is something to drain or the queue is
  // closed, unless `busy` (the engine has work anyway). False once closed.
  bool WaitForWork(bool busy);
  void Drain(std::vector<PendingRequest>* requests, std::vector<std::string>* cancels);
  // A queued request was scheduled for the first time.
  void OnAdmitted();
  // A request finished: its id is free again.
  void OnRetired(const std::string& request_id, bool was_queued);
  // Refuses new requests from now on and wakes the engine thread.
  void Close();

  int32_t num_pending() const;  // still in the inbox

 private:
  const int32_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PendingRequest> requests_;    // guarded by mu_
  std::vector<std::string> cancels_;        // guarded by mu_
  std::unordered_set<std::string> live_;    // guarded by mu_
  int32_t num_queued_ = 0;                  // guarded by mu_
  int64_t next_id_ = 0;                     // guarded by mu_
  bool closed_ = false;                     // guarded by mu_
};

}  // namespace kvs::engine
