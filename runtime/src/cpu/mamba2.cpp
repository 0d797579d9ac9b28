//===- mamba2.cpp - the Mamba2 mixer (tp.mamba2_mixer) on the CPU ---------===//
//
// The selective scan runs as its recurrence, one state [head_dim, state]
// per (batch, head), which is exact and linear in the sequence length;
// HF's chunked SSD form computes the same sums in another order.
//
//===----------------------------------------------------------------------===//

#include "KernelUtils.h"
#include "ops/Backends.h"
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
  Tensor zxbcdt = linear(ctx, xin, inProj, LinearForm::Flat);
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

Tensor cpu::mamba2_mixer(Context &ctx, const Tensor &x, const Tensor &inProj,
                         const Tensor &convWeight, const Tensor &convBias,
                         const Tensor &dtBias, const Tensor &aLog,
                         const Tensor &d, const Tensor &normWeight,
                         const Tensor &outProj, const Tensor &keyMask,
                         int64_t heads, int64_t headDim, int64_t groups,
                         int64_t state, int64_t kernel, double normEps,
                         double dtMin, bool foldedA) {
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
  return cpu::linear(ctx, y, outProj, LinearForm::Flat);
}

namespace {

/// The forward of the mixer again, keeping what the backward reads.
struct Mamba2Saved {
  /// The masked input, the input projection, the gated norm's output.
  Tensor xin, zxbcdt, normed;
  /// The convolution's output before SiLU and after it, [tokens, conv].
  std::vector<float> pre, xb;
  /// dt per (token, head), whether max() kept softplus, the scan's output
  /// and its states.
  std::vector<float> dts, ys, states;
  std::vector<uint8_t> dtLive;
  /// The gated norm's input z = y * silu(gate) and its inverse RMS.
  std::vector<float> z, inv;
};

Mamba2Saved recompute(Context &ctx, const Mamba2Shape &m, const Tensor &x,
                      const Tensor &inProj, const Tensor &convWeight,
                      const Tensor &convBias, const Tensor &dtBias,
                      const Tensor &aLog, const Tensor &d,
                      const Tensor &normWeight, int64_t heads, int64_t headDim,
                      int64_t groups, int64_t state, int64_t kernel,
                      double normEps, double dtMin, bool foldedA) {
  Mamba2Saved s;
  int64_t tokens = m.tokens;
  s.pre.resize(tokens * m.conv);
  s.xb.resize(tokens * m.conv);
  s.zxbcdt = projectAndConvolve(ctx, x, inProj, convWeight, convBias, m, kernel,
                                s.xin, s.xb.data(), s.pre.data());
  s.dts.resize(tokens * heads);
  s.ys.resize(tokens * m.inner);
  s.dtLive.resize(tokens * heads);
  s.states.resize(tokens * m.inner * state);
  selectiveScan(m, s.zxbcdt.f32(), s.xb.data(), dtBias.f32(), aLog.f32(),
                d.f32(), heads, headDim, groups, state, dtMin, foldedA,
                s.ys.data(), s.dts.data(), s.dtLive.data(), s.states.data());
  s.z.resize(tokens * m.inner);
  s.inv.resize(tokens * groups);
  s.normed = Tensor::uninitialized(DType::F32, {m.batch, m.seq, m.inner});
  gatedNorm(m, s.zxbcdt.f32(), s.ys.data(), normWeight.f32(), groups, normEps,
            s.normed.f32(), s.z.data(), s.inv.data());
  return s;
}

/// Step 4 backward, the gated norm: its weight's gradient, the scan
/// output's (`dy`) and the gate's (into `dp`, the projection's gradient).
void gatedNormGrad(const Mamba2Shape &m, const Mamba2Saved &s, const float *nw,
                   const float *dNormed, int64_t groups, float *dNormWeight,
                   float *dy, float *dp) {
  const float *p = s.zxbcdt.f32();
  int64_t inner = m.inner, proj = m.proj, groupSize = m.groupSize;
  for (int64_t t = 0; t < m.tokens; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      float r = s.inv[t * groups + g];
      double dot = 0;
      for (int64_t i = g * groupSize; i < (g + 1) * groupSize; ++i) {
        float zn = s.z[t * inner + i] * r, gi = dNormed[t * inner + i];
        dNormWeight[i] += gi * zn;
        dot += double(gi) * nw[i] * zn;
      }
      float mean = float(dot / groupSize);
      for (int64_t i = g * groupSize; i < (g + 1) * groupSize; ++i) {
        float zn = s.z[t * inner + i] * r;
        float dzi = r * (dNormed[t * inner + i] * nw[i] - zn * mean);
        float gate = p[t * proj + i], sg = 1.0f / (1.0f + std::exp(-gate));
        dy[t * inner + i] = dzi * gate * sg;
        dp[t * proj + i] =
            dzi * s.ys[t * inner + i] * sg * (1.0f + gate * (1.0f - sg));
      }
    }
}

/// The gradients step 3's backward (the scan, last step first) gives.
struct ScanGrads {
  float *dxb, *dp, *dDtBias, *dALog, *dD;
};

/// Step 3 backward: dS carries the state's cotangent from the last step.
void scanGrad(const Mamba2Shape &m, const Mamba2Saved &s, const float *dy,
              const float *dtb, const float *al, const float *dd, int64_t heads,
              int64_t headDim, int64_t groups, int64_t state, bool foldedA,
              const ScanGrads &out) {
  const float *p = s.zxbcdt.f32();
  int64_t seq = m.seq, inner = m.inner, conv = m.conv, proj = m.proj;
  int64_t perGroup = heads / groups, gn = groups * state;
  for (int64_t b = 0; b < m.batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / perGroup;
      float a = foldedA ? al[h] : -std::exp(al[h]);
      double da = 0;
      std::vector<float> dS(headDim * state, 0.0f);
      for (int64_t t = seq - 1; t >= 0; --t) {
        int64_t bt = b * seq + t;
        const float *row = s.xb.data() + bt * conv;
        const float *xh = row + h * headDim, *bg = row + inner + g * state,
                    *cg = row + inner + gn + g * state;
        float *dxh = out.dxb + bt * conv + h * headDim;
        float *dbg = out.dxb + bt * conv + inner + g * state;
        float *dcg = out.dxb + bt * conv + inner + gn + g * state;
        float dt = s.dts[bt * heads + h], decay = std::exp(dt * a);
        double dDecay = 0, dDt = 0;
        for (int64_t i = 0; i < headDim; ++i) {
          float dyi = dy[bt * inner + h * headDim + i];
          const float *si =
              s.states.data() + (bt * inner + h * headDim + i) * state;
          const float *prev =
              t ? s.states.data() + ((bt - 1) * inner + h * headDim + i) * state
                : nullptr;
          float *dsi = dS.data() + i * state;
          out.dD[h] += dyi * xh[i];
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
        if (s.dtLive[bt * heads + h]) {
          float raw = p[bt * proj + inner + conv + h] + dtb[h];
          float draw = float(dDt) *
                       (raw > 20.0f ? 1.0f : 1.0f / (1.0f + std::exp(-raw)));
          out.dp[bt * proj + inner + conv + h] = draw;
          out.dDtBias[h] += draw;
        }
      }
      out.dALog[h] += static_cast<float>(foldedA ? da : da * a);
    }
}

/// Step 2 backward: the mask, SiLU and the causal depthwise convolution.
void convolutionGrad(const Mamba2Shape &m, const Mamba2Saved &s, const float *w,
                     int64_t kernel, const float *dxb, float *dp,
                     float *dConvWeight, float *dConvBias) {
  const float *p = s.zxbcdt.f32();
  int64_t seq = m.seq, inner = m.inner, conv = m.conv, proj = m.proj;
  for (int64_t b = 0; b < m.batch; ++b)
    for (int64_t c = 0; c < conv; ++c)
      for (int64_t t = 0; t < seq; ++t) {
        int64_t bt = b * seq + t;
        if (!m.kept(bt))
          continue;
        float acc = s.pre[bt * conv + c], sg = 1.0f / (1.0f + std::exp(-acc));
        float dacc = dxb[bt * conv + c] * sg * (1.0f + acc * (1.0f - sg));
        dConvBias[c] += dacc;
        for (int64_t k = 0; k < kernel; ++k) {
          int64_t src = t - (kernel - 1) + k;
          if (src < 0)
            continue;
          dConvWeight[c * kernel + k] +=
              dacc * p[(b * seq + src) * proj + inner + c];
          dp[(b * seq + src) * proj + inner + c] += dacc * w[c * kernel + k];
        }
      }
}

} // namespace

Tensors cpu::mamba2_mixer_grad(Context &ctx, const Tensor &x,
                               const Tensor &inProj, const Tensor &convWeight,
                               const Tensor &convBias, const Tensor &dtBias,
                               const Tensor &aLog, const Tensor &d,
                               const Tensor &normWeight, const Tensor &outProj,
                               const Tensor &keyMask, const Tensor &dout,
                               int64_t heads, int64_t headDim, int64_t groups,
                               int64_t state, int64_t kernel, double normEps,
                               double dtMin, bool foldedA) {
  if (reducedType(x, dout) != DType::F32)
    return narrowedLike(
        cpu::mamba2_mixer_grad(
            ctx, widened(x), widened(inProj), widened(convWeight),
            widened(convBias), widened(dtBias), widened(aLog), widened(d),
            widened(normWeight), widened(outProj), keyMask, widened(dout),
            heads, headDim, groups, state, kernel, normEps, dtMin, foldedA),
        {&x, &inProj, &convWeight, &convBias, &dtBias, &aLog, &d, &normWeight,
         &outProj});
  Mamba2Shape m("mamba2_mixer_grad", x, inProj, convWeight, convBias, dtBias,
                aLog, d, normWeight, outProj, keyMask, dout, heads, headDim,
                groups, state, kernel);
  Mamba2Saved s = recompute(ctx, m, x, inProj, convWeight, convBias, dtBias,
                            aLog, d, normWeight, heads, headDim, groups, state,
                            kernel, normEps, dtMin, foldedA);

  // 5. The output projection.
  Tensor dOutProj = cpu::linear_grad_weight(ctx, dout, s.normed);
  Tensor dNormed = cpu::linear_grad_input(ctx, dout, outProj);
  // 4. The gated norm: dz, then y and the gate.
  Tensor dNormWeight(DType::F32, normWeight.shape());
  Tensor dzxbcdt(DType::F32, s.zxbcdt.shape());
  std::vector<float> dy(m.tokens * m.inner);
  gatedNormGrad(m, s, normWeight.f32(), dNormed.f32(), groups,
                dNormWeight.f32(), dy.data(), dzxbcdt.f32());
  // 3. The scan, last step first.
  std::vector<float> dxb(m.tokens * m.conv, 0.0f);
  Tensor dDtBias(DType::F32, dtBias.shape()), dALog(DType::F32, aLog.shape()),
      dD(DType::F32, d.shape());
  scanGrad(m, s, dy.data(), dtBias.f32(), aLog.f32(), d.f32(), heads, headDim,
           groups, state, foldedA,
           {dxb.data(), dzxbcdt.f32(), dDtBias.f32(), dALog.f32(), dD.f32()});
  // 2. Mask, SiLU and the causal depthwise convolution.
  Tensor dConvWeight(DType::F32, convWeight.shape()),
      dConvBias(DType::F32, convBias.shape());
  convolutionGrad(m, s, convWeight.f32(), kernel, dxb.data(), dzxbcdt.f32(),
                  dConvWeight.f32(), dConvBias.f32());
  // 1. The input projection and the padding mask.
  Tensor dInProj = cpu::linear_grad_weight(ctx, dzxbcdt, s.xin);
  Tensor dx = cpu::linear_grad_input(ctx, dzxbcdt, inProj);
  if (m.mask)
    for (int64_t t = 0; t < m.tokens; ++t)
      if (!m.kept(t))
        std::fill_n(dx.f32() + t * m.hidden, m.hidden, 0.0f);
  return {dx,    dInProj, dConvWeight, dConvBias, dDtBias,
          dALog, dD,      dNormWeight, dOutProj};
}

} // namespace tprt
