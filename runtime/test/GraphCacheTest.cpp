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
  EXPECT_EQ(cache.next("a"), Action::WarmUp);
  EXPECT_EQ(cache.next("a"), Action::Capture);
  cache.captured("a", 7);
  EXPECT_EQ(cache.next("a"), Action::Replay);
  EXPECT_EQ(cache.replay("a"), 7);
  EXPECT_EQ(cache.next("a"), Action::Replay);
  EXPECT_EQ(cache.capturedCount(), 1u);
  // Another shape starts over.
  EXPECT_EQ(cache.next("b"), Action::WarmUp);
  EXPECT_EQ(cache.next("b"), Action::Capture);
}

TEST(GraphCache, KeysAlternatingKeepTheirGraphsSideBySide) {
  Cache cache;
  // A padded micro-batch between unpadded ones: neither graph is dropped.
  EXPECT_EQ(cache.next("a"), Action::WarmUp);
  EXPECT_EQ(cache.next("b"), Action::WarmUp);
  EXPECT_EQ(cache.next("a"), Action::Capture);
  cache.captured("a", 1);
  EXPECT_EQ(cache.next("b"), Action::Capture);
  cache.captured("b", 2);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(cache.next("a"), Action::Replay);
    EXPECT_EQ(cache.replay("a"), 1);
    EXPECT_EQ(cache.next("b"), Action::Replay);
    EXPECT_EQ(cache.replay("b"), 2);
  }
  EXPECT_EQ(cache.capturedCount(), 2u);
}

TEST(GraphCache, KeysBeyondTheMostKeptAreRefusedOnceThenRunEagerly) {
  Cache cache(2);
  EXPECT_EQ(cache.maxGraphs(), 2u);
  for (const char *key : {"a", "b"}) {
    cache.next(key);
    ASSERT_EQ(cache.next(key), Action::Capture);
    cache.captured(key, 0);
  }
  EXPECT_EQ(cache.next("c"), Action::WarmUp);
  EXPECT_EQ(cache.next("c"), Action::Refuse);
  EXPECT_EQ(cache.next("c"), Action::RunEagerly);
  EXPECT_EQ(cache.next("c"), Action::RunEagerly);
  // The kept ones still replay.
  EXPECT_EQ(cache.next("a"), Action::Replay);
  EXPECT_EQ(cache.capturedCount(), 2u);
  // A dropped graph frees its place for a key warmed up later.
  cache.failed("a", "its parameters moved");
  EXPECT_EQ(cache.next("d"), Action::WarmUp);
  EXPECT_EQ(cache.next("d"), Action::Capture);
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
}

TEST(GraphCache, ADroppedGraphIsReleased) {
  Cache cache;
  cache.next("a");
  cache.next("a");
  cache.captured("a", 7);
  cache.failed("a", "its parameters moved");
  EXPECT_EQ(cache.next("a"), Action::RunEagerly);
  EXPECT_EQ(cache.capturedCount(), 0u);
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
