//===- Cublas.h - cuBLAS, opened when a GPU program starts ------*- C++ -*-===//
//
// cuBLAS is opened with dlopen by cuda::initialize() instead of being
// linked: a linked libcublas costs every process resident memory before
// main (libcublasLt's code and the zeroed data its initializers touch; the
// measured figure is in docs/training.md), CPU programs included. The few
// functions the backend calls are looked up by their exported names.
//
// Defined only with TPRT_WITH_CUDA.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_CUBLAS_H
#define TPRT_CUDA_CUBLAS_H

#include <cublas_v2.h>
#include <string>

namespace tprt {
namespace cuda {

/// The cuBLAS functions the backend calls (cublas_v2.h's names map to the
/// exported `_v2` and `_64` symbols).
struct Cublas {
  decltype(&::cublasCreate) create;
  decltype(&::cublasSetStream) setStream;
  decltype(&::cublasSetMathMode) setMathMode;
  decltype(&::cublasGetStatusName) statusName;
  decltype(&::cublasGetStatusString) statusString;
  decltype(&::cublasSgemmStridedBatched_64) sgemmStridedBatched;
  decltype(&::cublasGemmStridedBatchedEx_64) gemmStridedBatchedEx;
};

/// Opens the library on first use (the toolkit's directory the runtime was
/// built with first, then the loader's search path); fatal, naming the
/// library and dlerror(), when it or a function is missing.
const Cublas &cublas();

/// The library cublas() opens, and whether it is open yet (tests).
const char *cublasLibraryName();
bool cublasLoaded();

/// A library of the toolkit's cuBLAS release (`base`.so.<cuBLAS major>, as
/// "libcublasLt"), opened as cublas() opens cuBLAS; null, with the
/// loader's reasons in `tried`, when it does not open.
void *openCublasFamily(const char *base, std::string &name, std::string &tried);

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_CUBLAS_H
