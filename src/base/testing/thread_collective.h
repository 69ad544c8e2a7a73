// ThreadGroup: a Collective (base/collective.h) for N threads of one process,
// so that tests run a tensor-parallel group without MPI. Sums are taken in
// rank order on every rank, so all ranks get the same bits.
// Thread-safety: member(r) is used by one thread per rank; the group
// outlives them.
#pragma once

#include <barrier>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "base/collective.h"

namespace kvs::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int n) : slots_(static_cast<size_t>(n)), sync_(n) {
    for (int r = 0; r < n; ++r) members_.push_back(std::make_unique<Member>(this, r));
  }
  Collective& member(int rank) { return *members_[static_cast<size_t>(rank)]; }

 private:
  class Member : public Collective {
   public:
    Member(ThreadGroup* g, int rank) : g_(g), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return static_cast<int>(g_->slots_.size()); }
    void DoAllReduceSum(std::span<float> data) override {
      std::vector<float>& mine = g_->slots_[static_cast<size_t>(rank_)];
      mine.assign(data.begin(), data.end());
      g_->sync_.arrive_and_wait();  // every rank's part is in its slot
      for (size_t i = 0; i < data.size(); ++i) {
        float s = 0.0f;
        for (const std::vector<float>& slot : g_->slots_) s += slot[i];
        data[i] = s;
      }
      g_->sync_.arrive_and_wait();  // every rank has read the slots
    }
    void Broadcast(std::vector<uint8_t>& bytes, int root) override {
      if (rank_ == root) g_->shared_ = bytes;
      g_->sync_.arrive_and_wait();
      if (rank_ != root) bytes = g_->shared_;
      g_->sync_.arrive_and_wait();
    }

   private:
    ThreadGroup* g_;
    int rank_;
  };

  std::vector<std::vector<float>> slots_;  // [rank] the part each rank contributes
  std::vector<uint8_t> shared_;            // the broadcast in flight
  std::barrier<> sync_;
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace kvs::testing
