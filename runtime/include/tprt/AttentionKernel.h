//===- AttentionKernel.h - the GPU kernel of an attention call -*- C++ -*-===//
//
// On the GPU an attention call (forward and backward) runs either cuDNN's
// fused scaled-dot-product attention or the runtime's own tiled kernels.
// The rule is one function of what the call is, shared by the runtime (which
// applies it per call, then asks cuDNN whether it takes the graph) and the
// plan report (tpc --report, which says it per attention op).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_ATTENTIONKERNEL_H
#define TPRT_ATTENTIONKERNEL_H

#include <cstdint>

namespace tprt {

enum class AttentionKernel {
  /// cuDNN's fused flash attention (forward, and backward from the forward's
  /// log-sum-exp); the runtime falls back to Tiled where cuDNN is not found
  /// or refuses the graph.
  CudnnFused,
  /// The runtime's tiled kernels (online softmax, f32 arithmetic).
  Tiled,
};

/// What the choice depends on.
struct AttentionProblem {
  /// bf16 or f16 operands (cuDNN's fused attention takes no f32).
  bool reducedPrecision = false;
  int64_t headDim = 0;
  /// Queries and keys per sequence (the queries are the last `sq` of the
  /// `skv` positions).
  int64_t sq = 0, skv = 0;
  bool causal = false;
  /// 0: none.
  int64_t window = 0;
  /// 0: none.
  double softcap = 0;
  bool keyMask = false;
};

struct AttentionKernelChoice {
  AttentionKernel kernel;
  /// Why the tiled kernel, or what cuDNN runs.
  const char *reason;
};

/// The kernel for `p`. cuDNN takes a key mask as an additive bias, but not
/// beside causal masking aligned at the last query (sq < skv); a window
/// needs the causal mask. What depends on cuDNN's version (a window beside
/// a bias needs 9.10.2) cuDNN itself decides when the graph is built.
inline AttentionKernelChoice chooseAttentionKernel(const AttentionProblem &p) {
  auto tiled = [](const char *why) {
    return AttentionKernelChoice{AttentionKernel::Tiled, why};
  };
  if (!p.reducedPrecision)
    return tiled("f32 operands (cuDNN's fused attention takes bf16 and f16)");
  if (p.softcap > 0)
    return tiled("soft-capped scores");
  if (p.headDim % 8 != 0 || p.headDim > 256)
    return tiled("head_dim is not a multiple of 8 up to 256");
  if (p.sq > p.skv)
    return tiled("more queries than keys");
  if (p.window > 0 && !p.causal)
    return tiled("a sliding window without the causal mask");
  if (p.keyMask && p.causal && p.sq != p.skv)
    return tiled("a key mask with queries after cached keys");
  return {AttentionKernel::CudnnFused,
          p.keyMask ? "cuDNN fused attention, the key mask as a bias"
                    : "cuDNN fused attention"};
}

} // namespace tprt

#endif // TPRT_ATTENTIONKERNEL_H
