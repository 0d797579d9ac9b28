//===- Rope.h - RoPE inverse frequencies ----------------------*- C++ -*-===//
//
// Header-only and dependency-free: raising (passes/Raise/Rotary.cpp) checks
// an export's cos/sin tables against these frequencies, and the runtime's
// rotary kernel rotates with the same ones, so what was checked is what
// runs. The arithmetic follows transformers' ROPE_INIT_FUNCTIONS
// (modeling_rope_utils.py) in float32, in the same order.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_ROPE_H
#define TPRT_ROPE_H

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace tprt {

/// transformers' rope_type values tp-opt implements.
enum class RopeType : int64_t {
  Default = 0,
  /// inv_freq / factor (position interpolation).
  Linear = 1,
  /// Llama 3.1's: low frequencies / factor, high ones kept, a smooth blend
  /// between (low_freq_factor, high_freq_factor,
  /// original_max_position_embeddings).
  Llama3 = 2,
  /// YaRN: frequencies blended between kept and / factor over a ramp of
  /// dimensions set by beta_fast, beta_slow and
  /// original_max_position_embeddings; cos and sin scaled by
  /// attention_factor.
  Yarn = 3,
  /// Dynamic NTK: unscaled up to max_position_embeddings (held in
  /// originalMaxPositions) positions; for a longer sequence of length L the
  /// base becomes theta * (factor * L / max - (factor - 1)) ^ (d / (d - 2)).
  /// The frequencies depend on the sequence length.
  Dynamic = 4,
  /// LongRoPE: frequency i divided by shortFactor[i] up to
  /// original_max_position_embeddings positions, by longFactor[i] beyond;
  /// cos and sin scaled by attention_factor.
  Longrope = 5,
};

struct RopeScaling {
  RopeType type = RopeType::Default;
  double factor = 1.0;
  double lowFreqFactor = 1.0;
  double highFreqFactor = 4.0;
  int64_t originalMaxPositions = 8192;
  double betaFast = 32.0;
  double betaSlow = 1.0;
  bool truncate = true;
  /// Multiplies cos and sin (YaRN's mscale, LongRoPE's); 1 for the other
  /// types.
  double attentionFactor = 1.0;
  /// LongRoPE's per-pair factors.
  std::vector<double> shortFactor, longFactor;
};

/// The `rotaryDim / 2` inverse frequencies of RoPE with base `theta` for a
/// sequence of `seqLen` positions (only Dynamic depends on it; 0: short).
inline void ropeInverseFrequencies(float *out, int64_t rotaryDim, double theta,
                                   const RopeScaling &s, int64_t seqLen = 0) {
  int64_t half = rotaryDim / 2;
  if (s.type == RopeType::Dynamic && seqLen > s.originalMaxPositions) {
    // transformers computes the new base on tensors: in float32.
    float length = static_cast<float>(seqLen);
    float grown = static_cast<float>(s.factor) * length /
                      static_cast<float>(s.originalMaxPositions) -
                  static_cast<float>(s.factor - 1);
    float exponent =
        static_cast<float>(static_cast<double>(rotaryDim) / (rotaryDim - 2));
    theta = static_cast<float>(theta) * std::pow(grown, exponent);
  }
  for (int64_t i = 0; i < half; ++i)
    out[i] = 1.0f / static_cast<float>(std::pow(
                        theta, static_cast<double>(2 * i) / rotaryDim));
  if (s.type == RopeType::Longrope) {
    // 1 / (ext * base ^ (2i / d)), in float32 as transformers computes it.
    const std::vector<double> &ext =
        seqLen > s.originalMaxPositions ? s.longFactor : s.shortFactor;
    for (int64_t i = 0; i < half && i < static_cast<int64_t>(ext.size()); ++i)
      out[i] = 1.0f / (static_cast<float>(ext[i]) *
                       static_cast<float>(std::pow(
                           theta, static_cast<double>(2 * i) / rotaryDim)));
  } else if (s.type == RopeType::Linear) {
    for (int64_t i = 0; i < half; ++i)
      out[i] = out[i] / static_cast<float>(s.factor);
  } else if (s.type == RopeType::Yarn) {
    // The dimension at which a frequency makes `rotations` turns over the
    // original context, in double as Python computes it.
    auto correctionDim = [&](double rotations) {
      return (rotaryDim * std::log(static_cast<double>(s.originalMaxPositions) /
                                   (rotations * 2 * M_PI))) /
             (2 * std::log(theta));
    };
    double low = correctionDim(s.betaFast), high = correctionDim(s.betaSlow);
    if (s.truncate) {
      low = std::floor(low);
      high = std::ceil(high);
    }
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(rotaryDim - 1));
    if (low == high)
      high += 0.001;
    const float factor = static_cast<float>(s.factor);
    for (int64_t i = 0; i < half; ++i) {
      float posFreq = 1.0f / out[i];
      float extrapolation = 1.0f / posFreq;
      float interpolation = 1.0f / (factor * posFreq);
      float ramp = (static_cast<float>(i) - static_cast<float>(low)) /
                   static_cast<float>(high - low);
      ramp = std::min(std::max(ramp, 0.0f), 1.0f);
      float keep = 1.0f - ramp;
      out[i] = interpolation * (1.0f - keep) + extrapolation * keep;
    }
  } else if (s.type == RopeType::Llama3) {
    const float factor = static_cast<float>(s.factor);
    const float low = static_cast<float>(s.lowFreqFactor);
    const float high = static_cast<float>(s.highFreqFactor);
    const float context = static_cast<float>(s.originalMaxPositions);
    const float lowWavelen = static_cast<float>(
        static_cast<double>(s.originalMaxPositions) / s.lowFreqFactor);
    const float highWavelen = static_cast<float>(
        static_cast<double>(s.originalMaxPositions) / s.highFreqFactor);
    const float twoPi = static_cast<float>(2 * M_PI);
    for (int64_t i = 0; i < half; ++i) {
      float f = out[i], wavelen = twoPi / f;
      if (wavelen > lowWavelen) {
        out[i] = f / factor;
      } else if (!(wavelen < highWavelen)) {
        float smooth = (context / wavelen - low) / (high - low);
        out[i] = (1 - smooth) * f / factor + smooth * f;
      }
    }
  }
}

} // namespace tprt

#endif // TPRT_ROPE_H
