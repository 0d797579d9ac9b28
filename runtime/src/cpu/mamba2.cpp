//===- mamba2.cpp - the Mamba2 mixer (tp.mamba2_mixer) on the CPU ---------===//
//
// The selective scan runs as its recurrence, one state [head_dim, state]
// per (batch, head), which is exact and linear in the sequence length;
// HF's chunked SSD form computes the same sums in another order.
//
//===----------------------------------------------------------------------===//

#include "tprt/tprt.h"

#include <cmath>
#include <string>
#include <vector>

namespace tprt {

Tensor mamba2_mixer(Context &ctx, const Tensor &x, const Tensor &inProj,
                    const Tensor &convWeight, const Tensor &convBias,
                    const Tensor &dtBias, const Tensor &aLog, const Tensor &d,
                    const Tensor &normWeight, const Tensor &outProj,
                    const Tensor &keyMask, int64_t heads, int64_t headDim,
                    int64_t groups, int64_t state, int64_t kernel,
                    double normEps, double dtMin, bool foldedA) {
  int64_t batch = x.dim(0), seq = x.dim(1), inner = heads * headDim,
          conv = inner + 2 * groups * state, proj = inner + conv + heads;
  if (x.rank() != 3 || inProj.dim(0) != proj || convWeight.numel() != conv * kernel ||
      convBias.numel() != conv || dtBias.numel() != heads ||
      aLog.numel() != heads || d.numel() != heads ||
      normWeight.numel() != inner || outProj.dim(1) != inner ||
      heads % groups != 0)
    fatal("mamba2_mixer: parameters do not match " + std::to_string(heads) +
          " heads of " + std::to_string(headDim) + ", " +
          std::to_string(groups) + " groups of state " + std::to_string(state));
  const int64_t *mask = nullptr;
  if (keyMask.defined()) {
    if (keyMask.dtype() != DType::I64 || keyMask.dim(0) != batch ||
        keyMask.dim(1) != seq)
      fatal("mamba2_mixer: key mask " + keyMask.describe() +
            " is not int64 [batch, seq]");
    mask = keyMask.i64();
  }

  // 1. Zero padding positions, project.
  Tensor xin = x;
  if (mask) {
    xin = Tensor::uninitialized(DType::F32, x.shape());
    int64_t hidden = x.dim(2);
    for (int64_t t = 0; t < batch * seq; ++t)
      for (int64_t c = 0; c < hidden; ++c)
        xin.f32()[t * hidden + c] = x.f32()[t * hidden + c] * float(mask[t] != 0);
  }
  Tensor zxbcdt = linear(ctx, xin, inProj);
  const float *p = zxbcdt.f32();

  // 2. Causal depthwise conv over the sequence, bias, SiLU, mask.
  Tensor xbc = Tensor::uninitialized(DType::F32, {batch, seq, conv});
  const float *w = convWeight.f32(), *bias = convBias.f32();
  float *xb = xbc.f32();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < conv; ++c)
      for (int64_t t = 0; t < seq; ++t) {
        float acc = bias[c];
        for (int64_t k = 0; k < kernel; ++k) {
          int64_t src = t - (kernel - 1) + k;
          if (src >= 0)
            acc += w[c * kernel + k] * p[(b * seq + src) * proj + inner + c];
        }
        float v = acc / (1.0f + std::exp(-acc));
        xb[(b * seq + t) * conv + c] = mask && !mask[b * seq + t] ? 0.0f : v;
      }

  // 3. Selective scan: dt = max(softplus(dt + dt_bias), dt_min).
  int64_t perGroup = heads / groups, gn = groups * state;
  Tensor y = Tensor::uninitialized(DType::F32, {batch, seq, inner});
  float *yd = y.f32();
  const float *dtb = dtBias.f32(), *al = aLog.f32(), *dd = d.f32();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / perGroup;
      float a = foldedA ? al[h] : -std::exp(al[h]);
      std::vector<float> s(headDim * state, 0.0f);
      for (int64_t t = 0; t < seq; ++t) {
        const float *row = xb + (b * seq + t) * conv;
        const float *xh = row + h * headDim;
        const float *bg = row + inner + g * state;
        const float *cg = row + inner + gn + g * state;
        float dt = p[(b * seq + t) * proj + inner + conv + h] + dtb[h];
        dt = dt > 20.0f ? dt : std::log1p(std::exp(dt)); // softplus
        dt = std::max(dt, static_cast<float>(dtMin));
        float decay = std::exp(dt * a);
        float *out = yd + (b * seq + t) * inner + h * headDim;
        for (int64_t i = 0; i < headDim; ++i) {
          float *si = s.data() + i * state;
          float dx = dt * xh[i], acc = 0.0f;
          for (int64_t n = 0; n < state; ++n) {
            si[n] = decay * si[n] + dx * bg[n];
            acc += si[n] * cg[n];
          }
          out[i] = acc + dd[h] * xh[i];
        }
      }
    }

  // 4. Gated RMS norm over groups of inner / groups: y * silu(gate).
  int64_t groupSize = inner / groups;
  const float *nw = normWeight.f32();
  float eps = static_cast<float>(normEps);
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < batch * seq; ++t) {
    float *row = yd + t * inner;
    const float *gate = p + t * proj;
    for (int64_t i = 0; i < inner; ++i)
      row[i] *= gate[i] / (1.0f + std::exp(-gate[i]));
    for (int64_t g = 0; g < groups; ++g) {
      float *grp = row + g * groupSize;
      double sum = 0;
      for (int64_t i = 0; i < groupSize; ++i)
        sum += double(grp[i]) * grp[i];
      float inv = 1.0f / std::sqrt(float(sum / groupSize) + eps);
      for (int64_t i = 0; i < groupSize; ++i)
        grp[i] = nw[g * groupSize + i] * (grp[i] * inv);
    }
  }

  // 5. Output projection.
  return linear(ctx, y, outProj);
}

} // namespace tprt
