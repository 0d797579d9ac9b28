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
#include <string>
#include <vector>

using namespace tprt::cuda;
using Queue = CollectiveQueue<int>;
using std::chrono::seconds;

namespace {

const Queue::Clock::time_point t0{};

/// Events that finish when the test says so, and the ones released.
struct FakeStream {
  std::set<int> finished;
  std::vector<int> released;

  /// The name of the collective `queue` finds overdue `after` seconds
  /// from t0, or "" when none is.
  std::string overdue(Queue &queue, int64_t after) {
    const Queue::Entry *late = queue.overdue(
        t0 + seconds(after), [this](int e) { return finished.count(e) > 0; },
        [this](int e) { released.push_back(e); });
    return late ? late->what : "";
  }
};

TEST(Watchdog, NothingIsOverdueWithinTheTimeout) {
  Queue queue(seconds(10));
  FakeStream s;
  queue.push(1, "first", t0);
  EXPECT_EQ(s.overdue(queue, 10), "");
  EXPECT_EQ(s.overdue(queue, 11), "first");
}

TEST(Watchdog, FinishedCollectivesAreReleasedInOrder) {
  Queue queue(seconds(10));
  FakeStream s;
  for (int e = 1; e <= 3; ++e)
    queue.push(e, "c" + std::to_string(e), t0);
  s.finished = {1, 2};
  EXPECT_EQ(s.overdue(queue, 1), "");
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
  EXPECT_EQ(s.overdue(queue, 20), "first");
  EXPECT_TRUE(s.released.empty());
}

TEST(Watchdog, TheClockStartsWhenTheStreamReachesACollective) {
  // Queued at 0, behind a collective that took until 100: the second one
  // has waited 5 s at 105, not 105 s.
  Queue queue(seconds(10));
  FakeStream s;
  queue.push(1, "first", t0);
  queue.push(2, "second", t0);
  EXPECT_EQ(s.overdue(queue, 100), "first"); // waiting 100 s
  s.finished = {1};
  EXPECT_EQ(s.overdue(queue, 100), "");
  EXPECT_EQ(s.overdue(queue, 105), "");
  EXPECT_EQ(s.overdue(queue, 111), "second");
}

TEST(Watchdog, AZeroTimeoutNeverExpires) {
  Queue queue(seconds(0));
  FakeStream s;
  queue.push(1, "first", t0);
  EXPECT_EQ(s.overdue(queue, 1000000), "");
  s.finished = {1};
  s.overdue(queue, 1000001);
  EXPECT_TRUE(queue.empty());
}

TEST(Watchdog, DescriptionNamesOpSizeAndGroup) {
  EXPECT_EQ(describeCollective("all-reduce", 1024, "f32", "tp", 2),
            "all-reduce of 1024 f32 elements on the tp group (2 ranks)");
}

} // namespace
