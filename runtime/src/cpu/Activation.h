//===- Activation.h - vectorized activations --------------------*- C++ -*-===//
//
// The forward activations over a whole tensor. With oneDNN they are its JIT
// eltwise primitives (AVX-512 or AVX2 code for the machine it runs on,
// where the runtime itself is compiled for baseline x86-64 and a scalar
// expf loop took 6% of the medium Llama's forward); without it, the scalar
// loops.
//
//===----------------------------------------------------------------------===//

#ifndef TPRT_CPU_ACTIVATION_H
#define TPRT_CPU_ACTIVATION_H

#include <cstdint>

namespace tprt::cpu {

enum class Activation {
  Silu,     // x sigmoid(x)
  Gelu,     // 0.5 x (1 + erf(x / sqrt 2))
  GeluTanh, // 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  Exp,      // exp(x), 0 at -inf: the attention's softmax
  Sigmoid,  // 1 / (1 + exp(-x)): SiLU's derivative
};

/// out[i] = f(x[i]) for i < n (in place when out == x), with all the
/// threads OpenMP gives: inside a parallel region, the calling thread's.
void activation(Activation f, const float *x, float *out, int64_t n);

} // namespace tprt::cpu

#endif // TPRT_CPU_ACTIVATION_H
