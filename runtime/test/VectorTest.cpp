//===- VectorTest.cpp - the vector loops against scalar references -------===//
//
// cpu/Vector.h's loops run as AVX-512, AVX2 or baseline clones: each must
// give what the plain formula gives, at lengths that leave a vector tail.
//
//===----------------------------------------------------------------------===//

#include "cpu/Vector.h"
#include "TestTensors.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

using namespace tprt;
using tprt::test::randomTensor;

namespace {

TEST(Vector, AdamwStepIsTorchsFormulaBitForBit) {
  const int64_t n = 1037;
  Tensor p = randomTensor({n}, 1), g = randomTensor({n}, 2, -3.0f, 3.0f),
         m = randomTensor({n}, 3, -0.1f, 0.1f),
         v = randomTensor({n}, 4, 0, 0.1f);
  const float decay = 1.0f - 1e-3f * 0.01f, b1 = 0.9f, b2 = 0.999f,
              stepSize = 1e-3f / (1.0f - 0.9f * 0.9f),
              root2 = std::sqrt(1.0f - 0.999f * 0.999f), eps = 1e-8f;
  // The buffer's pending factor (1 / label tokens): the gradient the
  // update reads is the buffer's value times it, rounded to f32.
  const float gradScale = 1.0f / 37.0f;
  // torch.optim.AdamW's single-tensor step on the scaled gradient, one
  // rounding per operation.
  std::vector<float> wantP(n), wantM(n), wantV(n);
  for (int64_t i = 0; i < n; ++i) {
    volatile float gi = g.f32()[i] * gradScale;
    volatile float pi = p.f32()[i] * decay;
    volatile float mi = m.f32()[i] + (1.0f - b1) * (gi - m.f32()[i]);
    volatile float gg = (1.0f - b2) * gi;
    volatile float vi = v.f32()[i] * b2 + gg * gi;
    volatile float root = std::sqrt(static_cast<float>(vi));
    volatile float denom = root / root2 + eps;
    volatile float ratio = mi / denom;
    wantP[i] = pi - stepSize * ratio;
    wantM[i] = mi;
    wantV[i] = vi;
  }
  cpu::adamwStep(p.f32(), g.f32(), gradScale, m.f32(), v.f32(), n, decay, b1,
                 b2, stepSize, root2, eps);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(p.f32()[i], wantP[i]) << i;
    ASSERT_EQ(m.f32()[i], wantM[i]) << i;
    ASSERT_EQ(v.f32()[i], wantV[i]) << i;
  }
}

TEST(Vector, MaxMagnitudeKeepsNaN) {
  Tensor x = randomTensor({999}, 5);
  x.f32()[517] = -7.5f;
  EXPECT_EQ(cpu::maxMagnitude(x.f32(), 999), 7.5);
  EXPECT_EQ(cpu::maxMagnitude(x.f32(), 0), 0.0);
  x.f32()[998] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(cpu::maxMagnitude(x.f32(), 999)));
  x.f32()[998] = -std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(cpu::maxMagnitude(x.f32(), 999)));
}

TEST(Vector, MaxOfFindsTheLargestInBodyAndTail) {
  // 1037 = 64 vector lanes' worth and a tail: the largest value placed in
  // the first element, the vector body and the tail in turn.
  const int64_t n = 1037;
  for (int64_t at : {int64_t(0), int64_t(515), n - 1}) {
    Tensor x = randomTensor({n}, 7, -9.0f, -1.0f);
    x.f32()[at] = -0.5f;
    EXPECT_EQ(cpu::maxOf(x.f32(), n), -0.5f) << at;
  }
  Tensor y = randomTensor({n}, 8, -4.0f, 4.0f);
  float want = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    want = std::max(want, y.f32()[i]);
  EXPECT_EQ(cpu::maxOf(y.f32(), n), want);
  EXPECT_EQ(cpu::maxOf(y.f32(), 0), -std::numeric_limits<float>::infinity());
}

TEST(Vector, SumsOfExpRows) {
  const int64_t rows = 5, n = 301;
  Tensor x = randomTensor({rows, n}, 6, -20.0f, 20.0f);
  std::vector<float> shifts = {0.0f, 20.0f, -3.5f, 19.0f, 7.0f};
  std::vector<float> scratch(rows * n), exps(rows * n);
  std::vector<double> sums(rows);
  cpu::sumsOfExpRows(x.f32(), shifts.data(), rows, n, scratch.data(),
                     sums.data());
  cpu::expShiftedRows(x.f32(), shifts.data(), rows, n, exps.data());
  for (int64_t r = 0; r < rows; ++r) {
    double want = 0;
    for (int64_t i = 0; i < n; ++i) {
      double arg = double(x.f32()[r * n + i]) - shifts[r];
      double e = std::exp(arg);
      want += e;
      // The argument is rounded to f32 first: its error scales with |arg|.
      EXPECT_NEAR(exps[r * n + i], e, (1e-6 + 1.2e-7 * std::fabs(arg)) * e)
          << r << ", " << i;
    }
    EXPECT_NEAR(sums[r], want, 2e-6 * want) << r;
  }
}

} // namespace
