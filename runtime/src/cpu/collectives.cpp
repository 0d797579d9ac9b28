//===- collectives.cpp - CPU kernels of the collectives -------------------===//
//
// cpu::Name of the collectives over the tensor-parallel group
// (tprt/Calls.def): host tensors summed, gathered or scattered through the
// group's MPI communicator, f32 (a reduced type summed in an f32 copy).
//
//===----------------------------------------------------------------------===//

#include "KernelUtils.h"
#include "common/Checks.h"
#include "ops/Backends.h"

#include <algorithm>

namespace tprt {

Tensor cpu::all_reduce_sum(Context &ctx, const Tensor &x) {
  requireF32(x, "all_reduce_sum", "the input");
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  std::copy_n(x.f32(), x.numel(), out.f32());
  ctx.tp().allReduceSum(out.f32(), out.numel());
  return out;
}

Tensor cpu::all_reduce_sum_start(Context &ctx, const Tensor &x) {
  // Another type is summed whole, in an f32 copy narrowed after the sum.
  if (x.dtype() != DType::F32)
    return tprt::all_reduce_sum(ctx, x);
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  std::copy_n(x.f32(), x.numel(), out.f32());
  ctx.tp().startAllReduceSum(out.f32(), out.numel());
  return out;
}

Tensor cpu::all_gather(Context &ctx, const Tensor &x, int64_t axis) {
  requireF32(x, "all_gather", "the input");
  AxisView v(x, axis, "all_gather");
  int64_t ranks = ctx.tp().size(), me = ctx.tp().rank();
  std::vector<int64_t> shape = x.shape();
  shape[axis] *= ranks;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  // Gathered on the outermost axis the blocks are the output's layout.
  if (v.outer == 1) {
    ctx.tp().allGather(x.f32(), out.f32(), x.numel());
    return out;
  }
  // Else the other ranks' blocks arrive side by side and every block is
  // interleaved into place; this rank's is read from `x` itself.
  Tensor blocks = Tensor::uninitialized(DType::F32, {ranks, x.numel()});
  ctx.tp().allGatherOthers(x.f32(), blocks.f32(), x.numel());
  float *o = out.f32();
  // Rank r's block is rows [r * n, (r + 1) * n) of `axis` in every outer row.
  int64_t chunk = v.n * v.inner;
  for (int64_t r = 0; r < ranks; ++r) {
    const float *b = r == me ? x.f32() : blocks.f32() + r * x.numel();
    for (int64_t i = 0; i < v.outer; ++i)
      std::copy_n(b + i * chunk, chunk, o + (i * ranks + r) * chunk);
  }
  return out;
}

Tensor cpu::all_gather_uneven(Context &ctx, const Tensor &x, int64_t axis,
                              std::vector<int64_t> sizes) {
  requireF32(x, "all_gather_uneven", "the input");
  AxisView v(x, axis, "all_gather_uneven");
  int64_t ranks = ctx.tp().size();
  int64_t total = requireUnevenSizes(x, v.n, ranks, sizes, /*whole=*/false,
                                     "all_gather_uneven")
                      .total;
  std::vector<int64_t> shape = x.shape();
  shape[axis] = total;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  // The padded blocks travel whole; rank r's first sizes[r] rows of `axis`
  // in every outer row are copied after the ranks before it.
  Tensor blocks = Tensor::uninitialized(DType::F32, {ranks, x.numel()});
  ctx.tp().allGather(x.f32(), blocks.f32(), x.numel());
  float *o = out.f32();
  for (int64_t r = 0, at = 0; r < ranks; at += sizes[r++]) {
    const float *b = blocks.f32() + r * x.numel();
    for (int64_t i = 0; i < v.outer; ++i)
      std::copy_n(b + i * v.n * v.inner, sizes[r] * v.inner,
                  o + (i * total + at) * v.inner);
  }
  return out;
}

Tensor cpu::reduce_scatter_sum_uneven(Context &ctx, const Tensor &x,
                                      int64_t axis,
                                      std::vector<int64_t> sizes) {
  requireF32(x, "reduce_scatter_sum_uneven", "the input");
  AxisView v(x, axis, "reduce_scatter_sum_uneven");
  int64_t ranks = ctx.tp().size(), me = ctx.tp().rank();
  int64_t extent = requireUnevenSizes(x, v.n, ranks, sizes, /*whole=*/true,
                                      "reduce_scatter_sum_uneven")
                       .largest;
  // Rank r's slice of every outer row, one rank after the other.
  std::vector<int64_t> counts(ranks);
  Tensor packed = Tensor::uninitialized(DType::F32, {x.numel()});
  float *p = packed.f32();
  for (int64_t r = 0, at = 0; r < ranks; at += sizes[r++]) {
    counts[r] = v.outer * sizes[r] * v.inner;
    for (int64_t i = 0; i < v.outer; ++i, p += sizes[r] * v.inner)
      std::copy_n(x.f32() + (i * v.n + at) * v.inner, sizes[r] * v.inner, p);
  }
  Tensor sum = Tensor::uninitialized(DType::F32, {counts[me]});
  ctx.tp().reduceScatterSumUneven(packed.f32(), sum.f32(), counts);
  std::vector<int64_t> shape = x.shape();
  shape[axis] = extent;
  Tensor out(DType::F32, shape);
  for (int64_t i = 0; i < v.outer; ++i)
    std::copy_n(sum.f32() + i * sizes[me] * v.inner, sizes[me] * v.inner,
                out.f32() + i * extent * v.inner);
  return out;
}

Tensor cpu::reduce_scatter_sum(Context &ctx, const Tensor &x, int64_t axis) {
  requireF32(x, "reduce_scatter_sum", "the input");
  AxisView v(x, axis, "reduce_scatter_sum");
  int64_t ranks = ctx.tp().size();
  requireSplittable(x, v, axis, ranks, "reduce_scatter_sum", kSequenceHint);
  // Pack so that rank r's slice of every outer row is contiguous.
  int64_t chunk = v.n / ranks * v.inner;
  Tensor packed = Tensor::uninitialized(DType::F32, {ranks, v.outer * chunk});
  const float *in = x.f32();
  float *p = packed.f32();
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < v.outer; ++i)
      std::copy_n(in + (i * ranks + r) * chunk, chunk,
                  p + (r * v.outer + i) * chunk);
  std::vector<int64_t> shape = x.shape();
  shape[axis] /= ranks;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  ctx.tp().reduceScatterSum(packed.f32(), out.f32(), out.numel());
  return out;
}

Tensor cpu::all_slice_uneven(Context &ctx, const Tensor &x, int64_t axis,
                             std::vector<int64_t> starts,
                             std::vector<int64_t> sizes) {
  requireF32(x, "all_slice_uneven", "the input");
  AxisView v(x, axis, "all_slice_uneven");
  UnevenRange range =
      requireUnevenRange(x, v.n, ctx.tp().rank(), ctx.tp().size(), starts,
                         sizes, "all_slice_uneven");
  std::vector<int64_t> shape = x.shape();
  shape[axis] = range.extent;
  Tensor out(DType::F32, shape);
  for (int64_t i = 0; i < v.outer; ++i)
    std::copy_n(x.f32() + (i * v.n + range.start) * v.inner,
                range.size * v.inner, out.f32() + i * range.extent * v.inner);
  return out;
}

Tensor cpu::all_slice(Context &ctx, const Tensor &x, int64_t axis) {
  requireF32(x, "all_slice", "the input");
  AxisView v(x, axis, "all_slice");
  int64_t ranks = ctx.tp().size(), rank = ctx.tp().rank();
  requireSplittable(x, v, axis, ranks, "all_slice");
  std::vector<int64_t> shape = x.shape();
  shape[axis] /= ranks;
  Tensor out = Tensor::uninitialized(DType::F32, shape);
  int64_t chunk = v.n / ranks * v.inner;
  for (int64_t i = 0; i < v.outer; ++i)
    std::copy_n(x.f32() + (i * ranks + rank) * chunk, chunk,
                out.f32() + i * chunk);
  return out;
}

} // namespace tprt
