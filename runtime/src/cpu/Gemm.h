//===- Gemm.h - the CPU matrix products -------------------------*- C++ -*-===//
//
// Every CPU kernel's matrix product goes through here, so that the GEMM
// library is chosen in one place: oneDNN's matmul primitive (its brgemm
// kernels ran these shapes at about twice OpenBLAS 0.3.21's speed on the
// build machines, docs/runtime.md) when the runtime was built with it,
// OpenBLAS otherwise; where both are, MKL and libxsmm (Xsmm.h) are choices
// for the f32 products too (TPRT_GEMM, Gemm.cpp). All matrices are
// row-major.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_GEMM_H
#define TPRT_CPU_GEMM_H

#include <cstdint>

namespace tprt {
class Tensor;

namespace cpu {

/// C = alpha op(A) op(B) + beta C, cblas_sgemm's contract (row-major, op
/// transposes when asked). Runs on the calling thread alone, so it may be
/// called from inside an OpenMP parallel region (the attention kernels call
/// it once per head).
void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
           float alpha, const float *a, int64_t lda, const float *b,
           int64_t ldb, float beta, float *c, int64_t ldc);

/// out[batch][rows, out] = x[batch][rows, in] w[out, in]^T with all the
/// context's threads: the linear form (batch 1, every leading dimension
/// flattened into rows) and the bmm form (one product per batch row, the
/// weight shared). With `packed` the weight is reordered once into the
/// library's preferred layout and kept while `w` lives: only for weights
/// that do not change (see Context::setConstantWeights).
///
/// With `bf16Operands` (`--autocast bf16`) both operands are rounded to
/// bf16 (nearest even) and multiplied with f32 accumulation into the f32
/// result, as PyTorch's autocast runs linears: oneDNN's bf16 matmul (the
/// machine's bf16 instructions where it has them), or with OpenBLAS the
/// rounded values in f32, whose products are exact.
void linear(const Tensor &w, const float *x, float *out, int64_t batch,
            int64_t rows, bool packed, bool bf16Operands = false);

/// `linear` (f32) adding its product into `out` (beta 1) instead of
/// overwriting it, where the f32 products' library does so in its GEMM
/// (MKL, OpenBLAS); false with oneDNN, whose linear forms add by their
/// epilogue instead.
bool linearAccumulate(const Tensor &w, const float *x, float *out,
                      int64_t batch, int64_t rows, bool packed);

/// The linear forms of a bf16 program (tpc --dtype bf16): x and w bf16, the
/// products accumulated in f32 and rounded once into the bf16 `out`
/// (oneDNN's bf16 matmul; `packed` as above). False when the library has no
/// bf16 product (OpenBLAS, or a oneDNN without it on this machine): the
/// caller then computes on f32 copies.
bool linearBf16(const Tensor &w, const uint16_t *x, uint16_t *out,
                int64_t batch, int64_t rows, bool packed);

/// What a linear applies to each element of its product before storing it.
enum class Epilogue {
  Add,     // product + other
  SiluMul, // silu(product) * other
};

/// The linear forms of `linear` / `linearBf16` (x and out f32, or with
/// `bf16` both bf16 and w bf16) with an epilogue reading `other`, of out's
/// shape and type, applied to the accumulator before the one rounding into
/// `out`: oneDNN's post-ops (eltwise swish, binary add / mul), the same
/// vector code as the separate ops. False where the library has no such
/// product (OpenBLAS, or oneDNN only through its reference code): the
/// caller then runs the separate ops.
bool linearEpilogue(const Tensor &w, const void *x, const void *other,
                    void *out, int64_t batch, int64_t rows, bool packed,
                    bool bf16, Epilogue epilogue);

/// The backward's two products of a bf16 program, bf16 operands and results
/// with f32 accumulation (false where there is no bf16 product, as above).
bool linearGradInputBf16(const uint16_t *dy, const uint16_t *w, uint16_t *dx,
                         int64_t rows, int64_t in, int64_t out);
bool linearGradWeightBf16(const uint16_t *dy, const uint16_t *x, uint16_t *dw,
                          int64_t rows, int64_t in, int64_t out);

/// The backward's two products, with all threads: dx[rows, in] = dy[rows,
/// out] w[out, in] and dw[out, in] = dy[rows, out]^T x[rows, in] (with
/// `accumulate`, dw += that: a weight's gradient over blocks of rows).
void linearGradInput(const float *dy, const float *w, float *dx, int64_t rows,
                     int64_t in, int64_t out, bool bf16Operands = false);
void linearGradWeight(const float *dy, const float *x, float *dw, int64_t rows,
                      int64_t in, int64_t out, bool bf16Operands = false,
                      bool accumulate = false);

/// bf16's bits of each of `n` floats, rounded to nearest even.
void roundToBf16(const float *x, uint16_t *out, int64_t n);

/// The threads of the products at top level (OpenBLAS keeps its own
/// count; oneDNN follows OpenMP's).
void setThreads(int threads);

/// Whether f32 products with an epilogue apply it in the GEMM
/// (linearEpilogue succeeds: oneDNN's post-ops), as opposed to separate
/// passes after it (MKL, OpenBLAS).
bool f32EpiloguesFused();

/// The library that does the products ("oneDNN 2.6.3" or "OpenBLAS").
const char *gemmLibrary();

} // namespace cpu
} // namespace tprt

#endif // TPRT_CPU_GEMM_H
