//===- optimizer.cu - the optimizer step's arithmetic on the GPU ----------===//
//
// Gradient accumulation, scaling, the norm's per-buffer parts and the
// AdamW / SGD element updates, with the CPU's formulas (src/train/
// optimizer.cpp, boundary.cpp). The norm's parts are FP64 partial sums per
// block, added on the host.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Tiling.h"

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

__global__ void adamwKernel(float *p, const float *g, float *m, float *v,
                            int64_t n, float decay, float b1, float b2,
                            float stepSize, float root2, float eps) {
  TPRT_GRID_STRIDE(i, n) {
    p[i] *= decay;
    m[i] += (1.0f - b1) * (g[i] - m[i]); // lerp
    v[i] = v[i] * b2 + (1.0f - b2) * g[i] * g[i];
    float denom = sqrtf(v[i]) / root2 + eps;
    p[i] -= stepSize * (m[i] / denom);
  }
}

__global__ void sgdKernel(float *p, const float *g, float *buf, int64_t n,
                          float wd, float mom, float lr, bool first,
                          bool useMomentum) {
  TPRT_GRID_STRIDE(i, n) {
    float d = g[i] + wd * p[i];
    buf[i] = first ? d : mom * buf[i] + d;
    p[i] -= lr * (useMomentum ? buf[i] : d);
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

void adamwUpdate(float *p, const float *g, float *m, float *v, int64_t n,
                 float decay, float beta1, float beta2, float stepSize,
                 float root2, float eps) {
  if (n == 0)
    return;
  adamwKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
      p, g, m, v, n, decay, beta1, beta2, stepSize, root2, eps);
  checkLaunch("adamw");
}

void sgdUpdate(float *p, const float *g, float *momentumBuffer, int64_t n,
               float weightDecay, float momentum, float lr, bool first) {
  if (n == 0)
    return;
  sgdKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
      p, g, momentumBuffer, n, weightDecay, momentum, lr, first,
      momentum != 0.0f);
  checkLaunch("sgd");
}

void accumulate_grad(Context &ctx, const Tensor &grad, const Tensor &param,
                     const char *fqn, int64_t splitDim, bool owned) {
  requireGpu(grad, DType::F32, "accumulate_grad", "the gradient");
  if (grad.shape() != param.shape())
    fatal(std::string("accumulate_grad: the gradient of '") + fqn + "' is " +
          grad.describe() + ", the parameter " + param.describe());
  Context::GradBuffer &buffer = ctx.grads()[fqn];
  if (!buffer.grad.defined())
    buffer.grad = Tensor::uninitialized(DType::F32, grad.shape(), Device::CUDA);
  if (buffer.fresh) {
    // The step's first gradient: copied into the buffer the previous steps
    // used (a bucket's view stays one).
    copy(buffer.grad.raw(), Device::CUDA, grad.raw(), Device::CUDA,
         grad.bytes());
    buffer.splitDim = splitDim;
    buffer.owned = owned;
    buffer.fresh = false;
    return;
  }
  int64_t n = grad.numel();
  if (n == 0)
    return;
  addKernel<<<gridBlocks(n, kThreads), kThreads, 0, stream()>>>(
      buffer.grad.f32(), grad.f32(), n);
  checkLaunch("accumulate_grad");
}

} // namespace cuda
} // namespace tprt
