// FairQueue: a burst of one tenant does not starve another; weights share
// the turns; cancelled waiters are skipped; an idle tenant saves no credit.
#include "gateway/fair_queue.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvs::gateway {
namespace {

std::vector<std::string> Drain(FairQueue& q) {
  std::vector<std::string> order;
  while (q.size() > 0) q.PopAndResume();
  return order;
}

TEST(FairQueueTest, ABurstDoesNotStarveAnotherTenant) {
  FairQueue q;
  std::vector<std::string> served;
  // Tenant "bulk" queues 20 long prompts first, then "chat" 3 short ones.
  for (int i = 0; i < 20; ++i) q.Push("bulk", 1, 4000, [&] { served.push_back("bulk"); });
  for (int i = 0; i < 3; ++i) q.Push("chat", 1, 500, [&] { served.push_back("chat"); });
  EXPECT_EQ(q.size(), 23u);
  Drain(q);
  ASSERT_EQ(served.size(), 23u);
  // chat's three requests are all served within the first four turns.
  int chat_in_first4 = 0;
  for (int i = 0; i < 4; ++i) chat_in_first4 += served[static_cast<size_t>(i)] == "chat";
  EXPECT_EQ(chat_in_first4, 3);
  EXPECT_FALSE(q.PopAndResume());
}

TEST(FairQueueTest, WeightsShareTheTurnsAndCancelledWaitersAreSkipped) {
  FairQueue q;
  std::vector<std::string> served;
  std::vector<FairQueue::Cancel> cancels;
  for (int i = 0; i < 30; ++i) {
    q.Push("gold", 3, 100, [&] { served.push_back("gold"); });
    q.Push("free", 1, 100, [&] { served.push_back("free"); });
  }
  auto c = q.Push("gone", 1, 1, [&] { served.push_back("gone"); });
  c->store(true);
  // The first 20 turns: gold 3 for every free 1.
  for (int i = 0; i < 20; ++i) q.PopAndResume();
  int gold = 0;
  for (const auto& s : served) gold += s == "gold";
  EXPECT_EQ(gold, 15);
  Drain(q);
  EXPECT_EQ(std::count(served.begin(), served.end(), "gone"), 0);
  EXPECT_EQ(served.size(), 60u);
  // Idle since: "free" starts at the current virtual time, not with saved credit.
  served.clear();
  for (int i = 0; i < 3; ++i) q.Push("gold", 1, 100, [&] { served.push_back("gold"); });
  q.Push("late", 1, 100, [&] { served.push_back("late"); });
  Drain(q);
  EXPECT_EQ(served[0], "gold");
  EXPECT_EQ(served[1], "late");
}

}  // namespace
}  // namespace kvs::gateway
