//===- Vector.cpp - loops compiled for the machine's vector unit ----------===//

#include "Vector.h"

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

} // namespace tprt::cpu
