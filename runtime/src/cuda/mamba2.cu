//===- mamba2.cu - the Mamba2 mixer (tp.mamba2_mixer) on the GPU ----------===//
//
// The CPU kernel's steps (src/cpu/mamba2.cpp) with its arithmetic: the two
// projections on cuBLAS; the causal depthwise convolution, the selective
// scan as its recurrence (one thread per (batch, head, channel), its state
// row in local memory) and the gated RMS norm as kernels; the backward
// recomputes the forward keeping every state, as the CPU does. The
// operands are checked as the CPU checks them (common/Checks.h,
// Mamba2Shape), on the GPU.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "Tiling.h"
#include "common/Checks.h"

#include <climits>

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
/// at kept positions, else 0; `pre` (the backward's) gets the sum before
/// SiLU when given.
__global__ void convKernel(const float *p, const float *w, const float *bias,
                           const int64_t *mask, float *xbc, float *pre,
                           int64_t batch, int64_t seq, int64_t conv,
                           int64_t proj, int64_t inner, int64_t kernel) {
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
    if (pre)
      pre[i] = acc;
    xbc[i] = kept(mask, bt) ? acc / (1.0f + expf(-acc)) : 0.0f;
  }
}

/// One thread per (batch, head, channel i): the recurrence over the
/// sequence of its state row s[n], y = C s + D x. The backward's
/// recomputation also asks for dt per (token, head), whether max() kept
/// softplus, and every state after each token ([tokens, inner, state]).
__global__ void scanKernel(const float *p, const float *xb, const float *dtBias,
                           const float *aLog, const float *d, float *y,
                           float *dts, uint8_t *dtLive, float *states,
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
      if (dtLive && i == 0)
        dtLive[bt * heads + h] = dt >= dtMin;
      dt = fmaxf(dt, dtMin);
      if (dts && i == 0)
        dts[bt * heads + h] = dt;
      float decay = expf(dt * a), dx = dt * xi, acc = 0.0f;
      float *kept =
          states ? states + (bt * inner + h * headDim + i) * state : nullptr;
      for (int64_t k = 0; k < state; ++k) {
        s[k] = decay * s[k] + dx * bg[k];
        acc += s[k] * cg[k];
        if (kept)
          kept[k] = s[k];
      }
      y[bt * inner + h * headDim + i] = acc + d[h] * xi;
    }
  }
}

/// One block per (token, group): z = y * silu(gate), then
/// out = w * z / sqrt(mean(z^2) + eps) over the group (`out` may be `y`);
/// the backward's recomputation also keeps z and the inverse RMS.
__global__ void gatedNormKernel(const float *p, const float *y, float *out,
                                const float *w, float *zs, float *invs,
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
      if (zs)
        zs[t * inner + i] = z;
      out[t * inner + i] = z;
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
      if (invs)
        invs[tg] = inverse;
    }
    __syncthreads();
    float r = inverse;
    for (int64_t i = g * groupSize + threadIdx.x; i < (g + 1) * groupSize;
         i += blockDim.x)
      out[t * inner + i] = w[i] * (out[t * inner + i] * r);
    __syncthreads();
  }
}

/// The gated norm's backward, one block per (token, group): from the
/// cotangent of its output `dn`, the cotangents of y (`dy`) and of the
/// gate (into the projection's cotangent `dp`).
__global__ void gatedNormGradKernel(const float *p, const float *y,
                                    const float *zs, const float *invs,
                                    const float *w, const float *dn, float *dy,
                                    float *dp, int64_t tokens, int64_t groups,
                                    int64_t groupSize, int64_t proj,
                                    int64_t inner) {
  __shared__ double partial[kThreads / 32];
  __shared__ float mean;
  for (int64_t tg = blockIdx.x; tg < tokens * groups; tg += gridDim.x) {
    int64_t t = tg / groups, g = tg % groups;
    float r = invs[tg];
    double dot = 0;
    for (int64_t i = g * groupSize + threadIdx.x; i < (g + 1) * groupSize;
         i += blockDim.x)
      dot += double(dn[t * inner + i]) * w[i] * (zs[t * inner + i] * r);
    for (int off = 16; off; off >>= 1)
      dot += __shfl_xor_sync(0xffffffffu, dot, off);
    if (threadIdx.x % 32 == 0)
      partial[threadIdx.x / 32] = dot;
    __syncthreads();
    if (threadIdx.x == 0) {
      double total = 0;
      for (int i = 0; i < kThreads / 32; ++i)
        total += partial[i];
      mean = float(total / groupSize);
    }
    __syncthreads();
    float m = mean;
    for (int64_t i = g * groupSize + threadIdx.x; i < (g + 1) * groupSize;
         i += blockDim.x) {
      float zn = zs[t * inner + i] * r;
      float dz = r * (dn[t * inner + i] * w[i] - zn * m);
      float gate = p[t * proj + i], sg = 1.0f / (1.0f + expf(-gate));
      dy[t * inner + i] = dz * gate * sg;
      dp[t * proj + i] =
          dz * y[t * inner + i] * sg * (1.0f + gate * (1.0f - sg));
    }
    __syncthreads();
  }
}

/// dw[i] = sum over tokens of dn * z * inv (the norm weight's gradient),
/// one thread per feature, in token order.
__global__ void gatedNormWeightGradKernel(const float *zs, const float *invs,
                                          const float *dn, float *dw,
                                          int64_t tokens, int64_t groups,
                                          int64_t groupSize, int64_t inner) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < inner;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t g = i / groupSize;
    double sum = 0;
    for (int64_t t = 0; t < tokens; ++t)
      sum += double(dn[t * inner + i]) *
             (zs[t * inner + i] * invs[t * groups + g]);
    dw[i] = float(sum);
  }
}

/// The scan backward, one block per (batch, head) and one thread per
/// channel i, last token first: thread i carries its state row's cotangent
/// dS[n]; the channels' sums (of the decay's and dt's cotangents, and of B's
/// and C's, shared by the heads of a group) go through shared memory.
__global__ void scanGradKernel(const float *p, const float *xb,
                               const float *dtBias, const float *aLog,
                               const float *d, const float *dts,
                               const uint8_t *dtLive, const float *states,
                               const float *dy, float *dxb, float *dp,
                               float *dDtBias, float *dALog, float *dD,
                               int64_t seq, int64_t heads, int64_t headDim,
                               int64_t groups, int64_t state, int64_t conv,
                               int64_t proj, int64_t inner, bool foldedA) {
  extern __shared__ double sums[]; // [2 * warps], then dB[state], dC[state]
  int warps = (blockDim.x + 31) / 32;
  float *dB = reinterpret_cast<float *>(sums + 2 * warps), *dC = dB + state;
  int64_t b = blockIdx.x / heads, h = blockIdx.x % heads;
  int64_t perGroup = heads / groups, g = h / perGroup, gn = groups * state;
  int64_t i = threadIdx.x;
  bool channel = i < headDim;
  float a = foldedA ? aLog[h] : -expf(aLog[h]);
  float dS[kMaxState];
  for (int64_t n = 0; n < state; ++n)
    dS[n] = 0.0f;
  double dDSum = 0, da = 0, dtBiasSum = 0;
  for (int64_t t = seq - 1; t >= 0; --t) {
    int64_t bt = b * seq + t;
    for (int64_t n = threadIdx.x; n < 2 * state; n += blockDim.x)
      dB[n] = 0.0f; // dB and dC
    __syncthreads();
    const float *row = xb + bt * conv;
    const float *bg = row + inner + g * state,
                *cg = row + inner + gn + g * state;
    float dt = dts[bt * heads + h], decay = expf(dt * a);
    double dDecay = 0, dDt = 0;
    if (channel) {
      float xi = row[h * headDim + i];
      float dyi = dy[bt * inner + h * headDim + i];
      const float *si = states + (bt * inner + h * headDim + i) * state;
      const float *prev =
          t ? states + ((bt - 1) * inner + h * headDim + i) * state : nullptr;
      dDSum += double(dyi) * xi;
      float dxi = dyi * d[h];
      for (int64_t n = 0; n < state; ++n) {
        atomicAdd(dC + n, dyi * si[n]);
        dS[n] += dyi * cg[n];
        if (prev)
          dDecay += double(dS[n]) * prev[n];
        dDt += double(dS[n]) * xi * bg[n];
        dxi += dS[n] * dt * bg[n];
        atomicAdd(dB + n, dS[n] * dt * xi);
        dS[n] *= decay; // to the previous state
      }
      dxb[bt * conv + h * headDim + i] = dxi;
    }
    // The block's sums of dDecay and dDt.
    for (int off = 16; off; off >>= 1) {
      dDecay += __shfl_xor_sync(0xffffffffu, dDecay, off);
      dDt += __shfl_xor_sync(0xffffffffu, dDt, off);
    }
    if (threadIdx.x % 32 == 0) {
      sums[threadIdx.x / 32] = dDecay;
      sums[warps + threadIdx.x / 32] = dDt;
    }
    __syncthreads();
    for (int64_t n = threadIdx.x; n < state; n += blockDim.x) {
      atomicAdd(dxb + bt * conv + inner + g * state + n, dB[n]);
      atomicAdd(dxb + bt * conv + inner + gn + g * state + n, dC[n]);
    }
    if (threadIdx.x == 0) {
      double decaySum = 0, dtSum = 0;
      for (int w = 0; w < warps; ++w) {
        decaySum += sums[w];
        dtSum += sums[warps + w];
      }
      dtSum += decaySum * decay * a;
      da += decaySum * decay * dt;
      if (dtLive[bt * heads + h]) {
        float raw = p[bt * proj + inner + conv + h] + dtBias[h];
        float draw =
            float(dtSum) * (raw > 20.0f ? 1.0f : 1.0f / (1.0f + expf(-raw)));
        dp[bt * proj + inner + conv + h] = draw;
        dtBiasSum += draw;
      }
    }
    __syncthreads(); // sums, dB and dC are read
  }
  // dD: the block's channels, then one atomic per block.
  for (int off = 16; off; off >>= 1)
    dDSum += __shfl_xor_sync(0xffffffffu, dDSum, off);
  if (threadIdx.x % 32 == 0)
    sums[threadIdx.x / 32] = dDSum;
  __syncthreads();
  if (threadIdx.x == 0) {
    double total = 0;
    for (int w = 0; w < warps; ++w)
      total += sums[w];
    atomicAdd(dD + h, float(total));
    atomicAdd(dDtBias + h, float(dtBiasSum));
    atomicAdd(dALog + h, float(foldedA ? da : da * a));
  }
}

/// The cotangent of the convolution's sum at kept positions:
/// dxb * silu'(pre) (0 at masked ones).
__global__ void convSumGradKernel(const float *dxb, const float *pre,
                                  const int64_t *mask, float *dacc, int64_t n,
                                  int64_t conv) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    float acc = pre[i], sg = 1.0f / (1.0f + expf(-acc));
    dacc[i] =
        kept(mask, i / conv) ? dxb[i] * sg * (1.0f + acc * (1.0f - sg)) : 0.0f;
  }
}

/// The projection's xBC cotangent: the sum over the taps that read
/// position src (gathered, not scattered: no atomics).
__global__ void convInputGradKernel(const float *dacc, const float *w,
                                    float *dp, int64_t batch, int64_t seq,
                                    int64_t conv, int64_t proj, int64_t inner,
                                    int64_t kernel) {
  int64_t n = batch * seq * conv;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = i % conv, bs = i / conv, src = bs % seq, b = bs / seq;
    float sum = 0.0f;
    for (int64_t k = 0; k < kernel; ++k) {
      int64_t t = src + (kernel - 1) - k;
      if (t < seq)
        sum += dacc[(b * seq + t) * conv + c] * w[c * kernel + k];
    }
    dp[bs * proj + inner + c] = sum;
  }
}

/// The convolution's weight and bias gradients, one thread per (c, k) (k ==
/// kernel: the bias), summed over batch and tokens in order.
__global__ void convWeightGradKernel(const float *dacc, const float *p,
                                     float *dw, float *dbias, int64_t batch,
                                     int64_t seq, int64_t conv, int64_t proj,
                                     int64_t inner, int64_t kernel) {
  int64_t n = conv * (kernel + 1);
  for (int64_t idx = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; idx < n;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t c = idx / (kernel + 1), k = idx % (kernel + 1);
    double sum = 0;
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t t = 0; t < seq; ++t) {
        float g = dacc[(b * seq + t) * conv + c];
        if (k == kernel) {
          sum += g;
          continue;
        }
        int64_t src = t - (kernel - 1) + k;
        if (src >= 0)
          sum += double(g) * p[(b * seq + src) * proj + inner + c];
      }
    if (k == kernel)
      dbias[c] = float(sum);
    else
      dw[c * kernel + k] = float(sum);
  }
}

/// The sizes of a mixer call, checked (Mamba2Shape, on the GPU), and the
/// CUDA scan's limits.
Mamba2Shape checkedShape(const char *op, const Tensor &x, const Tensor &inProj,
                         const Tensor &convWeight, const Tensor &convBias,
                         const Tensor &dtBias, const Tensor &aLog,
                         const Tensor &d, const Tensor &normWeight,
                         const Tensor &outProj, const Tensor &keyMask,
                         const Tensor &dout, int64_t heads, int64_t headDim,
                         int64_t groups, int64_t state, int64_t kernel) {
  Mamba2Shape m(op, x, inProj, convWeight, convBias, dtBias, aLog, d,
                normWeight, outProj, keyMask, dout, heads, headDim, groups,
                state, kernel, Device::CUDA);
  // The backward's scan runs a block of head_dim threads.
  bool backward = dout.defined();
  int64_t maxHeadDim = backward ? 1024 : INT64_MAX;
  if (state > kMaxState || headDim > maxHeadDim)
    fatal(std::string(op) + ": the CUDA scan takes at most " +
          std::to_string(kMaxState) + " state elements" +
          (backward ? " and 1024 channels per head" : "") + ", got " +
          std::to_string(state) +
          (backward ? " and " + std::to_string(headDim) : std::string()));
  return m;
}

/// Steps 1 to 4 of the mixer (masked input, projection, convolution, scan,
/// gated norm). With `keep` (the backward's recomputation) also what the
/// backward reads: the convolution before SiLU, dt and whether max() kept
/// softplus, every state, z and the inverse RMS; `normed` is then its own
/// tensor, not `y` normed in place.
struct Mamba2Forward {
  Tensor xin, zxbcdt, xbc, pre, y, dts, dtLive, states, z, inv, normed;
};

Mamba2Forward runForward(Context &ctx, const Mamba2Shape &m, const Tensor &x,
                         const Tensor &inProj, const Tensor &convWeight,
                         const Tensor &convBias, const Tensor &dtBias,
                         const Tensor &aLog, const Tensor &d,
                         const Tensor &normWeight, double normEps, double dtMin,
                         bool foldedA, bool keep) {
  auto make = [](std::vector<int64_t> shape) {
    return Tensor::uninitialized(DType::F32, std::move(shape), Device::CUDA);
  };
  auto data = [](Tensor &t) { return t.defined() ? t.f32() : nullptr; };
  Mamba2Forward f;
  f.xin = x;
  if (m.mask) {
    f.xin = make(x.shape());
    maskRowsKernel<<<gridBlocks(x.numel(), kThreads), kThreads, 0, stream()>>>(
        x.f32(), m.mask, f.xin.f32(), x.numel(), m.hidden);
    checkLaunch("mamba2_mixer: mask");
  }
  f.zxbcdt = cuda::linear(ctx, f.xin, inProj, LinearForm::Flat);
  const float *p = f.zxbcdt.f32();
  f.xbc = make({m.batch, m.seq, m.conv});
  if (keep)
    f.pre = make(f.xbc.shape());
  convKernel<<<gridBlocks(f.xbc.numel(), kThreads), kThreads, 0, stream()>>>(
      p, convWeight.f32(), convBias.f32(), m.mask, f.xbc.f32(), data(f.pre),
      m.batch, m.seq, m.conv, m.proj, m.inner, m.kernel);
  checkLaunch("mamba2_mixer: convolution");
  f.y = make({m.batch, m.seq, m.inner});
  if (keep) {
    f.dts = make({m.tokens, m.heads});
    f.dtLive = make({m.tokens, m.heads}); // bytes: one per (token, head)
    f.states = make({m.tokens, m.inner, m.state});
  }
  scanKernel<<<gridBlocks(m.batch * m.heads * m.headDim, 64), 64, 0,
               stream()>>>(
      p, f.xbc.f32(), dtBias.f32(), aLog.f32(), d.f32(), f.y.f32(), data(f.dts),
      keep ? static_cast<uint8_t *>(f.dtLive.raw()) : nullptr, data(f.states),
      m.batch, m.seq, m.heads, m.headDim, m.groups, m.state, m.conv, m.proj,
      m.inner, static_cast<float>(dtMin), foldedA);
  checkLaunch("mamba2_mixer: scan");
  if (keep) {
    f.z = make(f.y.shape());
    f.inv = make({m.tokens, m.groups});
    f.normed = make(f.y.shape());
  } else {
    f.normed = f.y;
  }
  gatedNormKernel<<<gridBlocks(m.tokens * m.groups, 1), kThreads, 0,
                    stream()>>>(p, f.y.f32(), f.normed.f32(), normWeight.f32(),
                                data(f.z), data(f.inv), m.tokens, m.groups,
                                m.groupSize, m.proj, m.inner,
                                static_cast<float>(normEps));
  checkLaunch("mamba2_mixer: gated norm");
  return f;
}

} // namespace

Tensor mamba2_mixer(Context &ctx, const Tensor &x, const Tensor &inProj,
                    const Tensor &convWeight, const Tensor &convBias,
                    const Tensor &dtBias, const Tensor &aLog, const Tensor &d,
                    const Tensor &normWeight, const Tensor &outProj,
                    const Tensor &keyMask, int64_t heads, int64_t headDim,
                    int64_t groups, int64_t state, int64_t kernel,
                    double normEps, double dtMin, bool foldedA) {
  Mamba2Shape m = checkedShape("mamba2_mixer", x, inProj, convWeight, convBias,
                               dtBias, aLog, d, normWeight, outProj, keyMask,
                               Tensor(), heads, headDim, groups, state, kernel);
  if (m.tokens == 0)
    return cuda::linear(ctx, x, outProj, LinearForm::Flat);
  Mamba2Forward f =
      runForward(ctx, m, x, inProj, convWeight, convBias, dtBias, aLog, d,
                 normWeight, normEps, dtMin, foldedA, /*keep=*/false);
  // 5. Output projection.
  return cuda::linear(ctx, f.normed, outProj, LinearForm::Flat);
}

Tensors mamba2_mixer_grad(Context &ctx, const Tensor &x, const Tensor &inProj,
                          const Tensor &convWeight, const Tensor &convBias,
                          const Tensor &dtBias, const Tensor &aLog,
                          const Tensor &d, const Tensor &normWeight,
                          const Tensor &outProj, const Tensor &keyMask,
                          const Tensor &dout, int64_t heads, int64_t headDim,
                          int64_t groups, int64_t state, int64_t kernel,
                          double normEps, double dtMin, bool foldedA) {
  if (reducedType(x, dout) != DType::F32)
    return narrowedLike(
        cuda::mamba2_mixer_grad(
            ctx, widened(x), widened(inProj), widened(convWeight),
            widened(convBias), widened(dtBias), widened(aLog), widened(d),
            widened(normWeight), widened(outProj), keyMask, widened(dout),
            heads, headDim, groups, state, kernel, normEps, dtMin, foldedA),
        {&x, &inProj, &convWeight, &convBias, &dtBias, &aLog, &d, &normWeight,
         &outProj});
  Mamba2Shape m =
      checkedShape("mamba2_mixer_grad", x, inProj, convWeight, convBias, dtBias,
                   aLog, d, normWeight, outProj, keyMask, dout, heads, headDim,
                   groups, state, kernel);
  int64_t batch = m.batch, seq = m.seq, hidden = m.hidden, inner = m.inner,
          conv = m.conv, proj = m.proj, tokens = m.tokens,
          groupSize = m.groupSize;
  const int64_t *mask = m.mask;
  Tensor dConvWeight = zeros(convWeight.shape()),
         dConvBias = zeros(convBias.shape()), dDtBias = zeros(dtBias.shape()),
         dALog = zeros(aLog.shape()), dD = zeros(d.shape()),
         dNormWeight = zeros(normWeight.shape());
  if (tokens == 0)
    return {zeros(x.shape()),
            zeros(inProj.shape()),
            dConvWeight,
            dConvBias,
            dDtBias,
            dALog,
            dD,
            dNormWeight,
            zeros(outProj.shape())};

  // The forward again, keeping what the backward reads.
  Mamba2Forward f =
      runForward(ctx, m, x, inProj, convWeight, convBias, dtBias, aLog, d,
                 normWeight, normEps, dtMin, foldedA, /*keep=*/true);
  const float *p = f.zxbcdt.f32();
  Tensor &xin = f.xin, &zxbcdt = f.zxbcdt, &xbc = f.xbc, &pre = f.pre, &y = f.y,
         &dts = f.dts, &states = f.states, &z = f.z, &inv = f.inv,
         &normed = f.normed;
  uint8_t *live = static_cast<uint8_t *>(f.dtLive.raw());

  // 5. The output projection.
  Tensor dOutProj = cuda::linear_grad_weight(ctx, dout, normed);
  Tensor dNormed = cuda::linear_grad_input(ctx, dout, outProj);
  // 4. The gated norm: y's cotangent, the gate's into dzxbcdt.
  Tensor dzxbcdt = zeros(zxbcdt.shape());
  Tensor dy = Tensor::uninitialized(DType::F32, y.shape(), Device::CUDA);
  gatedNormGradKernel<<<gridBlocks(tokens * groups, 1), kThreads, 0,
                        stream()>>>(
      p, y.f32(), z.f32(), inv.f32(), normWeight.f32(), dNormed.f32(), dy.f32(),
      dzxbcdt.f32(), tokens, groups, groupSize, proj, inner);
  checkLaunch("mamba2_mixer_grad: gated norm backward");
  gatedNormWeightGradKernel<<<gridBlocks(inner, kThreads), kThreads, 0,
                              stream()>>>(z.f32(), inv.f32(), dNormed.f32(),
                                          dNormWeight.f32(), tokens, groups,
                                          groupSize, inner);
  checkLaunch("mamba2_mixer_grad: norm weight");
  // 3. The scan, last token first.
  Tensor dxb = zeros(xbc.shape());
  int threads = static_cast<int>((headDim + 31) / 32 * 32);
  size_t sharedBytes =
      2 * (threads / 32) * sizeof(double) + 2 * state * sizeof(float);
  scanGradKernel<<<static_cast<unsigned>(batch * heads), threads, sharedBytes,
                   stream()>>>(p, xbc.f32(), dtBias.f32(), aLog.f32(), d.f32(),
                               dts.f32(), live, states.f32(), dy.f32(),
                               dxb.f32(), dzxbcdt.f32(), dDtBias.f32(),
                               dALog.f32(), dD.f32(), seq, heads, headDim,
                               groups, state, conv, proj, inner, foldedA);
  checkLaunch("mamba2_mixer_grad: scan backward");
  // 2. Mask, SiLU and the causal depthwise convolution.
  Tensor dacc = Tensor::uninitialized(DType::F32, xbc.shape(), Device::CUDA);
  convSumGradKernel<<<gridBlocks(dacc.numel(), kThreads), kThreads, 0,
                      stream()>>>(dxb.f32(), pre.f32(), mask, dacc.f32(),
                                  dacc.numel(), conv);
  checkLaunch("mamba2_mixer_grad: SiLU backward");
  convInputGradKernel<<<gridBlocks(dacc.numel(), kThreads), kThreads, 0,
                        stream()>>>(dacc.f32(), convWeight.f32(), dzxbcdt.f32(),
                                    batch, seq, conv, proj, inner, kernel);
  checkLaunch("mamba2_mixer_grad: convolution input");
  convWeightGradKernel<<<gridBlocks(conv * (kernel + 1), kThreads), kThreads, 0,
                         stream()>>>(dacc.f32(), p, dConvWeight.f32(),
                                     dConvBias.f32(), batch, seq, conv, proj,
                                     inner, kernel);
  checkLaunch("mamba2_mixer_grad: convolution weight");
  // 1. The input projection and the padding mask.
  Tensor dInProj = cuda::linear_grad_weight(ctx, dzxbcdt, xin);
  Tensor dx = cuda::linear_grad_input(ctx, dzxbcdt, inProj);
  if (mask) {
    maskRowsKernel<<<gridBlocks(dx.numel(), kThreads), kThreads, 0, stream()>>>(
        dx.f32(), mask, dx.f32(), dx.numel(), hidden);
    checkLaunch("mamba2_mixer_grad: mask");
  }
  return {dx,    dInProj, dConvWeight, dConvBias, dDtBias,
          dALog, dD,      dNormWeight, dOutProj};
}

} // namespace cuda
} // namespace tprt
