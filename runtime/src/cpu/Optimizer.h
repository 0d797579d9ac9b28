//===- Optimizer.h - AdamW and SGD element updates on the host -*- C++ -*-===//
//
// The CPU's peer of cuda/optimizer.cu: torch.optim.AdamW's and SGD's
// updates of one parameter (f32, or bf16 updated in f32 and rounded once)
// from its FP32 gradient scaled by `gradScale` and its FP32 state.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_OPTIMIZER_H
#define TPRT_CPU_OPTIMIZER_H

#include "tprt/tprt.h"

namespace tprt::cpu {

/// SGD: weight decay into the gradient; the momentum buffer `m` starts as
/// the first gradient (dampening 0).
void sgdUpdate(Tensor &param, const float *g, float gradScale, float *m,
               float weightDecay, float momentum, float lr, bool first,
               bool withMomentum);
/// AdamW with PyTorch's bias corrections folded into `stepSize` and
/// `root2`; `decay` is 1 - lr * weight decay.
void adamwUpdate(Tensor &param, const float *g, float gradScale, float *m,
                 float *v, float decay, float beta1, float beta2,
                 float stepSize, float root2, float eps);

} // namespace tprt::cpu

#endif // TPRT_CPU_OPTIMIZER_H
