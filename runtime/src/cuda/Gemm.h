//===- Gemm.h - the backend's one cuBLAS GEMM entry -------------*- C++ -*-===//
//
// Every product of the CUDA backend (the linear family in linear.cpp, the
// fused loss in loss.cu) is one call of gemm(): column-major, strided
// batches, FP32 accumulation, and the products' type rule (see linear.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_GEMM_H
#define TPRT_CUDA_GEMM_H

#include "Runtime.h"

namespace tprt {
namespace cuda {

/// One column-major GEMM operand: `elements` values (of the operands' type)
/// read as op(matrix) with leading dimension `ld`, `stride` apart between
/// batch entries.
struct GemmOperand {
  const void *data;
  int64_t elements;
  cublasOperation_t op;
  int64_t ld, stride;
};

/// C [m, n] (column-major, ldc m, `strideC` apart) = op(A) op(B) + beta C
/// for each of `batch` entries. `operands` is A's and B's type: BF16 (C
/// then of type `result`, BF16 or F32), or F32 (C F32), whose operands
/// bf16 autocast rounds to bf16 copies first. beta 0 never reads C.
void gemm(Context &ctx, const char *what, DType operands, DType result,
          int64_t m, int64_t n, int64_t k, const GemmOperand &a,
          const GemmOperand &b, void *c, int64_t strideC, int64_t batch,
          float beta = 0.0f);

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_GEMM_H
