//===- Collectives.cpp - the all-reduce halves over a communicator --------===//
//
// The Runtime entries of tprt/Calls.def that only hand a tensor's storage
// to the group's communicator, whichever device it is on (MPI on the host,
// NCCL on the GPU): the consuming all-reduce and the all-reduce halves.
//
//===----------------------------------------------------------------------===//

#include "tprt/tprt.h"

#include <utility>

namespace tprt {

Tensor all_reduce_sum_consuming(Context &ctx, Tensor &x) {
  Tensor taken = std::exchange(x, Tensor());
  if (taken.dtype() != DType::F32 || !taken.soleOwner())
    return all_reduce_sum(ctx, taken);
  ctx.tp().allReduceSum(taken.f32(), taken.numel());
  return taken;
}

Tensor all_reduce_sum_start_consuming(Context &ctx, Tensor &x) {
  Tensor taken = std::exchange(x, Tensor());
  if (taken.dtype() != DType::F32 || !taken.soleOwner())
    return all_reduce_sum_start(ctx, taken);
  ctx.tp().startAllReduceSum(taken.f32(), taken.numel());
  return taken;
}

Tensor all_reduce_sum_wait_consuming(Context &ctx, Tensor &pending) {
  ctx.tp().finishAllReduceSum();
  Tensor taken = std::exchange(pending, Tensor());
  return taken;
}

Tensor all_reduce_sum_wait(Context &ctx, const Tensor &pending) {
  Tensor shared = pending;
  Tensor sum = all_reduce_sum_wait_consuming(ctx, shared);
  return scale(ctx, sum, 1.0); // a copy: the result is a new tensor
}

} // namespace tprt
