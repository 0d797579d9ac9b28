//===- WatchdogTest.cpp - the collective timeout's bookkeeping on the host ===//
//
// cuda::CollectiveQueue decides when the NCCL backend gives up on a
// collective; here its events are integers that "finish" when the test
// says so, and time is whatever the test passes.
//
//===----------------------------------------------------------------------===//

#include "cuda/Watchdog.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

using namespace tprt::cuda;
using Queue = CollectiveQueue<int>;
using std::chrono::seconds;

namespace {

struct FakeStream {
  std::set<int> finished;
  std::vector<int> released;
  auto isFinished() {
    return [this](int e) { return finished.count(e) > 0; };
  }
  auto release() {
    return [this](int e) { released.push_back(e); };
  }
};

const Queue::Clock::time_point t0{};

TEST(Watchdog, NothingIsOverdueWithinTheTimeout) {
  Queue queue(seconds(10));
  FakeStream s;
  queue.push(1, "first", t0);
  EXPECT_EQ(queue.overdue(t0 + seconds(10), s.isFinished(), s.release()),
            nullptr);
  const Queue::Entry *late =
      queue.overdue(t0 + seconds(11), s.isFinished(), s.release());
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->what, "first");
}

TEST(Watchdog, FinishedCollectivesAreReleasedInOrder) {
  Queue queue(seconds(10));
  FakeStream s;
  for (int e = 1; e <= 3; ++e)
    queue.push(e, "c" + std::to_string(e), t0);
  s.finished = {1, 2};
  EXPECT_EQ(queue.overdue(t0 + seconds(1), s.isFinished(), s.release()),
            nullptr);
  EXPECT_EQ(s.released, (std::vector<int>{1, 2}));
  EXPECT_EQ(queue.size(), 1u);
}

TEST(Watchdog, OnlyTheFrontIsReleased) {
  // Stream order: a later event cannot have finished before an earlier
  // one; if a fake says so, the earlier one still holds the front.
  Queue queue(seconds(10));
  FakeStream s;
  queue.push(1, "first", t0);
  queue.push(2, "second", t0);
  s.finished = {2};
  const Queue::Entry *late =
      queue.overdue(t0 + seconds(20), s.isFinished(), s.release());
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->what, "first");
  EXPECT_TRUE(s.released.empty());
}

TEST(Watchdog, TheClockStartsWhenTheStreamReachesACollective) {
  // Queued at 0, behind a collective that took until 100: the second one
  // has waited 5 s at 105, not 105 s.
  Queue queue(seconds(10));
  FakeStream s;
  queue.push(1, "first", t0);
  queue.push(2, "second", t0);
  EXPECT_NE(queue.overdue(t0 + seconds(100), s.isFinished(), s.release()),
            nullptr); // the first one, waiting 100 s
  s.finished = {1};
  EXPECT_EQ(queue.overdue(t0 + seconds(100), s.isFinished(), s.release()),
            nullptr);
  EXPECT_EQ(queue.overdue(t0 + seconds(105), s.isFinished(), s.release()),
            nullptr);
  const Queue::Entry *late =
      queue.overdue(t0 + seconds(111), s.isFinished(), s.release());
  ASSERT_NE(late, nullptr);
  EXPECT_EQ(late->what, "second");
}

TEST(Watchdog, AZeroTimeoutNeverExpires) {
  Queue queue(seconds(0));
  FakeStream s;
  queue.push(1, "first", t0);
  EXPECT_EQ(queue.overdue(t0 + seconds(1000000), s.isFinished(), s.release()),
            nullptr);
  s.finished = {1};
  queue.overdue(t0 + seconds(1000001), s.isFinished(), s.release());
  EXPECT_TRUE(queue.empty());
}

TEST(Watchdog, DescriptionNamesOpSizeAndGroup) {
  EXPECT_EQ(describeCollective("all-reduce", 1024, "f32", "tp", 2),
            "all-reduce of 1024 f32 elements on the tp group (2 ranks)");
}

} // namespace
