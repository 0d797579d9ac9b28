//===- Cudnn.h - cuDNN's fused attention, opened at run time ----*- C++ -*-===//
//
// cuDNN is opened with dlopen on the first attention call that
// chooseAttentionKernel gives it (cudnn.cpp): from TPRT_CUDNN_LIBRARY when
// set, the CUDA toolkit's directory the build knew, then the loader's path.
// Its graphs are built through the cuDNN frontend (a header-only library)
// once per shape and reused. A GPU without cuDNN, or a graph cuDNN refuses,
// is not an error: the caller runs the tiled kernels.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_CUDNN_H
#define TPRT_CUDA_CUDNN_H

#include "tprt/tprt.h"

#include <cstdint>
#include <string>

namespace tprt {
namespace cuda {

/// One fused attention call: q [batch, sq, heads * headDim], k and v
/// [batch, skv, kvHeads * headDim], all of `dtype` (bf16 or f16); queries
/// are the last sq positions. With `bias`, a [batch, 1, 1, skv] additive
/// bias of `dtype` (the key mask).
struct FusedAttentionShape {
  DType dtype;
  int64_t batch, sq, skv, heads, kvHeads, headDim;
  double scale;
  bool causal;
  int64_t window;
  bool bias;

  /// What cuDNN's graph cache tells shapes apart by.
  std::string key() const;
};

/// Whether this build can call cuDNN (it was compiled with the frontend's
/// headers) and cuDNN opens; otherwise `why` says what was tried.
bool cudnnAvailable(std::string &why);

/// out = attention(q, k, v) and, when `stats` is not null, each row's
/// log-sum-exp into `stats` ([batch, heads, sq] f32, what the backward
/// reads). False, with cuDNN's reason in `why` and nothing written, when
/// cuDNN refuses the graph.
bool cudnnAttentionForward(const FusedAttentionShape &shape, const void *q,
                           const void *k, const void *v, const void *bias,
                           void *out, float *stats, std::string &why);

/// dq, dk, dv of the call whose forward wrote `out` and `stats`.
bool cudnnAttentionBackward(const FusedAttentionShape &shape, const void *q,
                            const void *k, const void *v, const void *bias,
                            const void *out, const void *dout,
                            const float *stats, void *dq, void *dk, void *dv,
                            std::string &why);

/// How many calls (forward or backward) cuDNN has run in this process.
int64_t cudnnAttentionRuns();

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_CUDNN_H
