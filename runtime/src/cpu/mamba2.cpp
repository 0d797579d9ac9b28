//===- mamba2.cpp - the Mamba2 mixer (tp.mamba2_mixer) on the CPU ---------===//
//
// The selective scan runs as its recurrence, one state [head_dim, state]
// per (batch, head), which is exact and linear in the sequence length;
// HF's chunked SSD form computes the same sums in another order.
//
//===----------------------------------------------------------------------===//

#include "tprt/tprt.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace tprt {

namespace {

/// The sizes of a mixer call; the parameters and the mask are checked
/// against them (and `dout`, the backward's output cotangent, when given).
struct Mamba2Dims {
  int64_t batch, seq, hidden, inner, conv, proj;
  const int64_t *mask = nullptr;

  Mamba2Dims(const char *op, const Tensor &x, const Tensor &inProj,
             const Tensor &convWeight, const Tensor &convBias,
             const Tensor &dtBias, const Tensor &aLog, const Tensor &d,
             const Tensor &normWeight, const Tensor &outProj,
             const Tensor &keyMask, const Tensor &dout, int64_t heads,
             int64_t headDim, int64_t groups, int64_t state, int64_t kernel) {
    batch = x.dim(0);
    seq = x.dim(1);
    hidden = x.dim(2);
    inner = heads * headDim;
    conv = inner + 2 * groups * state;
    proj = inner + conv + heads;
    if (x.rank() != 3 || inProj.dim(0) != proj ||
        convWeight.numel() != conv * kernel || convBias.numel() != conv ||
        dtBias.numel() != heads || aLog.numel() != heads ||
        d.numel() != heads || normWeight.numel() != inner ||
        outProj.dim(1) != inner || heads % groups != 0 ||
        (dout.defined() && dout.shape() != x.shape()))
      fatal(std::string(op) + ": parameters do not match " +
            std::to_string(heads) + " heads of " + std::to_string(headDim) +
            ", " + std::to_string(groups) + " groups of state " +
            std::to_string(state));
    if (keyMask.defined()) {
      if (keyMask.dtype() != DType::I64 || keyMask.dim(0) != batch ||
          keyMask.dim(1) != seq)
        fatal(std::string(op) + ": key mask " + keyMask.describe() +
              " is not int64 [batch, seq]");
      mask = keyMask.i64();
    }
  }
  bool kept(int64_t token) const { return !mask || mask[token] != 0; }
};

/// Steps 1 and 2 of the mixer: padding positions zeroed (`xin`), the input
/// projection (returned), then the causal depthwise convolution over the
/// sequence, its bias, SiLU and the mask (`xbc`, [tokens, conv]); `pre`,
/// when given, gets the convolution's output before SiLU.
Tensor projectAndConvolve(Context &ctx, const Tensor &x, const Tensor &inProj,
                          const Tensor &convWeight, const Tensor &convBias,
                          const Mamba2Dims &m, int64_t kernel, Tensor &xin,
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

} // namespace

Tensor mamba2_mixer(Context &ctx, const Tensor &x, const Tensor &inProj,
                    const Tensor &convWeight, const Tensor &convBias,
                    const Tensor &dtBias, const Tensor &aLog, const Tensor &d,
                    const Tensor &normWeight, const Tensor &outProj,
                    const Tensor &keyMask, int64_t heads, int64_t headDim,
                    int64_t groups, int64_t state, int64_t kernel,
                    double normEps, double dtMin, bool foldedA) {
  Mamba2Dims m("mamba2_mixer", x, inProj, convWeight, convBias, dtBias, aLog, d,
               normWeight, outProj, keyMask, Tensor(), heads, headDim, groups,
               state, kernel);
  int64_t batch = m.batch, seq = m.seq, inner = m.inner, conv = m.conv,
          proj = m.proj;

  // 1, 2. Masked input, projection, convolution, SiLU, mask.
  Tensor xin, xbc = Tensor::uninitialized(DType::F32, {batch, seq, conv});
  Tensor zxbcdt = projectAndConvolve(ctx, x, inProj, convWeight, convBias, m,
                                     kernel, xin, xbc.f32(), nullptr);
  const float *p = zxbcdt.f32();
  float *xb = xbc.f32();

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

Tensors mamba2_mixer_grad(Context &ctx, const Tensor &x, const Tensor &inProj,
                          const Tensor &convWeight, const Tensor &convBias,
                          const Tensor &dtBias, const Tensor &aLog,
                          const Tensor &d, const Tensor &normWeight,
                          const Tensor &outProj, const Tensor &keyMask,
                          const Tensor &dout, int64_t heads, int64_t headDim,
                          int64_t groups, int64_t state, int64_t kernel,
                          double normEps, double dtMin, bool foldedA) {
  Mamba2Dims m("mamba2_mixer_grad", x, inProj, convWeight, convBias, dtBias,
               aLog, d, normWeight, outProj, keyMask, dout, heads, headDim,
               groups, state, kernel);
  int64_t batch = m.batch, seq = m.seq, hidden = m.hidden, inner = m.inner,
          conv = m.conv, proj = m.proj;
  const int64_t *mask = m.mask;
  auto kept = [&](int64_t bt) { return m.kept(bt); };
  int64_t tokens = batch * seq, perGroup = heads / groups, gn = groups * state,
          groupSize = inner / groups;

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
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      int64_t g = h / perGroup;
      float a = foldedA ? al[h] : -std::exp(al[h]);
      std::vector<float> s(headDim * state, 0.0f);
      for (int64_t t = 0; t < seq; ++t) {
        int64_t bt = b * seq + t;
        const float *row = xb.data() + bt * conv;
        const float *xh = row + h * headDim, *bg = row + inner + g * state,
                    *cg = row + inner + gn + g * state;
        float raw = p[bt * proj + inner + conv + h] + dtb[h];
        float dt = raw > 20.0f ? raw : std::log1p(std::exp(raw));
        dtLive[bt * heads + h] = dt >= static_cast<float>(dtMin);
        dt = std::max(dt, static_cast<float>(dtMin));
        dts[bt * heads + h] = dt;
        float decay = std::exp(dt * a);
        for (int64_t i = 0; i < headDim; ++i) {
          float *si = s.data() + i * state, acc = 0.0f;
          for (int64_t n = 0; n < state; ++n) {
            si[n] = decay * si[n] + dt * xh[i] * bg[n];
            acc += si[n] * cg[n];
          }
          ys[bt * inner + h * headDim + i] = acc + dd[h] * xh[i];
          std::copy_n(si, state,
                      states.data() + (bt * inner + h * headDim + i) * state);
        }
      }
    }
  // The gated norm's input z = y * silu(gate), its inverse RMS, its output.
  std::vector<float> z(tokens * inner), inv(tokens * groups);
  Tensor normed = Tensor::uninitialized(DType::F32, {batch, seq, inner});
  const float *nw = normWeight.f32();
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t g = 0; g < groups; ++g) {
      double sum = 0;
      for (int64_t i = g * groupSize; i < (g + 1) * groupSize; ++i) {
        float gate = p[t * proj + i];
        z[t * inner + i] = ys[t * inner + i] * gate / (1.0f + std::exp(-gate));
        sum += double(z[t * inner + i]) * z[t * inner + i];
      }
      float r = 1.0f /
                std::sqrt(float(sum / groupSize) + static_cast<float>(normEps));
      inv[t * groups + g] = r;
      for (int64_t i = g * groupSize; i < (g + 1) * groupSize; ++i)
        normed.f32()[t * inner + i] = nw[i] * z[t * inner + i] * r;
    }

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
