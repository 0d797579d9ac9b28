//===- CudaTilingTest.cpp - the CUDA kernels' index logic on the host -----===//
//
// The attention kernels visit only the key tiles attentionKeyRange gives a
// block of query rows, and mask keys with attentionVisible
// (common/Attention.h): both are checked here against tp.attention's rule,
// written out independently, for every query and key of many shapes (no GPU
// needed); and the CUDA grid size.
//
//===----------------------------------------------------------------------===//

#include "cuda/Tiling.h"

#include <gtest/gtest.h>

using namespace tprt;
using tprt::cuda::gridBlocks;
using tprt::cuda::kAttentionRowsPerBlock;

namespace {

/// tp.attention's rule (TPOps.td), written out independently of
/// common/Attention.h, which both kernels share.
bool cpuVisible(int64_t pos, int64_t j, bool causal, int64_t window) {
  if (causal && j > pos)
    return false;
  if (window > 0 && pos - j >= window)
    return false;
  return true;
}

TEST(CudaTiling, VisibilityMatchesTheCpuKernel) {
  for (bool causal : {false, true})
    for (int64_t window : {0, 1, 3, 32, 33})
      for (int64_t pos = 0; pos < 80; ++pos)
        for (int64_t j = 0; j < 80; ++j)
          EXPECT_EQ(attentionVisible(pos, j, causal, window),
                    cpuVisible(pos, j, causal, window))
              << "pos " << pos << " key " << j << " causal " << causal
              << " window " << window;
}

TEST(CudaTiling, VisibleKeysAreExactlyTheVisibleOnes) {
  for (bool causal : {false, true})
    for (int64_t window : {0, 1, 3, 32, 33})
      for (int64_t skv : {1, 7, 40, 80})
        for (int64_t pos = 0; pos < 90; ++pos) {
          KeyRange keys = attentionVisibleKeys(pos, skv, causal, window);
          ASSERT_LE(keys.begin, keys.end);
          for (int64_t j = 0; j < skv; ++j)
            EXPECT_EQ(j >= keys.begin && j < keys.end,
                      cpuVisible(pos, j, causal, window))
                << "pos " << pos << " key " << j << " of " << skv << " causal "
                << causal << " window " << window;
        }
}

TEST(CudaTiling, KeyRangeHoldsEveryVisibleKeyOfTheBlock) {
  int64_t visited = 0, visible = 0;
  for (bool causal : {false, true})
    for (int64_t window : {0, 1, 5, 32, 40, 100})
      for (int64_t skv : {1, 7, 31, 32, 33, 64, 97, 200})
        for (int64_t sq : {int64_t(1), skv / 2 + 1, skv}) {
          if (sq > skv)
            continue;
          int64_t offset = skv - sq;
          for (int64_t first = 0; first < sq; first += kAttentionRowsPerBlock) {
            int64_t last = std::min(sq - 1, first + kAttentionRowsPerBlock - 1);
            KeyRange range = attentionKeyRange(first + offset, last + offset,
                                               skv, causal, window);
            ASSERT_GE(range.begin, 0);
            ASSERT_EQ(range.begin % kAttentionKeyTile, 0);
            ASSERT_LE(range.end, skv);
            ASSERT_LE(range.begin, range.end);
            visited += range.end - range.begin;
            for (int64_t row = first; row <= last; ++row)
              for (int64_t j = 0; j < skv; ++j)
                if (cpuVisible(row + offset, j, causal, window)) {
                  ++visible;
                  EXPECT_TRUE(j >= range.begin && j < range.end)
                      << "key " << j << " of query " << row << " (sq " << sq
                      << ", skv " << skv << ", causal " << causal << ", window "
                      << window << ") is outside [" << range.begin << ", "
                      << range.end << ")";
                }
          }
        }
  // The ranges skip keys (the causal future, the window's past).
  EXPECT_GT(visible, 0);
  EXPECT_LT(visited, 2 * 6 * 8 * 3 * 200 * 200);
}

TEST(CudaTiling, CausalBlocksSkipTheFuture) {
  KeyRange r = attentionKeyRange(0, 7, 1024, /*causal=*/true, /*window=*/0);
  EXPECT_EQ(r.begin, 0);
  EXPECT_EQ(r.end, 8);
  r = attentionKeyRange(512, 519, 1024, /*causal=*/true, /*window=*/64);
  EXPECT_EQ(r.begin, 448); // 512 - 64 + 1 = 449, down to a tile
  EXPECT_EQ(r.end, 520);
}

TEST(CudaTiling, GridBlocks) {
  EXPECT_EQ(gridBlocks(0, 256), 1u);
  EXPECT_EQ(gridBlocks(256, 256), 1u);
  EXPECT_EQ(gridBlocks(257, 256), 2u);
  EXPECT_EQ(gridBlocks(int64_t(1) << 40, 256), 65535u);
}

} // namespace
