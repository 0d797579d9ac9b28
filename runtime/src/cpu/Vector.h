//===- Vector.h - loops compiled for the machine's vector unit --*- C++ -*-===//
//
// The runtime is compiled for baseline x86-64 (SSE2), so that one build
// runs everywhere. The few hot loops that no library primitive covers are
// compiled here once per vector ISA (GCC/Clang target_clones: AVX-512,
// AVX2, baseline), and the loader picks the clone the CPU supports. The
// file is compiled without errno from math functions (so that sqrt
// vectorizes) and without FMA contraction (so that every clone rounds as
// the scalar code does). Each function runs on the calling thread only.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_VECTOR_H
#define TPRT_CPU_VECTOR_H

#include <algorithm>
#include <cstdint>

namespace tprt::cpu {

/// sum x[i]^2 over i < n, accumulated in double (lanes summed in another
/// order than a scalar loop: the last bits may differ).
double sumOfSquares(const float *x, int64_t n);

/// out[i] = (x[i] * inv) * (offset + weight[i]): RMS norm's scaling, in
/// HF's order of operations.
void scaleRow(const float *x, float inv, const float *weight, float offset,
              float *out, int64_t n);

/// fn(begin, count) over [0, n) in blocks of `block` elements, the blocks
/// shared among the OpenMP threads: how callers spread these loops.
template <typename Fn>
void parallelBlocks(int64_t n, int64_t block, const Fn &fn) {
#pragma omp parallel for schedule(static) if (n > block)
  for (int64_t begin = 0; begin < n; begin += block)
    fn(begin, std::min(block, n - begin));
}

/// out[i] = x[i] for bf16 x (exact), and the reverse, rounded to nearest
/// even with NaNs kept quiet (Bf16.h's conversions).
void widenBf16(const uint16_t *x, float *out, int64_t n);
void narrowToBf16(const float *x, uint16_t *out, int64_t n);

/// acc[i] += x[i] for bf16 x: a gradient summed into its FP32 buffer.
void addWidenedBf16(const uint16_t *x, float *acc, int64_t n);

/// out[i] = a[i] + b[i] and a[i] * b[i] over bf16 elements, in f32 with one
/// rounding: what the generic elementwise loop computes, vectorized.
void addBf16(const uint16_t *a, const uint16_t *b, uint16_t *out, int64_t n);
void mulBf16(const uint16_t *a, const uint16_t *b, uint16_t *out, int64_t n);

/// out[i] = a[i] * b[i] in f32.
void mulTo(const float *a, const float *b, float *out, int64_t n);

/// The largest |x[i]|, NaN when some x[i] is.
double maxMagnitude(const float *x, int64_t n);

/// The sum of x[i] in double; the largest x[i] (-inf when n is 0).
double sumOf(const float *x, int64_t n);
float maxOf(const float *x, int64_t n);

/// The sum of a[i] * b[i] in double.
double dotOf(const float *a, const float *b, int64_t n);

/// dp[i] = p[i] * (dp[i] - delta): a softmax row's backward, from its
/// probabilities p, the gradient dp of the probabilities and delta (the
/// row's sum of p * dp).
void softmaxGradRow(const float *p, float delta, float *dp, int64_t n);

/// x[i] -= c and x[i] *= c, in place; out[i] = x[i] * c.
void subtractInPlace(float *x, float c, int64_t n);
void scaleInPlace(float *x, float c, int64_t n);
void scaleTo(const float *x, float c, float *out, int64_t n);

/// out[r, i] = exp(x[r, i] - shifts[r]) over a block of rows x n (in place
/// when out == x): a softmax's numerators.
void expShiftedRows(const float *x, const float *shifts, int64_t rows,
                    int64_t n, float *out);

/// sums[r] = sum over i of exp(x[r, i] - shifts[r]), in double, `scratch`
/// (rows x n floats) holding the exponentials: a softmax's denominators.
void sumsOfExpRows(const float *x, const float *shifts, int64_t rows, int64_t n,
                   float *scratch, double *sums);

/// out[i] = dy[i] * s * (1 + x[i] (1 - s)) where s = sigmoid(x[i]) is what
/// out[i] holds on entry: SiLU's derivative applied to dy.
void siluGradFromSigmoid(const float *x, const float *dy, float *out,
                         int64_t n);

/// RMS norm's backward over one row of n features: dx from x, dy and the
/// weight (scaled by offset + weight), the row's share of the weight's
/// gradient (dy * x / rms) added to dwSums. The row's sums are in double.
void rmsNormRowGrad(const float *x, const float *dy, const float *weight,
                    float offset, float eps, int64_t n, float *dx,
                    double *dwSums);

/// The gradients of silu(g) * u from s = sigmoid(g): du = dy * (g * s),
/// dg = (dy * u) * s * (1 + g * (1 - s)) (siluGradFromSigmoid's formula on
/// dy * u).
void siluMulGradFromSigmoid(const float *g, const float *u, const float *dy,
                            const float *s, float *dg, float *du, int64_t n);

/// One AdamW step over n elements in torch.optim.AdamW's order of
/// operations (decoupled decay, lerp of the first moment, the second
/// moment, then p -= step_size * m / (sqrt(v) / root2 + eps)) on the
/// gradient g * gradScale (rounded to f32 first, as a scaled buffer would
/// hold it); the results are those of the scalar loop, bit for bit (no
/// contraction to FMA).
void adamwStep(float *p, const float *g, float gradScale, float *m, float *v,
               int64_t n, float decay, float beta1, float beta2, float stepSize,
               float root2, float eps);

} // namespace tprt::cpu

#endif // TPRT_CPU_VECTOR_H
