//===- Mkl.h - Intel MKL's sgemm, opened when the products choose it -*- C++
//-*-//
//
// On Intel CPUs MKL's packed sgemm (cblas_sgemm_pack / _compute) ran the
// forward's projections faster than oneDNN 2.6's brgemm (docs/runtime.md),
// so TPRT_GEMM=auto gives it the f32 products there. It is opened with
// dlopen, not linked: MKL is not a Debian package here (scripts/setup.sh
// installs PyPI's `mkl` into .venv), its cblas symbols would clash with
// OpenBLAS's, and a program runs without it where it is absent. The few
// functions used are declared here with the LP64 cblas ABI (no mkl.h).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_MKL_H
#define TPRT_CPU_MKL_H

#include <cstddef>
#include <string>

namespace tprt::cpu {

/// MKL's cblas constants (mkl_cblas.h).
enum MklConstant : int {
  kMklRowMajor = 101,
  kMklNoTrans = 111,
  kMklTrans = 112,
  kMklPacked = 151,
  kMklBMatrix = 162,
};

/// The MKL functions the products call (libmkl_rt, the LP64 interface and
/// the GNU OpenMP threading layer, which the runtime's own loops use).
struct Mkl {
  void (*sgemm)(int layout, int transA, int transB, int m, int n, int k,
                float alpha, const float *a, int lda, const float *b, int ldb,
                float beta, float *c, int ldc);
  size_t (*sgemmPackGetSize)(int identifier, int m, int n, int k);
  void (*sgemmPack)(int layout, int identifier, int trans, int m, int n, int k,
                    float alpha, const float *src, int ld, float *dest);
  void (*sgemmCompute)(int layout, int transA, int transB, int m, int n, int k,
                       const float *a, int lda, const float *b, int ldb,
                       float beta, float *c, int ldc);
  void (*setNumThreads)(int threads);
  std::string version;
};

/// MKL, opened on the first call: from TPRT_MKL_DIR (the build's .venv/lib)
/// or the loader's path. Null when it cannot be opened; `why` then says
/// what was tried.
const Mkl *mkl(std::string *why = nullptr);

} // namespace tprt::cpu

#endif // TPRT_CPU_MKL_H
