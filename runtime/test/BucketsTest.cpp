//===- BucketsTest.cpp - tprt::planBuckets --------------------------------===//

#include "tprt/Buckets.h"

#include <gtest/gtest.h>

namespace {

using Ranges = std::vector<std::pair<size_t, size_t>>;

TEST(PlanBuckets, FillsUpToTheLimitInOrder) {
  // 4 + 4 fills 8 exactly; the next 4 starts a bucket.
  EXPECT_EQ(tprt::planBuckets({4, 4, 4, 2}, 8), (Ranges{{0, 2}, {2, 4}}));
}

TEST(PlanBuckets, ALargerGradientIsABucketOfItsOwn) {
  EXPECT_EQ(tprt::planBuckets({2, 20, 2, 2}, 8),
            (Ranges{{0, 1}, {1, 2}, {2, 4}}));
  EXPECT_EQ(tprt::planBuckets({20}, 8), (Ranges{{0, 1}}));
}

TEST(PlanBuckets, KeepsTheOrderItIsGiven) {
  // Greedy, not bin packing: 5 then 5 do not share a bucket of 8 even
  // though 3 would fit with either.
  EXPECT_EQ(tprt::planBuckets({5, 5, 3}, 8), (Ranges{{0, 1}, {1, 3}}));
}

TEST(PlanBuckets, NoGradientsNoBuckets) {
  EXPECT_TRUE(tprt::planBuckets({}, 8).empty());
}

} // namespace
