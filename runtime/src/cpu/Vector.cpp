//===- Vector.cpp - loops compiled for the machine's vector unit ----------===//

#include "Vector.h"
#include "Activation.h"
#include "Bf16.h"

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TPRT_VECTOR_CLONES                                                     \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define TPRT_VECTOR_CLONES
#endif

namespace tprt::cpu {

TPRT_VECTOR_CLONES double sumOfSquares(const float *x, int64_t n) {
  double sum = 0;
  // omp simd: lanes may reassociate the sum (without it the compiler keeps
  // the scalar order and cannot vectorize a floating-point reduction).
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i)
    sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

TPRT_VECTOR_CLONES void scaleRow(const float *x, float inv, const float *weight,
                                 float offset, float *out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = (x[i] * inv) * (offset + weight[i]);
}

TPRT_VECTOR_CLONES void widenBf16(const uint16_t *x, float *out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16Load(x[i]);
}

TPRT_VECTOR_CLONES void narrowToBf16(const float *x, uint16_t *out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16Store(x[i]);
}

TPRT_VECTOR_CLONES void addWidenedBf16(const uint16_t *x, float *acc,
                                       int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    acc[i] += bf16Load(x[i]);
}

TPRT_VECTOR_CLONES void addBf16(const uint16_t *a, const uint16_t *b,
                                uint16_t *out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16Store(bf16Load(a[i]) + bf16Load(b[i]));
}

TPRT_VECTOR_CLONES void mulBf16(const uint16_t *a, const uint16_t *b,
                                uint16_t *out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = bf16Store(bf16Load(a[i]) * bf16Load(b[i]));
}

TPRT_VECTOR_CLONES void mulTo(const float *a, const float *b, float *out,
                              int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = a[i] * b[i];
}

TPRT_VECTOR_CLONES double maxMagnitude(const float *x, int64_t n) {
  float largest = 0;
  int nan = 0; // a max reduction would drop NaNs
#pragma omp simd reduction(max : largest) reduction(| : nan)
  for (int64_t i = 0; i < n; ++i) {
    largest = std::max(largest, std::fabs(x[i]));
    nan |= x[i] != x[i];
  }
  return nan ? std::numeric_limits<double>::quiet_NaN() : largest;
}

namespace {
TPRT_VECTOR_CLONES void shifted(const float *x, float shift, float *out,
                                int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] - shift;
}
} // namespace

TPRT_VECTOR_CLONES double sumOf(const float *x, int64_t n) {
  double total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t i = 0; i < n; ++i)
    total += x[i];
  return total;
}

TPRT_VECTOR_CLONES double dotOf(const float *a, const float *b, int64_t n) {
  double total = 0;
#pragma omp simd reduction(+ : total)
  for (int64_t i = 0; i < n; ++i)
    total += static_cast<double>(a[i]) * b[i];
  return total;
}

TPRT_VECTOR_CLONES void softmaxGradRow(const float *p, float delta, float *dp,
                                       int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    dp[i] = p[i] * (dp[i] - delta);
}

TPRT_VECTOR_CLONES float maxOf(const float *x, int64_t n) {
  float best = -std::numeric_limits<float>::infinity();
  // A select, not std::max: GCC keeps std::max's reference as a branch and
  // leaves the loop scalar.
#pragma omp simd reduction(max : best)
  for (int64_t i = 0; i < n; ++i)
    best = x[i] > best ? x[i] : best;
  return best;
}

TPRT_VECTOR_CLONES void subtractInPlace(float *x, float c, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    x[i] -= c;
}

TPRT_VECTOR_CLONES void scaleInPlace(float *x, float c, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    x[i] *= c;
}

TPRT_VECTOR_CLONES void scaleTo(const float *x, float c, float *out,
                                int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] * c;
}

void expShiftedRows(const float *x, const float *shifts, int64_t rows,
                    int64_t n, float *out) {
  for (int64_t r = 0; r < rows; ++r)
    shifted(x + r * n, shifts[r], out + r * n, n);
  // One primitive call for the block: oneDNN's call costs about what one
  // row of a small vocabulary block does.
  activation(Activation::Exp, out, out, rows * n);
}

void sumsOfExpRows(const float *x, const float *shifts, int64_t rows, int64_t n,
                   float *scratch, double *sums) {
  expShiftedRows(x, shifts, rows, n, scratch);
  for (int64_t r = 0; r < rows; ++r)
    sums[r] = sumOf(scratch + r * n, n);
}

TPRT_VECTOR_CLONES void siluGradFromSigmoid(const float *x, const float *dy,
                                            float *out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float s = out[i];
    out[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
  }
}

TPRT_VECTOR_CLONES void siluMulGradFromSigmoid(const float *g, const float *u,
                                               const float *dy, const float *s,
                                               float *dg, float *du,
                                               int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float si = s[i], ds = dy[i] * u[i];
    du[i] = dy[i] * (g[i] * si);
    dg[i] = ds * si * (1.0f + g[i] * (1.0f - si));
  }
}

TPRT_VECTOR_CLONES void rmsNormRowGrad(const float *x, const float *dy,
                                       const float *weight, float offset,
                                       float eps, int64_t n, float *dx,
                                       double *dwSums) {
  // As the forward computes it.
  float inv =
      1.0f / std::sqrt(static_cast<float>(sumOfSquares(x, n) / n) + eps);
  double dot = 0; // the mean over the row of dy * xhat, scaled
#pragma omp simd reduction(+ : dot)
  for (int64_t i = 0; i < n; ++i)
    dot += static_cast<double>(dy[i]) * (offset + weight[i]) * x[i] * inv;
  float mean = static_cast<float>(dot / n);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    dx[i] = inv * (dy[i] * (offset + weight[i]) - x[i] * inv * mean);
    dwSums[i] += static_cast<double>(dy[i]) * x[i] * inv;
  }
}

TPRT_VECTOR_CLONES void adamwStep(float *p, const float *g, float gradScale,
                                  float *m, float *v, int64_t n, float decay,
                                  float beta1, float beta2, float stepSize,
                                  float root2, float eps) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    float gi = g[i] * gradScale;
    p[i] *= decay;
    m[i] += (1.0f - beta1) * (gi - m[i]); // lerp
    v[i] = v[i] * beta2 + (1.0f - beta2) * gi * gi;
    float denom = std::sqrt(v[i]) / root2 + eps;
    p[i] -= stepSize * (m[i] / denom);
  }
}

} // namespace tprt::cpu
