//===- optimizer.cu - the optimizer step's arithmetic on the GPU ----------===//
//
// Gradient accumulation, bucket packing, scaling, the norm's per-buffer
// parts and the AdamW / SGD element updates, with the CPU's formulas
// (src/train/optimizer.cpp, boundary.cpp). The norm's parts are FP64
// partial sums per block, added on the host.
//
//===----------------------------------------------------------------------===//

#include "Elements.cuh"
#include "Runtime.h"
#include "Tiling.h"
#include "common/Checks.h"

#include <cmath>
#include <vector>

namespace tprt {
namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kNormBlocks = 256;

__global__ void scaleKernel(float *data, int64_t n, float factor) {
  TPRT_GRID_STRIDE(i, n) data[i] *= factor;
}

__global__ void addKernel(float *acc, const float *x, int64_t n) {
  TPRT_GRID_STRIDE(i, n) acc[i] += x[i];
}

/// A bf16 gradient into its FP32 buffer, widened as it is read: written
/// (the step's first micro-batch) or added.
__global__ void accumulateBf16Kernel(float *acc, const __nv_bfloat16 *x,
                                     int64_t n, bool overwrite) {
  TPRT_GRID_STRIDE(i, n) {
    float v = toFloat(x[i]);
    acc[i] = overwrite ? v : acc[i] + v;
  }
}

/// Elements of the bucket per block of packKernel.
constexpr int64_t kPackChunk = 8192;

/// Bucket element e is element e - starts[r] of runs[r], for the r with
/// starts[r] <= e < starts[r + 1] (starts[runCount] is the total): each
/// block copies one chunk of the bucket, finding its first run by binary
/// search and the next ones by walking on.
template <bool toBucket>
__global__ void packKernel(float *const *runs, const int64_t *starts,
                           int64_t runCount, float *bucket, int64_t total) {
  __shared__ int64_t first;
  int64_t begin = blockIdx.x * kPackChunk, end = min(begin + kPackChunk, total);
  if (threadIdx.x == 0) {
    int64_t lo = 0, hi = runCount - 1;
    while (lo < hi) {
      int64_t mid = (lo + hi + 1) / 2;
      if (starts[mid] <= begin)
        lo = mid;
      else
        hi = mid - 1;
    }
    first = lo;
  }
  __syncthreads();
  int64_t r = first;
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x) {
    while (starts[r + 1] <= e)
      ++r;
    float *element = runs[r] + (e - starts[r]);
    if (toBucket)
      bucket[e] = *element;
    else
      *element = bucket[e];
  }
}

/// NaN when either is, else the larger (as boundary.cpp's maxMagnitude).
__device__ float nanMax(float a, float b) {
  return isnan(a) || isnan(b) ? NAN : fmaxf(a, b);
}

/// Per block: the FP64 sum of squares and the largest magnitude.
__global__ void normPartsKernel(const float *data, int64_t n, double *sums,
                                float *maxes) {
  __shared__ double sumScratch[kThreads / 32];
  __shared__ float maxScratch[kThreads / 32];
  double sum = 0;
  float best = 0.0f;
  TPRT_GRID_STRIDE(i, n) {
    float g = data[i];
    sum += static_cast<double>(g) * g;
    best = nanMax(best, fabsf(g));
  }
  for (int off = 16; off; off >>= 1) {
    sum += __shfl_xor_sync(kFullMask, sum, off);
    best = nanMax(best, __shfl_xor_sync(kFullMask, best, off));
  }
  if (threadIdx.x % 32 == 0) {
    sumScratch[threadIdx.x / 32] = sum;
    maxScratch[threadIdx.x / 32] = best;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      sum += sumScratch[w];
      best = nanMax(best, maxScratch[w]);
    }
    sums[blockIdx.x] = sum;
    maxes[blockIdx.x] = best;
  }
}

/// A bf16 parameter is updated in f32 and rounded once (the CPU's
/// forEachBlockInF32).
template <typename P>
__global__ void adamwKernel(P *p, const float *g, float *m, float *v, int64_t n,
                            float decay, float b1, float b2, float stepSize,
                            float root2, float eps) {
  TPRT_GRID_STRIDE(i, n) {
    float w = toFloat(p[i]) * decay;
    m[i] += (1.0f - b1) * (g[i] - m[i]); // lerp
    v[i] = v[i] * b2 + (1.0f - b2) * g[i] * g[i];
    float denom = sqrtf(v[i]) / root2 + eps;
    p[i] = fromFloat<P>(w - stepSize * (m[i] / denom));
  }
}

template <typename P>
__global__ void sgdKernel(P *p, const float *g, float *buf, int64_t n, float wd,
                          float mom, float lr, bool first, bool useMomentum) {
  TPRT_GRID_STRIDE(i, n) {
    float w = toFloat(p[i]);
    float d = g[i] + wd * w;
    buf[i] = first ? d : mom * buf[i] + d;
    p[i] = fromFloat<P>(w - lr * (useMomentum ? buf[i] : d));
  }
}

} // namespace

std::pair<double, double> normParts(const float *data, int64_t n) {
  if (n == 0)
    return {0.0, 0.0};
  unsigned blocks = gridBlocks(n, kThreads);
  if (blocks > kNormBlocks)
    blocks = kNormBlocks;
  // 8-byte elements: the blocks' double sums.
  Tensor sums = Tensor::uninitialized(DType::I64, {blocks}, Device::CUDA);
  Tensor maxes = Tensor::uninitialized(DType::F32, {blocks}, Device::CUDA);
  normPartsKernel<<<blocks, kThreads, 0, stream()>>>(
      data, n, static_cast<double *>(sums.raw()), maxes.f32());
  checkLaunch("grad_norm");
  std::vector<double> s(blocks);
  std::vector<float> m(blocks);
  copy(s.data(), Device::CPU, sums.raw(), Device::CUDA,
       blocks * sizeof(double));
  copy(m.data(), Device::CPU, maxes.raw(), Device::CUDA,
       blocks * sizeof(float));
  double sum = 0, best = 0;
  for (unsigned b = 0; b < blocks; ++b) {
    sum += s[b];
    best = std::isnan(best) || std::isnan(m[b]) ? NAN
                                                : std::max<double>(best, m[b]);
  }
  return {sum, best};
}

void scaleInPlace(float *data, int64_t n, float factor) {
  if (n == 0)
    return;
  scaleKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(data, n,
                                                                  factor);
  checkLaunch("scale");
}

void addInPlace(float *acc, const float *x, int64_t n) {
  if (n == 0)
    return;
  addKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(acc, x, n);
  checkLaunch("add");
}

void adamwUpdate(Tensor &param, const float *g, float *m, float *v, float decay,
                 float beta1, float beta2, float stepSize, float root2,
                 float eps) {
  int64_t n = param.numel();
  if (n == 0)
    return;
  unsigned blocks = gridBlocks(n, kThreads);
  if (param.dtype() == DType::BF16)
    adamwKernel<<<blocks, kThreads, 0, stream()>>>(
        static_cast<__nv_bfloat16 *>(param.raw()), g, m, v, n, decay, beta1,
        beta2, stepSize, root2, eps);
  else
    adamwKernel<<<blocks, kThreads, 0, stream()>>>(
        param.f32(), g, m, v, n, decay, beta1, beta2, stepSize, root2, eps);
  checkLaunch("adamw");
}

void sgdUpdate(Tensor &param, const float *g, float *momentumBuffer,
               float weightDecay, float momentum, float lr, bool first) {
  int64_t n = param.numel();
  if (n == 0)
    return;
  unsigned blocks = gridBlocks(n, kThreads);
  if (param.dtype() == DType::BF16)
    sgdKernel<<<blocks, kThreads, 0, stream()>>>(
        static_cast<__nv_bfloat16 *>(param.raw()), g, momentumBuffer, n,
        weightDecay, momentum, lr, first, momentum != 0.0f);
  else
    sgdKernel<<<blocks, kThreads, 0, stream()>>>(param.f32(), g, momentumBuffer,
                                                 n, weightDecay, momentum, lr,
                                                 first, momentum != 0.0f);
  checkLaunch("sgd");
}

void packRuns(const std::vector<float *> &runs,
              const std::vector<int64_t> &counts, float *bucket,
              bool toBucket) {
  int64_t runCount = static_cast<int64_t>(runs.size());
  // One table on the GPU: the runs' pointers, then their starts.
  std::vector<int64_t> table(2 * runCount + 1);
  int64_t total = 0;
  for (int64_t r = 0; r < runCount; ++r) {
    table[r] = reinterpret_cast<int64_t>(runs[r]);
    table[runCount + r] = total;
    total += counts[r];
  }
  table[2 * runCount] = total;
  if (total == 0)
    return;
  Tensor device = Tensor::uninitialized(
      DType::I64, {static_cast<int64_t>(table.size())}, Device::CUDA);
  copy(device.raw(), Device::CUDA, table.data(), Device::CPU,
       table.size() * sizeof(int64_t));
  auto *pointers = reinterpret_cast<float *const *>(device.i64());
  const int64_t *starts = device.i64() + runCount;
  auto blocks = static_cast<unsigned>((total + kPackChunk - 1) / kPackChunk);
  if (toBucket)
    packKernel<true><<<blocks, kThreads, 0, stream()>>>(
        pointers, starts, runCount, bucket, total);
  else
    packKernel<false><<<blocks, kThreads, 0, stream()>>>(
        pointers, starts, runCount, bucket, total);
  checkLaunch(toBucket ? "gradient bucket pack" : "gradient bucket unpack");
}

void accumulate_grad(Context &ctx, const Tensor &grad, const Tensor &param,
                     const char *fqn, int64_t splitDim, bool owned) {
  // The buffers are FP32 whatever the parameter's type (a bf16 program's
  // micro-batch gradients are summed and reduced in FP32): a bf16 gradient
  // is widened as it is added; f16 ones through an f32 copy.
  bool bf16 = grad.defined() && grad.dtype() == DType::BF16;
  if (!bf16 && reducedType(grad) != DType::F32)
    return cuda::accumulate_grad(ctx, widened(grad), param, fqn, splitDim,
                                 owned);
  requireGpu(grad, bf16 ? DType::BF16 : DType::F32, "accumulate_grad",
             "the gradient");
  if (grad.shape() != param.shape())
    fatal(std::string("accumulate_grad: the gradient of '") + fqn + "' is " +
          grad.describe() + ", the parameter " + param.describe());
  Context::GradBuffer &buffer = ctx.gradBuffer(param, fqn);
  bool fresh = buffer.takeFirst(splitDim, owned);
  int64_t n = grad.numel();
  if (n == 0)
    return;
  if (bf16) {
    accumulateBf16Kernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
        buffer.grad.f32(), static_cast<const __nv_bfloat16 *>(grad.raw()), n,
        fresh);
  } else if (fresh) {
    // The step's first gradient: copied into the buffer the previous steps
    // used (a bucket's view stays one).
    copy(buffer.grad.raw(), Device::CUDA, grad.raw(), Device::CUDA,
         grad.bytes());
    return;
  } else {
    addKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
        buffer.grad.f32(), grad.f32(), n);
  }
  checkLaunch("accumulate_grad");
}

} // namespace cuda
} // namespace tprt
