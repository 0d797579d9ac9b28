//===- GraphCacheTest.cpp - CUDA graphs' bookkeeping, on the host ---------===//
//
// Which call of a shape runs eagerly, is captured or replays
// (common/GraphCache.h, cuda/graphs.cpp), and the scope in which tprt::fatal
// throws instead of stopping, which a capture runs under: no GPU needed.
//
//===----------------------------------------------------------------------===//

#include "common/GraphCache.h"
#include "common/FatalScope.h"
#include "tprt/tprt.h"

#include <gtest/gtest.h>

using namespace tprt;

namespace {

using Cache = GraphCache<int>;
using Action = Cache::Action;

TEST(GraphCache, WarmsUpThenCapturesThenReplays) {
  Cache cache;
  EXPECT_EQ(cache.next("a"), Action::RunEagerly);
  EXPECT_EQ(cache.next("a"), Action::Capture);
  cache.captured("a", 7);
  EXPECT_EQ(cache.next("a"), Action::Replay);
  EXPECT_EQ(cache.replay("a"), 7);
  EXPECT_EQ(cache.next("a"), Action::Replay);
  EXPECT_EQ(cache.capturedCount(), 1u);
  ASSERT_NE(cache.capturedKey(), nullptr);
  EXPECT_EQ(*cache.capturedKey(), "a");
  // Another shape starts over.
  EXPECT_EQ(cache.next("b"), Action::RunEagerly);
  EXPECT_EQ(cache.next("b"), Action::Capture);
}

TEST(GraphCache, AFailedCaptureStaysEagerAndIsSaidOnce) {
  Cache cache;
  cache.next("a");
  EXPECT_EQ(cache.next("a"), Action::Capture);
  EXPECT_TRUE(cache.failed("a", "cudaMemcpy from pageable memory"));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(cache.next("a"), Action::RunEagerly);
  cache.next("b");
  cache.next("b");
  // The same reason for another shape is not said again; a new one is.
  EXPECT_FALSE(cache.failed("b", "cudaMemcpy from pageable memory"));
  EXPECT_TRUE(cache.failed("c", "cudaStreamSynchronize"));
  EXPECT_EQ(cache.capturedCount(), 0u);
  EXPECT_EQ(cache.capturedKey(), nullptr);
}

TEST(GraphCache, ADroppedGraphIsReleased) {
  Cache cache;
  cache.next("a");
  cache.next("a");
  cache.captured("a", 7);
  cache.failed("a", "a call of another shape");
  EXPECT_EQ(cache.next("a"), Action::RunEagerly);
  EXPECT_EQ(cache.capturedKey(), nullptr);
}

TEST(FatalScope, FatalThrowsOnlyInsideTheScope) {
  EXPECT_FALSE(ThrowingFatal::active());
  {
    ThrowingFatal scope;
    EXPECT_TRUE(ThrowingFatal::active());
    try {
      fatal("cudaMemcpyAsync: cudaErrorStreamCaptureUnsupported");
      ADD_FAILURE() << "fatal returned";
    } catch (const FatalError &e) {
      EXPECT_STREQ(e.what(),
                   "cudaMemcpyAsync: cudaErrorStreamCaptureUnsupported");
    }
  }
  EXPECT_FALSE(ThrowingFatal::active());
  EXPECT_EXIT(fatal("outside"), testing::ExitedWithCode(1), "outside");
}

} // namespace
