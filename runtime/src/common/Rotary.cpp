//===- Rotary.cpp - the rotary embedding's tables -------------------------===//

#include "common/Rotary.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace tprt {

bool RotaryTables::serves(int64_t seq, int64_t scaleSeq, int64_t rotaryDim,
                          double theta, const RopeScaling &s,
                          bool transpose) const {
  const RopeScaling &t = scaling;
  return this->seq == seq && this->scaleSeq == scaleSeq &&
         this->rotaryDim == rotaryDim && this->theta == theta &&
         this->transpose == transpose && t.type == s.type &&
         t.factor == s.factor && t.lowFreqFactor == s.lowFreqFactor &&
         t.highFreqFactor == s.highFreqFactor &&
         t.originalMaxPositions == s.originalMaxPositions &&
         t.betaFast == s.betaFast && t.betaSlow == s.betaSlow &&
         t.truncate == s.truncate && t.attentionFactor == s.attentionFactor &&
         t.shortFactor == s.shortFactor && t.longFactor == s.longFactor;
}

/// The tables of the last rotary call on this thread, recomputed when a
/// call asks for others: a forward pass's queries and keys in every layer
/// share one set (a training step's backward, the transposed one).
static const RotaryTables &rotaryTables(int64_t seq, int64_t scaleSeq,
                                        int64_t rotaryDim, double theta,
                                        const RopeScaling &s, bool transpose) {
  thread_local RotaryTables last;
  if (last.serves(seq, scaleSeq, rotaryDim, theta, s, transpose))
    return last;
  int64_t half = rotaryDim / 2;
  // As HF computes it: f32 inverse frequencies, f32 angle = position * freq;
  // cos and sin (in f32) times the attention factor.
  const float amplitude = static_cast<float>(s.attentionFactor);
  std::vector<float> freq(half);
  ropeInverseFrequencies(freq.data(), rotaryDim, theta, s, scaleSeq);
  last = RotaryTables{seq, scaleSeq, rotaryDim, theta, s, transpose, {}, {}};
  last.cosT.resize(seq * half);
  last.sinT.resize(seq * half);
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < half; ++i) {
      float angle = static_cast<float>(p) * freq[i];
      last.cosT[p * half + i] = std::cos(angle) * amplitude;
      // The transpose rotates by the opposite angle (the backward).
      last.sinT[p * half + i] =
          std::sin(angle) * amplitude * (transpose ? -1 : 1);
    }
  return last;
}

RotaryPlan planRotary(Context &ctx, const Tensor &x, int64_t headDim,
                      int64_t rotaryDim, double theta, int64_t ropeType,
                      double factor, double lowFreqFactor,
                      double highFreqFactor, int64_t originalMaxPositions,
                      double betaFast, double betaSlow, bool truncate,
                      double attentionFactor, bool transpose,
                      const std::vector<double> &shortFactor,
                      const std::vector<double> &longFactor) {
  if (x.rank() != 3 || headDim <= 0 || x.dim(2) % headDim != 0)
    fatal("rotary: input " + x.describe() + " is not [B, S, H * " +
          std::to_string(headDim) + "]");
  if (rotaryDim <= 0)
    rotaryDim = headDim;
  int64_t seq = x.dim(1), half = rotaryDim / 2;
  if (ropeType < 0 || ropeType > static_cast<int64_t>(RopeType::Longrope))
    fatal("rotary: unknown rope type " + std::to_string(ropeType));
  if (ropeType == static_cast<int64_t>(RopeType::Longrope) &&
      (static_cast<int64_t>(shortFactor.size()) != half ||
       static_cast<int64_t>(longFactor.size()) != half))
    fatal("rotary: LongRoPE takes " + std::to_string(half) +
          " short and long factors, got " + std::to_string(shortFactor.size()) +
          " and " + std::to_string(longFactor.size()));
  RopeScaling scaling{static_cast<RopeType>(ropeType),
                      factor,
                      lowFreqFactor,
                      highFreqFactor,
                      originalMaxPositions,
                      betaFast,
                      betaSlow,
                      truncate,
                      attentionFactor,
                      shortFactor,
                      longFactor};
  // A sequence padded for sequence parallelism scales for its real length.
  int64_t scaleSeq =
      ctx.unpaddedSequence() > 0 ? std::min(seq, ctx.unpaddedSequence()) : seq;
  return {rotaryDim,
          &rotaryTables(seq, scaleSeq, rotaryDim, theta, scaling, transpose)};
}

} // namespace tprt
