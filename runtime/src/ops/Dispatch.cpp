//===- Dispatch.cpp - each call to the backend that runs it ---------------===//
//
// One definition per Kernels, KernelsInF32, Fused and Composes entry of
// tprt/Calls.def: on a context that runs on the GPU, the CUDA kernel
// (Kernels, Fused) or the calls the fused call is made of (Composes);
// otherwise the CPU kernel. A KernelsInF32 call on reduced-precision tensors
// first runs itself on the widened ones and rounds the result once. Runtime
// entries are defined once for every device, where their state lives.
//
//===----------------------------------------------------------------------===//

#include "common/Checks.h"
#include "ops/Backends.h"

using namespace tprt;

#ifdef TPRT_WITH_CUDA
#define TPRT_ON_GPU(ctx, call)                                                 \
  if ((ctx).device() == Device::CUDA)                                          \
    return call;
#else
#define TPRT_ON_GPU(ctx, call)
#endif

#define TPRT_DISPATCH_Kernels(Name, Result, Params)                            \
  TPRT_RESULT_##Result tprt::Name(Context &ctx TPRT_PARAMS(Params)) {          \
    TPRT_ON_GPU(ctx, cuda::Name(ctx TPRT_ARGS(Params)))                        \
    return cpu::Name(ctx TPRT_ARGS(Params));                                   \
  }
#define TPRT_DISPATCH_KernelsInF32(Name, Result, Params)                       \
  TPRT_RESULT_##Result tprt::Name(Context &ctx TPRT_PARAMS(Params)) {          \
    TPRT_IN_F32(TPRT_FIRST_PARAM(Params),                                      \
                tprt::Name(ctx TPRT_ARGS_IN_F32(Params)))                      \
    TPRT_ON_GPU(ctx, cuda::Name(ctx TPRT_ARGS(Params)))                        \
    return cpu::Name(ctx TPRT_ARGS(Params));                                   \
  }
#define TPRT_DISPATCH_Fused TPRT_DISPATCH_Kernels
#define TPRT_DISPATCH_Composes(Name, Result, Params)                           \
  TPRT_RESULT_##Result tprt::Name(Context &ctx TPRT_PARAMS(Params)) {          \
    TPRT_ON_GPU(ctx, composed::Name(ctx TPRT_ARGS(Params)))                    \
    return cpu::Name(ctx TPRT_ARGS(Params));                                   \
  }
#define TPRT_DISPATCH_Runtime(Name, Result, Params)
#define TPRT_CALL(Name, Result, Backends, Params)                              \
  TPRT_DISPATCH_##Backends(Name, Result, Params)
#include "tprt/Calls.def"
