//===- KernelUtils.h - what the CPU kernels share ---------------*- C++ -*-===//
//
// Operand checks and the OpenMP elementwise loops of the forward
// (kernels.cpp) and backward (backward.cpp) kernels.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_KERNELUTILS_H
#define TPRT_CPU_KERNELUTILS_H

#include "tprt/tprt.h"

#include <string>

namespace tprt {

inline void requireF32(const Tensor &t, const char *op, const char *what) {
  if (!t.defined() || t.dtype() != DType::F32)
    fatal(std::string(op) + ": " + what + " must be an f32 tensor, got " +
          (t.defined() ? t.describe() : "nothing"));
}

inline void requireSameShape(const Tensor &a, const Tensor &b, const char *op) {
  if (a.shape() != b.shape())
    fatal(std::string(op) + ": shapes differ: " + a.describe() + " vs " +
          b.describe());
}

template <typename Fn> Tensor unaryMap(const Tensor &x, const char *op, Fn fn) {
  requireF32(x, op, "the input");
  Tensor out = Tensor::uninitialized(DType::F32, x.shape());
  const float *in = x.f32();
  float *o = out.f32();
  int64_t n = x.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    o[i] = fn(in[i]);
  return out;
}

template <typename Fn>
Tensor binaryMap(const Tensor &a, const Tensor &b, const char *op, Fn fn) {
  requireF32(a, op, "the left operand");
  requireF32(b, op, "the right operand");
  requireSameShape(a, b, op);
  Tensor out = Tensor::uninitialized(DType::F32, a.shape());
  const float *x = a.f32(), *y = b.f32();
  float *o = out.f32();
  int64_t n = a.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    o[i] = fn(x[i], y[i]);
  return out;
}

} // namespace tprt

#endif // TPRT_CPU_KERNELUTILS_H
