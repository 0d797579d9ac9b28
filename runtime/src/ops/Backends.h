//===- Backends.h - what each backend implements of Calls.def ---*- C++ -*-===//
//
// The backends' side of the runtime's call table: cpu::Name for every entry
// with a CPU kernel (Kernels, KernelsInF32, Fused, Composes), cuda::Name for
// every Kernels, KernelsInF32 and Fused entry (defined when the CUDA backend
// is built), composed::Name for every Fused and Composes entry
// (src/ops/Composed.cpp: the calls a fused call is made of, what the GPU
// runs for a Composes entry and what the kernels fall back to). The dispatch
// layer (src/ops/Dispatch.cpp) calls them, so that a call without its kernel on
// a backend the build includes does not link.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_OPS_BACKENDS_H
#define TPRT_OPS_BACKENDS_H

#include "tprt/tprt.h"

#define TPRT_BACKEND_DECLARE(Name, Result, Params)                             \
  TPRT_RESULT_##Result Name(Context &ctx TPRT_DECLARED_PARAMS(Params));
#define TPRT_BACKEND_SKIP(Name, Result, Params)

namespace tprt {

namespace cpu {
#define TPRT_CPU_Kernels TPRT_BACKEND_DECLARE
#define TPRT_CPU_KernelsInF32 TPRT_BACKEND_DECLARE
#define TPRT_CPU_Fused TPRT_BACKEND_DECLARE
#define TPRT_CPU_Composes TPRT_BACKEND_DECLARE
#define TPRT_CPU_Runtime TPRT_BACKEND_SKIP
#define TPRT_CALL(Name, Result, Backends, Params)                              \
  TPRT_CPU_##Backends(Name, Result, Params)
#include "tprt/Calls.def"
#undef TPRT_CPU_Kernels
#undef TPRT_CPU_KernelsInF32
#undef TPRT_CPU_Fused
#undef TPRT_CPU_Composes
#undef TPRT_CPU_Runtime
} // namespace cpu

namespace cuda {
#define TPRT_CUDA_Kernels TPRT_BACKEND_DECLARE
#define TPRT_CUDA_KernelsInF32 TPRT_BACKEND_DECLARE
#define TPRT_CUDA_Fused TPRT_BACKEND_DECLARE
#define TPRT_CUDA_Composes TPRT_BACKEND_SKIP
#define TPRT_CUDA_Runtime TPRT_BACKEND_SKIP
#define TPRT_CALL(Name, Result, Backends, Params)                              \
  TPRT_CUDA_##Backends(Name, Result, Params)
#include "tprt/Calls.def"
#undef TPRT_CUDA_Kernels
#undef TPRT_CUDA_KernelsInF32
#undef TPRT_CUDA_Fused
#undef TPRT_CUDA_Composes
#undef TPRT_CUDA_Runtime
} // namespace cuda

namespace composed {
#define TPRT_COMPOSED_Kernels TPRT_BACKEND_SKIP
#define TPRT_COMPOSED_KernelsInF32 TPRT_BACKEND_SKIP
#define TPRT_COMPOSED_Fused TPRT_BACKEND_DECLARE
#define TPRT_COMPOSED_Composes TPRT_BACKEND_DECLARE
#define TPRT_COMPOSED_Runtime TPRT_BACKEND_SKIP
#define TPRT_CALL(Name, Result, Backends, Params)                              \
  TPRT_COMPOSED_##Backends(Name, Result, Params)
#include "tprt/Calls.def"
#undef TPRT_COMPOSED_Kernels
#undef TPRT_COMPOSED_KernelsInF32
#undef TPRT_COMPOSED_Fused
#undef TPRT_COMPOSED_Composes
#undef TPRT_COMPOSED_Runtime
} // namespace composed

} // namespace tprt

#undef TPRT_BACKEND_DECLARE
#undef TPRT_BACKEND_SKIP

#endif // TPRT_OPS_BACKENDS_H
