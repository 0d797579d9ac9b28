//===- RopeFit.h - RoPE scaling parameters from frequencies -----*- C++ -*-===//
//
// Raising reads a rotary embedding's inverse frequencies off the cos/sin
// tables an export holds. Llama 3's scaling keeps the high frequencies,
// divides the low ones by `factor` and blends between two thresholds; the
// tables show the frequencies, not the parameters, and which frequencies
// fall in which band depends on all of them (a small
// original_max_position_embeddings scales even the highest frequency).
// These functions propose the parameters that reproduce given frequencies;
// the caller checks each proposal against every table entry.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PROBE_ROPEFIT_H
#define TPOPT_PROBE_ROPEFIT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include "tprt/Rope.h"

#include <cstdint>

namespace mlir::tp {

struct RopeFit {
  double theta;
  tprt::RopeScaling scaling;
};

/// Llama 3 scalings (rope_type llama3, with their theta) whose inverse
/// frequencies (tprt::ropeInverseFrequencies) equal `freq`, the `rot / 2`
/// frequencies read from the tables, within `relTolerance`; the most
/// plausible first (Llama 3.x's own parameters, then round values). Llama
/// 3's frequencies depend on the low and high thresholds
/// `2 pi low_freq_factor / original_max_position_embeddings` and `2 pi
/// high_freq_factor / original_max_position_embeddings` only, so a
/// proposal picks a round original length and the factors that give those
/// thresholds; where the frequencies leave a threshold between two of them,
/// round values inside that gap. `theta` (> 0: the config's) is tried
/// first.
llvm::SmallVector<RopeFit> fitLlama3Scaling(llvm::ArrayRef<double> freq,
                                            int64_t rot, double theta = 0,
                                            double relTolerance = 1e-5);

} // namespace mlir::tp

#endif // TPOPT_PROBE_ROPEFIT_H
