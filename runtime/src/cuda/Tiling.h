//===- Tiling.h - index logic of the CUDA kernels ---------------*- C++ -*-===//
//
// The CUDA kernels' launch geometry (the attention rule they tile is
// common/Attention.h's).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_TILING_H
#define TPRT_CUDA_TILING_H

#include "common/Attention.h"

#include <cstdint>

namespace tprt {
namespace cuda {

/// Query rows per block: one per warp.
constexpr int kAttentionRowsPerBlock = 8;

/// A grid-stride loop of the calling thread over [0, n) (device code).
#define TPRT_GRID_STRIDE(i, n)                                                 \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

/// Blocks for a grid-stride loop over `n` elements with `threads` each.
TPRT_HOST_DEVICE inline unsigned gridBlocks(int64_t n, int threads) {
  int64_t blocks = (n + threads - 1) / threads;
  const int64_t cap = 65535;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > cap ? cap : blocks);
}

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_TILING_H
