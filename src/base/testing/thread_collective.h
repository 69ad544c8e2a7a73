// ThreadGroup: a Collective (base/collective.h) for N threads of one process,
// so that tests run a tensor-parallel group without MPI. Sums are taken in
// rank order on every rank, so all ranks get the same bits.
// Thread-safety: member(r) is used by one thread per rank; the group
// outlives them.
#pragma once

#include <algorithm>
#include <barrier>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <tuple>
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
    void Broadcast(std::vector<uint8_t>& bytes, int root) override {
      if (rank_ == root) g_->shared_ = bytes;
      g_->sync_.arrive_and_wait();
      if (rank_ != root) bytes = g_->shared_;
      g_->sync_.arrive_and_wait();
    }
    // Sends are buffered: a mailbox per (from, to, tag).
    void Send(std::span<const float> data, int peer, int tag) override {
      std::lock_guard<std::mutex> lock(g_->mu_);
      g_->mail_[{rank_, peer, tag}].emplace_back(data.begin(), data.end());
      g_->cv_.notify_all();
    }
    void DoRecv(std::span<float> data, int peer, int tag) override {
      std::unique_lock<std::mutex> lock(g_->mu_);
      auto& box = g_->mail_[{peer, rank_, tag}];
      g_->cv_.wait(lock, [&] { return !box.empty(); });
      std::copy_n(box.front().begin(), std::min(box.front().size(), data.size()), data.begin());
      box.pop_front();
    }
    void PostRecv(std::span<float> data, int peer, int tag) override { posted_.push_back({data, peer, tag}); }
    void DoWaitPosted() override {
      for (const auto& [data, peer, tag] : posted_) DoRecv(data, peer, tag);
      posted_.clear();
    }
    Collective* Split(int color, int key) override {
      {
        std::lock_guard<std::mutex> lock(g_->mu_);
        g_->split_[rank_] = {color, key};
      }
      g_->sync_.arrive_and_wait();
      Collective* mine = nullptr;
      {
        std::lock_guard<std::mutex> lock(g_->mu_);
        std::vector<std::pair<int, int>> same;  // (key, rank) of this color
        for (const auto& [r, ck] : g_->split_) {
          if (ck.first == color) same.emplace_back(ck.second, r);
        }
        std::sort(same.begin(), same.end());
        auto& child = g_->children_[{generation_, color}];
        if (child == nullptr) child = std::make_unique<ThreadGroup>(static_cast<int>(same.size()));
        const auto at = std::find(same.begin(), same.end(), std::make_pair(key, rank_)) - same.begin();
        mine = &child->member(static_cast<int>(at));
      }
      ++generation_;
      g_->sync_.arrive_and_wait();
      return mine;
    }

   protected:
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

   private:
    ThreadGroup* g_;
    int rank_;
    int generation_ = 0;  // Splits so far (each a collective)
    std::vector<std::tuple<std::span<float>, int, int>> posted_;
  };

  std::vector<std::vector<float>> slots_;  // [rank] the part each rank contributes
  std::vector<uint8_t> shared_;            // the broadcast in flight
  std::barrier<> sync_;
  std::mutex mu_;                          // guards the below
  std::condition_variable cv_;
  std::map<std::tuple<int, int, int>, std::deque<std::vector<float>>> mail_;  // (from, to, tag)
  std::map<int, std::pair<int, int>> split_;                                  // rank -> (color, key)
  std::map<std::pair<int, int>, std::unique_ptr<ThreadGroup>> children_;      // (generation, color)
  std::vector<std::unique_ptr<Member>> members_;
};

}  // namespace kvs::testing
