//===- CublasLt.h - cuBLASLt's GEMM with a fused bias epilogue --*- C++ -*-===//
//
// A bf16 linear with a bias runs as one cuBLASLt matmul whose epilogue adds
// the bias to the FP32 accumulator before the one rounding to bf16
// (CUBLASLT_EPILOGUE_BIAS), instead of a GEMM and a pass over its product.
// cuBLASLt is the library cuBLAS itself loads (libcublasLt), opened with
// dlopen as cuBLAS is (Cublas.h). Missing, or without an algorithm for a
// shape, it is not an error: the caller adds the bias itself.
//
// Defined only with TPRT_WITH_CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_CUBLASLT_H
#define TPRT_CUDA_CUBLASLT_H

#include <cstdint>

namespace tprt {
namespace cuda {

/// D = A^T B + bias on the rank's stream, column-major: A [k, m] (ld k),
/// B [k, n] (ld k), D [m, n] (ld m), bias [m] (one per row of D), all
/// bf16, FP32 accumulation, D rounded once. False, with nothing queued,
/// where cuBLASLt is not there or has no algorithm for the shape, and
/// while a CUDA graph is being captured before cuBLASLt's workspace exists.
bool gemmBiasBf16(int64_t m, int64_t n, int64_t k, const void *a, const void *b,
                  const void *bias, void *d);

/// Whether cuBLASLt opened with every function gemmBiasBf16 calls (opens
/// it; needs no GPU).
bool cublasLtAvailable();

/// How many GEMMs gemmBiasBf16 has run in this process (tests).
int64_t cublasLtBiasRuns();

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_CUBLASLT_H
