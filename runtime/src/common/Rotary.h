//===- Rotary.h - the rotary embedding's tables, for both backends -*- C++
//-*-===//
//
// What tprt::rotary computes before it rotates, whichever backend rotates:
// the operand checks and the cos / sin tables of transformers' RoPE type
// for the sequence (on the host; the CUDA kernel copies them over).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_COMMON_ROTARY_H
#define TPRT_COMMON_ROTARY_H

#include "tprt/Rope.h"
#include "tprt/tprt.h"

#include <vector>

namespace tprt {

/// The cos and sin of every position and frequency of one rotary call.
struct RotaryTables {
  /// `scaleSeq`: the length the length-dependent types (dynamic,
  /// longrope) scale for: `seq` but for a padded sequence.
  int64_t seq = -1, scaleSeq = -1, rotaryDim = 0;
  double theta = 0;
  RopeScaling scaling;
  bool transpose = false;
  /// [seq, rotaryDim / 2] each.
  std::vector<float> cosT, sinT;

  bool serves(int64_t seq, int64_t scaleSeq, int64_t rotaryDim, double theta,
              const RopeScaling &s, bool transpose) const;
};

/// A checked rotary call: the rotated features per head (`rotaryDim` 0
/// resolved to the head) and the tables, valid until this thread's next
/// call with other parameters.
struct RotaryPlan {
  int64_t rotaryDim;
  const RotaryTables *tables;
};

/// tprt::rotary's parameters checked against `x` [B, S, H * headDim] and
/// its tables made (or reused from this thread's last call).
RotaryPlan planRotary(Context &ctx, const Tensor &x, int64_t headDim,
                      int64_t rotaryDim, double theta, int64_t ropeType,
                      double factor, double lowFreqFactor,
                      double highFreqFactor, int64_t originalMaxPositions,
                      double betaFast, double betaSlow, bool truncate,
                      double attentionFactor, bool transpose,
                      const std::vector<double> &shortFactor,
                      const std::vector<double> &longFactor);

} // namespace tprt

#endif // TPRT_COMMON_ROTARY_H
