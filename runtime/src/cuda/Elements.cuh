//===- Elements.cuh - float elements of any type on the device -*- C++ -*-===//
//
// A bf16 / f16 program's elements read as f32 and written back: widening is
// exact, narrowing rounds to nearest even (the host's floatToBf16 /
// floatToHalf). Shared by the conversion kernel and the kernels that read
// or write bf16 directly (gradient accumulation, the optimizer's update).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_ELEMENTS_CUH
#define TPRT_CUDA_ELEMENTS_CUH

#include "tprt/tprt.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tprt {
namespace cuda {

__device__ inline float toFloat(float v) { return v; }
__device__ inline float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float toFloat(__half v) { return __half2float(v); }

template <typename T> __device__ T fromFloat(float v);
template <> __device__ inline float fromFloat<float>(float v) { return v; }
template <> __device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <> __device__ inline __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}

/// f(element) with a value of the element type of `dtype`'s float type
/// (f32, bf16 or f16): a kernel launched once per type.
template <typename F> void withFloatType(DType dtype, F f) {
  if (dtype == DType::BF16)
    f(__nv_bfloat16());
  else if (dtype == DType::F16)
    f(__half());
  else
    f(float());
}

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_ELEMENTS_CUH
