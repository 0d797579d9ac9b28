//===- Xsmm.h - f32 linears on weights packed once, libxsmm kernels -*- C++
//-*-//
//
// Below AVX-512 no other library here multiplies by a weight packed once:
// OpenBLAS repacks each weight on every call (13% of the AVX2 forward's
// time), oneDNN 2.6's f32 matmul there is gemm:jit, which packs nothing,
// and MKL's packed sgemm ran no faster than OpenBLAS on an AMD CPU
// (docs/runtime.md). libxsmm generates register-blocked microkernels for
// the machine it runs on; the runtime packs each constant weight once into
// column panels those kernels stream, and blocks the product over panels,
// rows and depth itself. TPRT_GEMM=xsmm (Gemm.cpp) chooses it.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_XSMM_H
#define TPRT_CPU_XSMM_H

#include <cstdint>

namespace tprt {
class Tensor;

namespace cpu {

/// Whether libxsmm generates f32 kernels on this machine (x86 with AVX2
/// or later).
bool xsmmAvailable();

/// libxsmm's version ("1.17").
const char *xsmmVersion();

/// out[rows, outF] = x[rows, in] w^T + beta out for a constant f32 weight
/// w [outF, in] (packed on first use and kept while its allocation lives),
/// with the context's threads. False, with nothing written, where libxsmm
/// generates no kernel for the shape.
bool xsmmLinear(const Tensor &w, const float *x, float *out, int64_t rows,
                float beta);

} // namespace cpu
} // namespace tprt

#endif // TPRT_CPU_XSMM_H
