#include "frontend/work_queue.h"

#include <atomic>
#include <chrono>
#include <future>

#include <gtest/gtest.h>

namespace kvs::frontend {
namespace {

TEST(WorkQueue, RunsTasksAndReportsItsShape) {
  WorkQueue q(3, 5);
  EXPECT_EQ(q.threads(), 3);
  EXPECT_EQ(q.max_queued(), 5);
  std::atomic<int> ran{0};
  std::promise<void> done;
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(q.TrySubmit([&] {
      if (ran.fetch_add(1) == 3) done.set_value();
    }));
  }
  ASSERT_EQ(done.get_future().wait_for(std::chrono::seconds(10)), std::future_status::ready);
  EXPECT_EQ(ran.load(), 4);
  q.Stop();  // joined before `done` (declared after q) is destroyed
}

TEST(WorkQueue, RefusesBeyondTheBoundButSubmitAlwaysQueues) {
  WorkQueue q(1, 2);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::promise<void> started;
  ASSERT_TRUE(q.TrySubmit([&] {
    started.set_value();
    gate.wait();
  }));
  started.get_future().wait();
  EXPECT_EQ(q.busy(), 1);
  // The one thread is busy: two may wait, the third is refused.
  std::atomic<int> ran{0};
  EXPECT_TRUE(q.TrySubmit([&] { ++ran; }));
  EXPECT_TRUE(q.TrySubmit([&] { ++ran; }));
  EXPECT_FALSE(q.TrySubmit([&] { ++ran; }));
  EXPECT_EQ(q.queued(), 2);
  q.Submit([&] { ++ran; });  // must-run work ignores the bound
  EXPECT_EQ(q.queued(), 3);
  release.set_value();
  q.Stop();  // runs what is queued, then joins
  EXPECT_EQ(ran.load(), 3);
  EXPECT_EQ(q.queued(), 0);
  EXPECT_EQ(q.busy(), 0);
  EXPECT_FALSE(q.TrySubmit([] {}));
  q.Submit([&] { ++ran; });  // dropped after Stop
  q.Stop();                  // idempotent
  EXPECT_EQ(ran.load(), 3);
}

TEST(WorkQueue, IdleThreadsTakeTasksBeyondAZeroBound) {
  WorkQueue q(2, 0);
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> started{0};
  // Each idle thread takes one task: neither waits.
  EXPECT_TRUE(q.TrySubmit([&] {
    ++started;
    gate.wait();
  }));
  EXPECT_TRUE(q.TrySubmit([&] {
    ++started;
    gate.wait();
  }));
  while (started.load() < 2) std::this_thread::yield();
  EXPECT_FALSE(q.TrySubmit([] {}));
  release.set_value();
  q.Stop();  // the workers are done with the gate before it is destroyed (it was declared after q)
}

}  // namespace
}  // namespace kvs::frontend
