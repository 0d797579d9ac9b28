//===- collectives.cpp - the shard collectives on the GPU -----------------===//
//
// The same block layouts as the CPU kernels (src/cpu/kernels.cpp), packed
// and unpacked with strided device copies around NCCL's contiguous
// all-gather and reduce-scatter; the feature slices, strided copies too.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "common/Checks.h"

namespace tprt {
namespace cuda {
namespace {

/// x, an f32 tensor on the GPU, viewed around `axis` (common/Checks.h).
AxisView gpuAxisView(const Tensor &x, int64_t axis, const char *op) {
  requireGpu(x, DType::F32, op, "the input");
  return AxisView(x, axis, op);
}

/// `rows` runs of `run` floats, `srcPitch` and `dstPitch` floats apart.
void copyRuns(float *dst, int64_t dstPitch, const float *src, int64_t srcPitch,
              int64_t run, int64_t rows) {
  if (run == 0 || rows == 0)
    return;
  check(cudaMemcpy2DAsync(dst, dstPitch * sizeof(float), src,
                          srcPitch * sizeof(float), run * sizeof(float), rows,
                          cudaMemcpyDeviceToDevice, stream()),
        "cudaMemcpy2DAsync");
}

} // namespace

Tensor all_reduce_sum(Context &ctx, const Tensor &x) {
  requireGpu(x, DType::F32, "all_reduce_sum", "the input");
  Tensor out = Tensor::uninitialized(DType::F32, x.shape(), Device::CUDA);
  copy(out.raw(), Device::CUDA, x.raw(), Device::CUDA, x.bytes());
  ctx.tp().allReduceSum(out.f32(), out.numel());
  return out;
}

Tensor all_reduce_sum_start(Context &ctx, const Tensor &x) {
  if (x.dtype() != DType::F32)
    return tprt::all_reduce_sum(ctx, x);
  requireGpu(x, DType::F32, "all_reduce_sum_start", "the input");
  Tensor out = Tensor::uninitialized(DType::F32, x.shape(), Device::CUDA);
  copy(out.raw(), Device::CUDA, x.raw(), Device::CUDA, x.bytes());
  ctx.tp().startAllReduceSum(out.f32(), out.numel());
  return out;
}

Tensor all_gather(Context &ctx, const Tensor &x, int64_t axis) {
  AxisView v = gpuAxisView(x, axis, "all_gather");
  int64_t ranks = ctx.tp().size(), numel = x.numel();
  Tensor blocks =
      Tensor::uninitialized(DType::F32, {ranks, numel}, Device::CUDA);
  ctx.tp().allGather(x.f32(), blocks.f32(), numel);
  std::vector<int64_t> shape = x.shape();
  shape[axis] *= ranks;
  if (v.outer == 1)
    return Tensor::view(blocks, 0, shape);
  Tensor out = Tensor::uninitialized(DType::F32, shape, Device::CUDA);
  // Rank r's block is rows [r * n, (r + 1) * n) of `axis` in every outer row.
  int64_t chunk = v.n * v.inner;
  for (int64_t r = 0; r < ranks; ++r)
    copyRuns(out.f32() + r * chunk, ranks * chunk, blocks.f32() + r * numel,
             chunk, chunk, v.outer);
  return out;
}

Tensor all_gather_uneven(Context &ctx, const Tensor &x, int64_t axis,
                         std::vector<int64_t> sizes) {
  AxisView v = gpuAxisView(x, axis, "all_gather_uneven");
  int64_t ranks = ctx.tp().size(), numel = x.numel();
  int64_t total = requireUnevenSizes(x, v.n, ranks, sizes, /*whole=*/false,
                                     "all_gather_uneven")
                      .total;
  Tensor blocks =
      Tensor::uninitialized(DType::F32, {ranks, numel}, Device::CUDA);
  ctx.tp().allGather(x.f32(), blocks.f32(), numel);
  std::vector<int64_t> shape = x.shape();
  shape[axis] = total;
  Tensor out = Tensor::uninitialized(DType::F32, shape, Device::CUDA);
  // Rank r's first sizes[r] rows of `axis` in every outer row, after the
  // ranks before it; the padding stays behind.
  for (int64_t r = 0, at = 0; r < ranks; at += sizes[r++])
    copyRuns(out.f32() + at * v.inner, total * v.inner,
             blocks.f32() + r * numel, v.n * v.inner, sizes[r] * v.inner,
             v.outer);
  return out;
}

Tensor reduce_scatter_sum_uneven(Context &ctx, const Tensor &x, int64_t axis,
                                 std::vector<int64_t> sizes) {
  AxisView v = gpuAxisView(x, axis, "reduce_scatter_sum_uneven");
  int64_t ranks = ctx.tp().size(), me = ctx.tp().rank();
  int64_t extent = requireUnevenSizes(x, v.n, ranks, sizes, /*whole=*/true,
                                      "reduce_scatter_sum_uneven")
                       .largest;
  // Rank r's slice of every outer row, one rank after the other.
  std::vector<int64_t> counts(ranks);
  Tensor packed = Tensor::uninitialized(DType::F32, {x.numel()}, Device::CUDA);
  int64_t done = 0;
  for (int64_t r = 0, at = 0; r < ranks; at += sizes[r++]) {
    counts[r] = v.outer * sizes[r] * v.inner;
    copyRuns(packed.f32() + done, sizes[r] * v.inner, x.f32() + at * v.inner,
             v.n * v.inner, sizes[r] * v.inner, v.outer);
    done += counts[r];
  }
  Tensor sum = Tensor::uninitialized(DType::F32, {counts[me]}, Device::CUDA);
  ctx.tp().reduceScatterSumUneven(packed.f32(), sum.f32(), counts);
  std::vector<int64_t> shape = x.shape();
  shape[axis] = extent;
  Tensor out = zeros(shape);
  copyRuns(out.f32(), extent * v.inner, sum.f32(), sizes[me] * v.inner,
           sizes[me] * v.inner, v.outer);
  return out;
}

Tensor all_slice_uneven(Context &ctx, const Tensor &x, int64_t axis,
                        std::vector<int64_t> starts,
                        std::vector<int64_t> sizes) {
  AxisView v = gpuAxisView(x, axis, "all_slice_uneven");
  UnevenRange range =
      requireUnevenRange(x, v.n, ctx.tp().rank(), ctx.tp().size(), starts,
                         sizes, "all_slice_uneven");
  std::vector<int64_t> shape = x.shape();
  shape[axis] = range.extent;
  Tensor out = zeros(shape);
  copyRuns(out.f32(), range.extent * v.inner, x.f32() + range.start * v.inner,
           v.n * v.inner, range.size * v.inner, v.outer);
  return out;
}

Tensor reduce_scatter_sum(Context &ctx, const Tensor &x, int64_t axis) {
  AxisView v = gpuAxisView(x, axis, "reduce_scatter_sum");
  int64_t ranks = ctx.tp().size();
  requireSplittable(x, v, axis, ranks, "reduce_scatter_sum", kSequenceHint);
  int64_t chunk = v.n / ranks * v.inner;
  std::vector<int64_t> shape = x.shape();
  shape[axis] /= ranks;
  Tensor out = Tensor::uninitialized(DType::F32, shape, Device::CUDA);
  // Pack so that rank r's slice of every outer row is contiguous.
  Tensor packed = x;
  if (v.outer > 1) {
    packed = Tensor::uninitialized(DType::F32, {ranks, v.outer * chunk},
                                   Device::CUDA);
    for (int64_t r = 0; r < ranks; ++r)
      copyRuns(packed.f32() + r * v.outer * chunk, chunk, x.f32() + r * chunk,
               ranks * chunk, chunk, v.outer);
  }
  ctx.tp().reduceScatterSum(packed.f32(), out.f32(), out.numel());
  return out;
}

Tensor all_slice(Context &ctx, const Tensor &x, int64_t axis) {
  AxisView v = gpuAxisView(x, axis, "all_slice");
  int64_t ranks = ctx.tp().size(), rank = ctx.tp().rank();
  requireSplittable(x, v, axis, ranks, "all_slice");
  std::vector<int64_t> shape = x.shape();
  shape[axis] /= ranks;
  Tensor out = Tensor::uninitialized(DType::F32, shape, Device::CUDA);
  int64_t chunk = v.n / ranks * v.inner;
  copyRuns(out.f32(), chunk, x.f32() + rank * chunk, ranks * chunk, chunk,
           v.outer);
  return out;
}

/// `rows` runs of `run` bytes, `srcPitch` and `dstPitch` bytes apart, of
/// any element type.
static void copyByteRuns(void *dst, size_t dstPitch, const void *src,
                         size_t srcPitch, size_t run, int64_t rows) {
  if (run == 0 || rows == 0)
    return;
  check(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, run, rows,
                          cudaMemcpyDeviceToDevice, stream()),
        "cudaMemcpy2DAsync");
}

Tensor feature_slice(Context &, const Tensor &x, int64_t offset, int64_t size,
                     int64_t) {
  requireGpu(x, x.dtype(), "feature_slice", "the input");
  int64_t width = x.rank() ? x.dim(-1) : 0;
  int64_t rows = requireFeatureRange(x, offset, size, width, "feature_slice");
  std::vector<int64_t> shape = x.shape();
  shape.back() = size;
  Tensor out = Tensor::uninitialized(x.dtype(), shape, Device::CUDA);
  size_t element = dtypeSize(x.dtype());
  copyByteRuns(out.raw(), size * element,
               static_cast<const unsigned char *>(x.raw()) + offset * element,
               width * element, size * element, rows);
  return out;
}

Tensor feature_slice_grad(Context &, const Tensor &dy, int64_t offset,
                          int64_t width) {
  requireGpu(dy, dy.dtype(), "feature_slice_grad", "the gradient");
  int64_t size = dy.rank() ? dy.dim(-1) : 0;
  int64_t rows =
      requireFeatureRange(dy, offset, size, width, "feature_slice_grad");
  std::vector<int64_t> shape = dy.shape();
  shape.back() = width;
  Tensor out = Tensor::uninitialized(dy.dtype(), shape, Device::CUDA);
  size_t element = dtypeSize(dy.dtype());
  if (out.bytes())
    memset(out.raw(), 0, out.bytes());
  copyByteRuns(static_cast<unsigned char *>(out.raw()) + offset * element,
               width * element, dy.raw(), size * element, size * element, rows);
  return out;
}

} // namespace cuda
} // namespace tprt
