//===- RopeFitTest.cpp - Llama 3 RoPE parameters from frequencies ---------===//
//
// fitLlama3Scaling (lib/Probe/RopeFit.cpp) against transformers:
// test/models/rope_llama3_sweep.json holds the inverse frequencies
// transformers' _compute_llama3_parameters gives for a sweep of
// configurations (test/models/make_rope_sweep.py). Each must be fitted,
// with and without the configuration's theta, by parameters whose
// frequencies (the runtime's, tprt/Rope.h) are transformers'.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Probe/RopeFit.h"
#include "tpopt/Plan/Plan.h"

#include "gtest/gtest.h"

using namespace mlir::tp;

namespace {

double worstRelativeDifference(const RopeFit &fit, int64_t rot,
                               llvm::ArrayRef<double> want) {
  llvm::SmallVector<float> got(rot / 2);
  tprt::ropeInverseFrequencies(got.data(), rot, fit.theta, fit.scaling);
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::fabs(got[i] - want[i]) / want[i]);
  return worst;
}

TEST(RopeFitTest, ReproducesTransformersSweep) {
  llvm::Expected<llvm::json::Object> file =
      readJSONObject(TPOPT_SOURCE_DIR "/test/models/rope_llama3_sweep.json");
  ASSERT_TRUE(bool(file)) << llvm::toString(file.takeError());
  const llvm::json::Array *configs = file->getArray("configurations");
  ASSERT_TRUE(configs);
  ASSERT_GE(configs->size(), 100u);
  unsigned exact = 0;
  for (const llvm::json::Value &entry : *configs) {
    const llvm::json::Object &c = *entry.getAsObject();
    double theta = *c.getNumber("theta"), factor = *c.getNumber("factor");
    double low = *c.getNumber("low_freq_factor"),
           high = *c.getNumber("high_freq_factor");
    int64_t original = *c.getInteger("original_max_position_embeddings");
    int64_t rot = *c.getInteger("head_dim");
    llvm::SmallVector<double> freq;
    for (const llvm::json::Value &f : *c.getArray("inv_freq"))
      freq.push_back(*f.getAsNumber());
    ASSERT_EQ(static_cast<int64_t>(freq.size()), rot / 2);
    std::string name = llvm::formatv("theta {0} factor {1} low {2} high {3} "
                                     "original {4} head_dim {5}",
                                     theta, factor, low, high, original, rot)
                           .str();
    // Frequencies that unscaled RoPE or linear scaling also give are raised
    // as those types (test/e2e/rope.test); every other one needs a fit.
    llvm::SmallVector<float> unscaled(rot / 2);
    tprt::ropeInverseFrequencies(unscaled.data(), rot, theta, {});
    bool allKept = true, allScaled = true;
    for (size_t i = 0; i < freq.size(); ++i) {
      allKept &= std::fabs(freq[i] - unscaled[i]) <= 1e-6 * freq[i];
      allScaled &= std::fabs(freq[i] - unscaled[i] / factor) <= 1e-6 * freq[i];
    }
    if (allKept || allScaled)
      continue;
    for (double given : {theta, 0.0}) {
      llvm::SmallVector<RopeFit> fits = fitLlama3Scaling(freq, rot, given);
      ASSERT_FALSE(fits.empty())
          << name << (given ? " with" : " without") << " theta: no fit";
      const RopeFit &fit = fits.front();
      EXPECT_EQ(fit.scaling.type, tprt::RopeType::Llama3) << name;
      EXPECT_LE(worstRelativeDifference(fit, rot, freq), 1e-5)
          << name << ": fitted theta " << fit.theta << " factor "
          << fit.scaling.factor << " low " << fit.scaling.lowFreqFactor
          << " high " << fit.scaling.highFreqFactor << " original "
          << fit.scaling.originalMaxPositions;
      // A round theta comes back exactly (the checks round fitted ones).
      EXPECT_DOUBLE_EQ(fit.theta, theta) << name;
      exact += fit.scaling.factor == factor &&
               fit.scaling.lowFreqFactor * fit.scaling.originalMaxPositions ==
                   low * original;
    }
  }
  // Most configurations come back as themselves, up to the one ratio the
  // frequencies fix (low / original and high / original).
  EXPECT_GT(exact, 0u);
}

TEST(RopeFitTest, NoFitForNonsense) {
  // Frequencies that rise are no RoPE at all.
  llvm::SmallVector<double> rising = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8};
  EXPECT_TRUE(fitLlama3Scaling(rising, 16).empty());
  // Nor are zeros.
  llvm::SmallVector<double> zeros(8, 0.0);
  EXPECT_TRUE(fitLlama3Scaling(zeros, 16).empty());
  // The wrong count of frequencies for the rotary dimension.
  llvm::SmallVector<float> unscaled(8);
  tprt::ropeInverseFrequencies(unscaled.data(), 16, 10000.0, {});
  llvm::SmallVector<double> freq(unscaled.begin(), unscaled.end());
  EXPECT_TRUE(fitLlama3Scaling(freq, 32).empty());
}

} // namespace
