//===- Map.cuh - elementwise kernels over any float type -------*- C++ -*-===//
//
// One kernel for every elementwise call: each element of one or two
// operands of one float type (f32, bf16, f16) read as f32 (Elements.cuh),
// mapped by `f`, and written rounded once to that type: a bf16 call's
// result is the f32 kernel's on widened operands rounded, bit for bit,
// without the widened copies. Where every pointer is 16-byte aligned each
// thread loads and stores 16 bytes at a time (8 bf16, 4 f32 elements).
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CUDA_MAP_CUH
#define TPRT_CUDA_MAP_CUH

#include "Elements.cuh"
#include "Runtime.h"
#include "Tiling.h"

#include <cstdint>
#include <string>

namespace tprt {
namespace cuda {

constexpr int kMapThreads = 256;

/// 16 bytes of elements of T.
template <typename T> struct alignas(16) Pack {
  static constexpr int size = 16 / sizeof(T);
  T e[size];
};

/// Whether p may be read and written 16 bytes at a time.
inline bool packAligned(const void *p) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0;
}

/// out[i] = f(x[i], y[i]) (y null: f(x[i], 0)). With `packed`, the first
/// n / Pack<T>::size packs go 16 bytes at a time, the rest one by one.
template <typename T, typename F>
__global__ void mapKernel(const T *x, const T *y, T *out, int64_t n, F f,
                          bool packed) {
  constexpr int V = Pack<T>::size;
  int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  int64_t packs = packed ? n / V : 0;
  for (int64_t p = first; p < packs; p += stride) {
    Pack<T> a = reinterpret_cast<const Pack<T> *>(x)[p], b, r;
    if (y)
      b = reinterpret_cast<const Pack<T> *>(y)[p];
    for (int j = 0; j < V; ++j)
      r.e[j] = fromFloat<T>(f(toFloat(a.e[j]), y ? toFloat(b.e[j]) : 0.0f));
    reinterpret_cast<Pack<T> *>(out)[p] = r;
  }
  for (int64_t i = packs * V + first; i < n; i += stride)
    out[i] = fromFloat<T>(f(toFloat(x[i]), y ? toFloat(y[i]) : 0.0f));
}

/// f over `x` (and `y`, of x's type and shape, when defined) into `out`, a
/// GPU tensor of x's type and shape that may be x itself (each element is
/// read before it is written); `name` in errors.
template <typename F>
void mapOnGpuInto(const Tensor &x, const Tensor &y, Tensor &out, F f,
                  const char *name) {
  requireGpuFloat(x, name, "the input");
  DType dtype = x.dtype();
  auto requireLikeX = [&](const Tensor &t, const char *what) {
    requireGpu(t, dtype, name, what);
    if (x.shape() != t.shape())
      fatal(std::string(name) + ": shapes differ: " + x.describe() + " vs " +
            t.describe());
  };
  if (y.defined())
    requireLikeX(y, "the second operand");
  requireLikeX(out, "the result");
  int64_t n = x.numel();
  if (n == 0)
    return;
  bool packed = packAligned(x.raw()) && packAligned(out.raw()) &&
                (!y.defined() || packAligned(y.raw()));
  auto launch = [&](auto element) {
    using T = decltype(element);
    int64_t work = packed ? n / Pack<T>::size + 1 : n;
    mapKernel<T><<<gridBlocks(work, kMapThreads), kMapThreads, 0, stream()>>>(
        static_cast<const T *>(x.raw()),
        y.defined() ? static_cast<const T *>(y.raw()) : nullptr,
        static_cast<T *>(out.raw()), n, f, packed);
  };
  withFloatType(dtype, launch);
  checkLaunch(name);
}

/// f over `x` (and `y`) into a new tensor of x's type (mapOnGpuInto).
template <typename F>
Tensor mapOnGpu(const Tensor &x, const Tensor &y, F f, const char *name) {
  requireGpuFloat(x, name, "the input");
  Tensor out = Tensor::uninitialized(x.dtype(), x.shape(), Device::CUDA);
  mapOnGpuInto(x, y, out, f, name);
  return out;
}

} // namespace cuda
} // namespace tprt

#endif // TPRT_CUDA_MAP_CUH
