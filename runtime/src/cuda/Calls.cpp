//===- Calls.cpp - the CUDA kernels of calls that share one
//-----------------===//
//
// cuda::Name of the table's calls (tprt/Calls.def) that are one of the
// backend's shared kernels with a parameter of their own: the elementwise
// ops and their gradients, the loss in both forms, the rotary embedding
// (its tables made on the host, as the CPU's), and a linear's epilogues.
//
//===----------------------------------------------------------------------===//

#include "Runtime.h"
#include "common/Checks.h"
#include "common/Rotary.h"

namespace tprt {
namespace cuda {

/// The bias in place on the product (f32) or by bias_add; SiluMul is
/// composed (the SiLU, then the product with `other`).
Tensor linear_epilogue(Context &ctx, const Tensor &x, const Tensor &w,
                       const Tensor &other, LinearForm form,
                       LinearEpilogue epilogue, int64_t) {
  Tensor out = cuda::linear(ctx, x, w, form);
  if (epilogue == LinearEpilogue::SiluMul)
    return cuda::mul(ctx, cuda::silu(ctx, out), other);
  if (out.dtype() != DType::F32)
    return cuda::bias_add(ctx, out, other);
  addBias(out, other, "linear");
  return out;
}

Tensor rotary(Context &ctx, const Tensor &x, int64_t headDim, int64_t rotaryDim,
              double theta, bool interleaved, int64_t ropeType, double factor,
              double lowFreqFactor, double highFreqFactor,
              int64_t originalMaxPositions, double betaFast, double betaSlow,
              bool truncate, double attentionFactor, bool transpose,
              std::vector<double> shortFactor, std::vector<double> longFactor,
              int64_t) {
  TPRT_IN_F32(x, cuda::rotary(ctx, widened(x), headDim, rotaryDim, theta,
                              interleaved, ropeType, factor, lowFreqFactor,
                              highFreqFactor, originalMaxPositions, betaFast,
                              betaSlow, truncate, attentionFactor, transpose,
                              shortFactor, longFactor))
  if (!x.defined())
    requireF32(x, "rotary", "the input");
  RotaryPlan plan = planRotary(
      ctx, x, headDim, rotaryDim, theta, ropeType, factor, lowFreqFactor,
      highFreqFactor, originalMaxPositions, betaFast, betaSlow, truncate,
      attentionFactor, transpose, shortFactor, longFactor);
  return rotaryWithTables(x, headDim, plan.rotaryDim, interleaved,
                          plan.tables->cosT.data(), plan.tables->sinT.data());
}

Tensor silu(Context &, const Tensor &x, int64_t) {
  return unary(x, Unary::Silu, 0, "silu");
}

Tensor gelu(Context &, const Tensor &x, bool tanhApproximation, int64_t) {
  return unary(x, tanhApproximation ? Unary::GeluTanh : Unary::Gelu, 0, "gelu");
}

Tensor relu_squared(Context &, const Tensor &x, int64_t) {
  return unary(x, Unary::ReluSquared, 0, "relu_squared");
}

Tensor scale(Context &, const Tensor &x, double factor, int64_t) {
  return unary(x, Unary::Scale, static_cast<float>(factor), "scale");
}

Tensor softcap(Context &, const Tensor &x, double cap, int64_t) {
  return unary(x, Unary::Softcap, static_cast<float>(cap), "softcap");
}

Tensor add(Context &, const Tensor &a, const Tensor &b, int64_t) {
  return binary(a, b, Binary::Add, "add");
}

Tensor mul(Context &, const Tensor &a, const Tensor &b, int64_t) {
  return binary(a, b, Binary::Mul, "mul");
}

Tensor silu_grad(Context &, const Tensor &x, const Tensor &dy) {
  return activation_grad(x, dy, Activation::Silu, 0, "silu_grad");
}

Tensor relu_squared_grad(Context &, const Tensor &x, const Tensor &dy) {
  return activation_grad(x, dy, Activation::ReluSquared, 0,
                         "relu_squared_grad");
}

Tensor gelu_grad(Context &, const Tensor &x, const Tensor &dy,
                 bool tanhApproximation) {
  return activation_grad(
      x, dy, tanhApproximation ? Activation::GeluTanh : Activation::Gelu, 0,
      "gelu_grad");
}

Tensor softcap_grad(Context &, const Tensor &x, const Tensor &dy, double cap) {
  return activation_grad(x, dy, Activation::Softcap, static_cast<float>(cap),
                         "softcap_grad");
}

Tensors cross_entropy(Context &ctx, const Tensor &logits, const Tensor &ids,
                      const Tensor &mask) {
  return crossEntropy(ctx, logits, ids, mask, /*vocabParallel=*/false);
}

Tensors cross_entropy_vocab_parallel(Context &ctx, const Tensor &logits,
                                     const Tensor &ids, const Tensor &mask) {
  return crossEntropy(ctx, logits, ids, mask, /*vocabParallel=*/true);
}

} // namespace cuda
} // namespace tprt
