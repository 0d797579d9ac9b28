//===- Vector.h - loops compiled for the machine's vector unit --*- C++ -*-===//
//
// The runtime is compiled for baseline x86-64 (SSE2), so that one build
// runs everywhere. The few hot loops that no library primitive covers are
// compiled here once per vector ISA (GCC/Clang target_clones: AVX-512,
// AVX2, baseline), and the loader picks the clone the CPU supports.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_VECTOR_H
#define TPRT_CPU_VECTOR_H

#include <cstdint>

namespace tprt::cpu {

/// sum x[i]^2 over i < n, accumulated in double (lanes summed in another
/// order than a scalar loop: the last bits may differ).
double sumOfSquares(const float *x, int64_t n);

/// out[i] = (x[i] * inv) * (offset + weight[i]): RMS norm's scaling, in
/// HF's order of operations.
void scaleRow(const float *x, float inv, const float *weight, float offset,
              float *out, int64_t n);

} // namespace tprt::cpu

#endif // TPRT_CPU_VECTOR_H
