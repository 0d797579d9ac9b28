//===- mamba2.cpp - the Mamba2 mixer (tp.mamba2_mixer) on the CPU ---------===//
//
// The selective scan runs as its recurrence, one state [head_dim, state]
// per (batch, head), which is exact and linear in the sequence length;
// HF's chunked SSD form computes the same sums in another order.
//
//===----------------------------------------------------------------------===//

#include "KernelUtils.h"
#include "cuda/Cuda.h"
#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tprt {

namespace {

/// Steps 1 and 2 of the mixer: padding positions zeroed (`xin`), the input
/// projection (returned), then the causal depthwise convolution over the
/// sequence, its bias, SiLU and the mask (`xbc`, [tokens, conv]); `pre`,
/// when given, gets the convolution's output before SiLU.
Tensor projectAndConvolve(Context &ctx, const Tensor &x, const Tensor &inProj,
                          const Tensor &convWeight, const Tensor &convBias,
                          const Mamba2Shape &m, int64_t kernel, Tensor &xin,
                          float *xbc, float *pre) {
  xin = x;
  if (m.mask) {
    xin = Tensor::uninitialized(DType::F32, x.shape());
    for (int64_t t = 0; t < m.batch * m.seq; ++t)
      for (int64_t c = 0; c < m.hidden; ++c)
        xin.f32()[t * m.hidden + c] =
            x.f32()[t * m.hidden + c] * float(m.kept(t));
  }
  Tensor zxbcdt = linear(ctx, xin, inProj);
  const float *p = zxbcdt.f32();
  const float *w = convWeight.f32(), *bias = convBias.f32();
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < m.batch; ++b)
    for (int64_t c = 0; c < m.conv; ++c)
      for (int64_t t = 0; t < m.seq; ++t) {
        float acc = bias[c];
        for (int64_t k = 0; k < kernel; ++k) {
          int64_t src = t - (kernel - 1) + k;
          if (src >= 0)
            acc +=
                w[c * kernel + k] * p[(b * m.seq + src) * m.proj + m.inner + c];
        }
        int64_t at = (b * m.seq + t) * m.conv + c;
        if (pre)
          pre[at] = acc;
        xbc[at] = m.kept(b * m.seq + t) ? acc / (1.0f + std::exp(-acc)) : 0.0f;
      }
  return zxbcdt;
}

/// Step 3, the selective scan, with dt = max(softplus(dt + dt_bias),
/// dt_min): y [tokens, inner] from the projection `p` and the convolved
/// `xb`. The backward's recomputation also asks for dt per (token, head)
/// (`dts`), whether max() kept softplus (`dtLive`) and every state after
/// each token (`states`, [tokens, inner, state]); null when not wanted.
void selectiveScan(const Mamba2Shape &m, const float *p, const float *xb,
                   const float *dtBias, const float *aLog, const float *d,
                   int64_t heads, int64_t headDim, int64_t groups,
                   int64_t state, double dtMin, bool foldedA, float *y,
                   float *dts, uint8_t *dtLive, float *states) {
  int64_t perGroup = heads / groups, gn = groups * state, inner = m.inner;
#pragma omp parallel for collapse(2) schedule(static)
  for (int64_t b = 0; b < m.batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / perGroup;
      float a = foldedA ? aLog[h] : -std::exp(aLog[h]);
      std::vector<float> s(headDim * state, 0.0f);
      for (int64_t t = 0; t < m.seq; ++t) {
        int64_t bt = b * m.seq + t;
        const float *row = xb + bt * m.conv;
        const float *xh = row + h * headDim;
        const float *bg = row + inner + g * state;
        const float *cg = row + inner + gn + g * state;
        float dt = p[bt * m.proj + inner + m.conv + h] + dtBias[h];
        dt = dt > 20.0f ? dt : std::log1p(std::exp(dt)); // softplus
        if (dtLive)
          dtLive[bt * heads + h] = dt >= static_cast<float>(dtMin);
        dt = std::max(dt, static_cast<float>(dtMin));
        if (dts)
          dts[bt * heads + h] = dt;
        float decay = std::exp(dt * a);
        float *out = y + bt * inner + h * headDim;
        for (int64_t i = 0; i < headDim; ++i) {
          float *si = s.data() + i * state;
          float dx = dt * xh[i], acc = 0.0f;
          for (int64_t n = 0; n < state; ++n) {
            si[n] = decay * si[n] + dx * bg[n];
            acc += si[n] * cg[n];
          }
          out[i] = acc + d[h] * xh[i];
          if (states)
            std::copy_n(si, state,
                        states + (bt * inner + h * headDim + i) * state);
        }
      }
    }
}

/// Step 4, the gated RMS norm over groups of inner / groups: z = y *
/// silu(gate), out = w * z / rms(z) per group (`out` may be `y`). The
/// backward's recomputation also keeps z and the inverse RMS per (token,
/// group); null when not wanted.
void gatedNorm(const Mamba2Shape &m, const float *p, const float *y,
               const float *w, int64_t groups, double eps, float *out, float *z,
               float *inv) {
  int64_t inner = m.inner, groupSize = inner / groups;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < m.batch * m.seq; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      double sum = 0;
      for (int64_t i = g * groupSize; i < (g + 1) * groupSize; ++i) {
        float gate = p[t * m.proj + i];
        float zi = y[t * inner + i] * (gate / (1.0f + std::exp(-gate)));
        if (z)
          z[t * inner + i] = zi;
        out[t * inner + i] = zi;
        sum += double(zi) * zi;
      }
      float r = 1.0f / std::sqrt(float(sum / groupSize) + float(eps));
      if (inv)
        inv[t * groups + g] = r;
      for (int64_t i = g * groupSize; i < (g + 1) * groupSize; ++i)
        out[t * inner + i] = w[i] * (out[t * inner + i] * r);
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
  TPRT_ON_CUDA(ctx,
               mamba2_mixer(ctx, x, inProj, convWeight, convBias, dtBias, aLog,
                            d, normWeight, outProj, keyMask, heads, headDim,
                            groups, state, kernel, normEps, dtMin, foldedA))
  TPRT_IN_F32(x, mamba2_mixer(ctx, widened(x), widened(inProj),
                              widened(convWeight), widened(convBias),
                              widened(dtBias), widened(aLog), widened(d),
                              widened(normWeight), widened(outProj), keyMask,
                              heads, headDim, groups, state, kernel, normEps,
                              dtMin, foldedA))
  Mamba2Shape m("mamba2_mixer", x, inProj, convWeight, convBias, dtBias, aLog,
                d, normWeight, outProj, keyMask, Tensor(), heads, headDim,
                groups, state, kernel);
  int64_t batch = m.batch, seq = m.seq, inner = m.inner, conv = m.conv;

  // 1, 2. Masked input, projection, convolution, SiLU, mask.
  Tensor xin, xbc = Tensor::uninitialized(DType::F32, {batch, seq, conv});
  Tensor zxbcdt = projectAndConvolve(ctx, x, inProj, convWeight, convBias, m,
                                     kernel, xin, xbc.f32(), nullptr);

  // 3. Selective scan; 4. gated RMS norm, in place.
  Tensor y = Tensor::uninitialized(DType::F32, {batch, seq, inner});
  selectiveScan(m, zxbcdt.f32(), xbc.f32(), dtBias.f32(), aLog.f32(), d.f32(),
                heads, headDim, groups, state, dtMin, foldedA, y.f32(), nullptr,
                nullptr, nullptr);
  gatedNorm(m, zxbcdt.f32(), y.f32(), normWeight.f32(), groups, normEps,
            y.f32(), nullptr, nullptr);

  // 5. Output projection.
  return linear(ctx, y, outProj);
}

Tensors mamba2_mixer_grad(Context &ctx, const Tensor &x, const Tensor &inProj,
                          const Tensor &convWeight, const Tensor &convBias,
                          const Tensor &dtBias, const Tensor &aLog,
                          const Tensor &d, const Tensor &normWeight,
                          const Tensor &outProj, const Tensor &keyMask,
                          const Tensor &dout, int64_t heads, int64_t headDim,
                          int64_t groups, int64_t state, int64_t kernel,
                          double normEps, double dtMin, bool foldedA) {
  TPRT_ON_CUDA(ctx, mamba2_mixer_grad(ctx, x, inProj, convWeight, convBias,
                                      dtBias, aLog, d, normWeight, outProj,
                                      keyMask, dout, heads, headDim, groups,
                                      state, kernel, normEps, dtMin, foldedA))
  if (reducedType(x, dout) != DType::F32)
    return narrowedLike(
        mamba2_mixer_grad(ctx, widened(x), widened(inProj), widened(convWeight),
                          widened(convBias), widened(dtBias), widened(aLog),
                          widened(d), widened(normWeight), widened(outProj),
                          keyMask, widened(dout), heads, headDim, groups, state,
                          kernel, normEps, dtMin, foldedA),
        {&x, &inProj, &convWeight, &convBias, &dtBias, &aLog, &d, &normWeight,
         &outProj});
  Mamba2Shape m("mamba2_mixer_grad", x, inProj, convWeight, convBias, dtBias,
                aLog, d, normWeight, outProj, keyMask, dout, heads, headDim,
                groups, state, kernel);
  int64_t batch = m.batch, seq = m.seq, hidden = m.hidden, inner = m.inner,
          conv = m.conv, proj = m.proj;
  const int64_t *mask = m.mask;
  auto kept = [&](int64_t bt) { return m.kept(bt); };
  int64_t tokens = m.tokens, perGroup = heads / groups, gn = groups * state,
          groupSize = m.groupSize;

  // The forward again, keeping what the backward reads.
  Tensor xin;
  std::vector<float> pre(tokens * conv), xb(tokens * conv);
  Tensor zxbcdt = projectAndConvolve(ctx, x, inProj, convWeight, convBias, m,
                                     kernel, xin, xb.data(), pre.data());
  const float *p = zxbcdt.f32();
  const float *w = convWeight.f32();
  const float *dtb = dtBias.f32(), *al = aLog.f32(), *dd = d.f32();
  // dt per (token, head), whether max() kept softplus, the scan's states.
  std::vector<float> dts(tokens * heads), ys(tokens * inner);
  std::vector<uint8_t> dtLive(tokens * heads);
  std::vector<float> states(tokens * inner * state);
  selectiveScan(m, p, xb.data(), dtb, al, dd, heads, headDim, groups, state,
                dtMin, foldedA, ys.data(), dts.data(), dtLive.data(),
                states.data());
  // The gated norm's input z = y * silu(gate), its inverse RMS, its output.
  std::vector<float> z(tokens * inner), inv(tokens * groups);
  Tensor normed = Tensor::uninitialized(DType::F32, {batch, seq, inner});
  const float *nw = normWeight.f32();
  gatedNorm(m, p, ys.data(), nw, groups, normEps, normed.f32(), z.data(),
            inv.data());

  // 5. The output projection.
  Tensor dOutProj = linear_grad_weight(ctx, dout, normed);
  Tensor dNormed = linear_grad_input(ctx, dout, outProj);
  // 4. The gated norm: dz, then y and the gate.
  Tensor dNormWeight(DType::F32, normWeight.shape());
  Tensor dz(DType::F32, {batch, seq, inner});
  Tensor dzxbcdt(DType::F32, zxbcdt.shape());
  float *dp = dzxbcdt.f32();
  std::vector<float> dy(tokens * inner);
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      float r = inv[t * groups + g];
      double dot = 0;
      for (int64_t i = g * groupSize; i < (g + 1) * groupSize; ++i) {
        float zn = z[t * inner + i] * r, gi = dNormed.f32()[t * inner + i];
        dNormWeight.f32()[i] += gi * zn;
        dot += double(gi) * nw[i] * zn;
      }
      float mean = float(dot / groupSize);
      for (int64_t i = g * groupSize; i < (g + 1) * groupSize; ++i) {
        float zn = z[t * inner + i] * r;
        float dzi = r * (dNormed.f32()[t * inner + i] * nw[i] - zn * mean);
        float gate = p[t * proj + i], sg = 1.0f / (1.0f + std::exp(-gate));
        dy[t * inner + i] = dzi * gate * sg;
        dp[t * proj + i] =
            dzi * ys[t * inner + i] * sg * (1.0f + gate * (1.0f - sg));
      }
    }
  // 3. The scan, last step first: dS carries the state's cotangent.
  std::vector<float> dxb(tokens * conv, 0.0f);
  Tensor dDtBias(DType::F32, dtBias.shape()), dALog(DType::F32, aLog.shape()),
      dD(DType::F32, d.shape());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / perGroup;
      float a = foldedA ? al[h] : -std::exp(al[h]);
      double da = 0;
      std::vector<float> dS(headDim * state, 0.0f);
      for (int64_t t = seq - 1; t >= 0; --t) {
        int64_t bt = b * seq + t;
        const float *row = xb.data() + bt * conv;
        const float *xh = row + h * headDim, *bg = row + inner + g * state,
                    *cg = row + inner + gn + g * state;
        float *dxh = dxb.data() + bt * conv + h * headDim;
        float *dbg = dxb.data() + bt * conv + inner + g * state;
        float *dcg = dxb.data() + bt * conv + inner + gn + g * state;
        float dt = dts[bt * heads + h], decay = std::exp(dt * a);
        double dDecay = 0, dDt = 0;
        for (int64_t i = 0; i < headDim; ++i) {
          float dyi = dy[bt * inner + h * headDim + i];
          const float *si =
              states.data() + (bt * inner + h * headDim + i) * state;
          const float *prev =
              t ? states.data() + ((bt - 1) * inner + h * headDim + i) * state
                : nullptr;
          float *dsi = dS.data() + i * state;
          dD.f32()[h] += dyi * xh[i];
          dxh[i] += dyi * dd[h];
          for (int64_t n = 0; n < state; ++n) {
            dcg[n] += dyi * si[n];
            dsi[n] += dyi * cg[n];
            if (prev)
              dDecay += double(dsi[n]) * prev[n];
            dDt += double(dsi[n]) * xh[i] * bg[n];
            dxh[i] += dsi[n] * dt * bg[n];
            dbg[n] += dsi[n] * dt * xh[i];
            dsi[n] *= decay; // to the previous state
          }
        }
        dDt += dDecay * decay * a;
        da += dDecay * decay * dt;
        if (dtLive[bt * heads + h]) {
          float raw = p[bt * proj + inner + conv + h] + dtb[h];
          float draw = float(dDt) *
                       (raw > 20.0f ? 1.0f : 1.0f / (1.0f + std::exp(-raw)));
          dp[bt * proj + inner + conv + h] = draw;
          dDtBias.f32()[h] += draw;
        }
      }
      dALog.f32()[h] += static_cast<float>(foldedA ? da : da * a);
    }
  // 2. Mask, SiLU and the causal depthwise convolution.
  Tensor dConvWeight(DType::F32, convWeight.shape()),
      dConvBias(DType::F32, convBias.shape());
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t c = 0; c < conv; ++c)
      for (int64_t t = 0; t < seq; ++t) {
        int64_t bt = b * seq + t;
        if (!kept(bt))
          continue;
        float acc = pre[bt * conv + c], sg = 1.0f / (1.0f + std::exp(-acc));
        float dacc = dxb[bt * conv + c] * sg * (1.0f + acc * (1.0f - sg));
        dConvBias.f32()[c] += dacc;
        for (int64_t k = 0; k < kernel; ++k) {
          int64_t src = t - (kernel - 1) + k;
          if (src < 0)
            continue;
          dConvWeight.f32()[c * kernel + k] +=
              dacc * p[(b * seq + src) * proj + inner + c];
          dp[(b * seq + src) * proj + inner + c] += dacc * w[c * kernel + k];
        }
      }
  // 1. The input projection and the padding mask.
  Tensor dInProj = linear_grad_weight(ctx, dzxbcdt, xin);
  Tensor dx = linear_grad_input(ctx, dzxbcdt, inProj);
  if (mask)
    for (int64_t t = 0; t < tokens; ++t)
      if (!kept(t))
        std::fill_n(dx.f32() + t * hidden, hidden, 0.0f);
  return {dx,    dInProj, dConvWeight, dConvBias, dDtBias,
          dALog, dD,      dNormWeight, dOutProj};
}

} // namespace tprt
