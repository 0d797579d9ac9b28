//===- mamba2.cu - the Mamba2 mixer (tp.mamba2_mixer) on the GPU ----------===//
//
// The CPU kernel's steps (src/cpu/mamba2.cpp) with its arithmetic: the two
// projections on cuBLAS; the causal depthwise convolution, the selective
// scan as its recurrence (one thread per (batch, head, channel), its state
// row in local memory) and the gated RMS norm as kernels. The caller (the
// CPU entry point) has checked the operands' shapes.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Tiling.h"

namespace tprt {
namespace cuda {
namespace {

constexpr int kThreads = 256;
/// The largest SSM state the scan kernel holds per thread.
constexpr int kMaxState = 256;

__device__ bool kept(const int64_t *mask, int64_t token) {
  return !mask || mask[token] != 0;
}

__global__ void maskRowsKernel(const float *x, const int64_t *mask, float *out,
                               int64_t n, int64_t hidden) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = x[i] * float(kept(mask, i / hidden));
}

/// xbc[b, t, c] = silu(bias[c] + sum_k w[c, k] p[b, t - K + 1 + k, inner + c])
/// at kept positions, else 0.
__global__ void convKernel(const float *p, const float *w, const float *bias,
                           const int64_t *mask, float *xbc, int64_t batch,
                           int64_t seq, int64_t conv, int64_t proj,
                           int64_t inner, int64_t kernel) {
  int64_t n = batch * seq * conv;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = i % conv, bt = i / conv, t = bt % seq, b = bt / seq;
    float acc = bias[c];
    for (int64_t k = 0; k < kernel; ++k) {
      int64_t src = t - (kernel - 1) + k;
      if (src >= 0)
        acc += w[c * kernel + k] * p[(b * seq + src) * proj + inner + c];
    }
    xbc[i] = kept(mask, bt) ? acc / (1.0f + expf(-acc)) : 0.0f;
  }
}

/// One thread per (batch, head, channel i): the recurrence over the
/// sequence of its state row s[n], y = C s + D x.
__global__ void scanKernel(const float *p, const float *xb, const float *dtBias,
                           const float *aLog, const float *d, float *y,
                           int64_t batch, int64_t seq, int64_t heads,
                           int64_t headDim, int64_t groups, int64_t state,
                           int64_t conv, int64_t proj, int64_t inner,
                           float dtMin, bool foldedA) {
  int64_t n = batch * heads * headDim;
  int64_t perGroup = heads / groups, gn = groups * state;
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t i = idx % headDim, bh = idx / headDim, h = bh % heads,
            b = bh / heads, g = h / perGroup;
    float a = foldedA ? aLog[h] : -expf(aLog[h]);
    float s[kMaxState];
    for (int64_t k = 0; k < state; ++k)
      s[k] = 0.0f;
    for (int64_t t = 0; t < seq; ++t) {
      int64_t bt = b * seq + t;
      const float *row = xb + bt * conv;
      const float *bg = row + inner + g * state;
      const float *cg = row + inner + gn + g * state;
      float xi = row[h * headDim + i];
      float dt = p[bt * proj + inner + conv + h] + dtBias[h];
      dt = dt > 20.0f ? dt : log1pf(expf(dt)); // softplus
      dt = fmaxf(dt, dtMin);
      float decay = expf(dt * a), dx = dt * xi, acc = 0.0f;
      for (int64_t k = 0; k < state; ++k) {
        s[k] = decay * s[k] + dx * bg[k];
        acc += s[k] * cg[k];
      }
      y[bt * inner + h * headDim + i] = acc + d[h] * xi;
    }
  }
}

/// One block per (token, group): z = y * silu(gate), then
/// y = w * z / sqrt(mean(z^2) + eps) over the group, in place.
__global__ void gatedNormKernel(const float *p, float *y, const float *w,
                                int64_t tokens, int64_t groups,
                                int64_t groupSize, int64_t proj, int64_t inner,
                                float eps) {
  __shared__ double partial[kThreads / 32];
  __shared__ float inverse;
  for (int64_t tg = blockIdx.x; tg < tokens * groups; tg += gridDim.x) {
    int64_t t = tg / groups, g = tg % groups;
    double sum = 0;
    for (int64_t i = g * groupSize + threadIdx.x; i < (g + 1) * groupSize;
         i += blockDim.x) {
      float gate = p[t * proj + i];
      float z = y[t * inner + i] * (gate / (1.0f + expf(-gate)));
      y[t * inner + i] = z;
      sum += double(z) * z;
    }
    for (int off = 16; off; off >>= 1)
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
    if (threadIdx.x % 32 == 0)
      partial[threadIdx.x / 32] = sum;
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0;
      for (int i = 0; i < kThreads / 32; ++i)
        total += partial[i];
      inverse = 1.0f / sqrtf(float(total / groupSize) + eps);
    }
    __syncthreads();
    float r = inverse;
    for (int64_t i = g * groupSize + threadIdx.x; i < (g + 1) * groupSize;
         i += blockDim.x)
      y[t * inner + i] = w[i] * (y[t * inner + i] * r);
    __syncthreads();
  }
}

} // namespace

Tensor mamba2_mixer(Context &ctx, const Tensor &x, const Tensor &inProj,
                    const Tensor &convWeight, const Tensor &convBias,
                    const Tensor &dtBias, const Tensor &aLog, const Tensor &d,
                    const Tensor &normWeight, const Tensor &outProj,
                    const Tensor &keyMask, int64_t heads, int64_t headDim,
                    int64_t groups, int64_t state, int64_t kernel,
                    double normEps, double dtMin, bool foldedA) {
  const char *op = "mamba2_mixer";
  for (const Tensor *t : {&x, &inProj, &convWeight, &convBias, &dtBias, &aLog,
                          &d, &normWeight, &outProj})
    requireGpu(*t, DType::F32, op, "an operand");
  if (state > kMaxState)
    fatal(std::string(op) + ": the CUDA scan holds at most " +
          std::to_string(kMaxState) + " state elements, got " +
          std::to_string(state));
  int64_t batch = x.dim(0), seq = x.dim(1), hidden = x.dim(2),
          inner = heads * headDim, conv = inner + 2 * groups * state,
          proj = inner + conv + heads, tokens = batch * seq;
  const int64_t *mask = nullptr;
  if (keyMask.defined()) {
    requireGpu(keyMask, DType::I64, op, "the key mask");
    mask = keyMask.i64();
  }
  if (tokens == 0)
    return cuda::linear(ctx, x, outProj);

  // 1, 2. Masked input, projection, convolution, SiLU, mask.
  Tensor xin = x;
  if (mask) {
    xin = Tensor::uninitialized(DType::F32, x.shape(), Device::CUDA);
    maskRowsKernel<<<gridBlocks(x.numel(), kThreads), kThreads, 0, stream()>>>(
        x.f32(), mask, xin.f32(), x.numel(), hidden);
    checkLaunch("mamba2_mixer: mask");
  }
  Tensor zxbcdt = cuda::linear(ctx, xin, inProj);
  Tensor xbc =
      Tensor::uninitialized(DType::F32, {batch, seq, conv}, Device::CUDA);
  convKernel<<<gridBlocks(xbc.numel(), kThreads), kThreads, 0, stream()>>>(
      zxbcdt.f32(), convWeight.f32(), convBias.f32(), mask, xbc.f32(), batch,
      seq, conv, proj, inner, kernel);
  checkLaunch("mamba2_mixer: convolution");

  // 3. Selective scan; 4. gated RMS norm, in place.
  Tensor y =
      Tensor::uninitialized(DType::F32, {batch, seq, inner}, Device::CUDA);
  scanKernel<<<gridBlocks(batch * heads * headDim, 64), 64, 0, stream()>>>(
      zxbcdt.f32(), xbc.f32(), dtBias.f32(), aLog.f32(), d.f32(), y.f32(),
      batch, seq, heads, headDim, groups, state, conv, proj, inner,
      static_cast<float>(dtMin), foldedA);
  checkLaunch("mamba2_mixer: scan");
  gatedNormKernel<<<gridBlocks(tokens * groups, 1), kThreads, 0, stream()>>>(
      zxbcdt.f32(), y.f32(), normWeight.f32(), tokens, groups, inner / groups,
      proj, inner, static_cast<float>(normEps));
  checkLaunch("mamba2_mixer: gated norm");

  // 5. Output projection.
  return cuda::linear(ctx, y, outProj);
}

} // namespace cuda
} // namespace tprt
