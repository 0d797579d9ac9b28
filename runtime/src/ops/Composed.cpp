//===- Composed.cpp - the fused calls as the calls they stand for ---------===//
//
// composed::Name of every Fused and Composes entry of tprt/Calls.def: the
// separate calls a fused call saves passes over. The GPU runs these for a
// Composes entry; the kernels of a Fused entry, and the CPU kernel of a
// Composes one, fall back to them where their fusion does not apply (a
// type, library or layout it does not cover). Every call here goes through
// the dispatch layer, so each part runs on the context's device.
//
//===----------------------------------------------------------------------===//

#include "ops/Backends.h"

#include <utility>

namespace tprt {

//===----------------------------------------------------------------------===//
// Products with an epilogue, siblings, SwiGLU
//===----------------------------------------------------------------------===//

Tensor composed::linear_add(Context &ctx, const Tensor &x, const Tensor &w,
                            const Tensor &other, LinearForm form, bool once) {
  Tensor product = tprt::linear(ctx, x, w, form);
  if (once && ctx.tp().rank() != 0)
    return product;
  return add(ctx, product, other);
}

Tensor composed::linear_add_consuming(Context &ctx, const Tensor &x,
                                      const Tensor &w, Tensor &other,
                                      LinearForm form, bool once) {
  Tensor residual = std::exchange(other, Tensor());
  return composed::linear_add(ctx, x, w, residual, form, once);
}

Tensors composed::linear_siblings(Context &ctx, const Tensor &x,
                                  const Tensor &w0, const Tensor &w1,
                                  LinearForm form) {
  return {tprt::linear(ctx, x, w0, form), tprt::linear(ctx, x, w1, form)};
}

Tensors composed::linear_siblings(Context &ctx, const Tensor &x,
                                  const Tensor &w0, const Tensor &w1,
                                  const Tensor &w2, LinearForm form) {
  return {tprt::linear(ctx, x, w0, form), tprt::linear(ctx, x, w1, form),
          tprt::linear(ctx, x, w2, form)};
}

Tensor composed::linear_swiglu(Context &ctx, const Tensor &x, const Tensor &wg,
                               const Tensor &wu, LinearForm form) {
  return tprt::linear_epilogue(ctx, x, wg, tprt::linear(ctx, x, wu, form), form,
                               LinearEpilogue::SiluMul);
}

//===----------------------------------------------------------------------===//
// The training step
//===----------------------------------------------------------------------===//

namespace {
Tensors linearCrossEntropy(Context &ctx, const Tensor &x, const Tensor &w,
                           const Tensor &ids, const Tensor &mask,
                           bool vocabParallel,
                           const std::vector<int64_t> &starts = {},
                           const std::vector<int64_t> &sizes = {}) {
  Tensor logits = tprt::linear(ctx, x, w, LinearForm::Flat);
  Tensors loss =
      vocabParallel
          ? cross_entropy_vocab_parallel(ctx, logits, ids, mask, starts, sizes)
          : cross_entropy(ctx, logits, ids, mask);
  Tensor dlogits = cross_entropy_grad(ctx, logits, ids, mask, loss[1],
                                      vocabParallel, starts, sizes);
  release(logits);
  return {loss[0], linear_grad_input(ctx, dlogits, w),
          linear_grad_weight(ctx, dlogits, x)};
}
} // namespace

Tensors composed::linear_cross_entropy(Context &ctx, const Tensor &x,
                                       const Tensor &w, const Tensor &ids,
                                       const Tensor &mask) {
  return linearCrossEntropy(ctx, x, w, ids, mask, /*vocabParallel=*/false);
}

Tensors composed::linear_cross_entropy_vocab_parallel(
    Context &ctx, const Tensor &x, const Tensor &w, const Tensor &ids,
    const Tensor &mask, std::vector<int64_t> vocabStarts,
    std::vector<int64_t> vocabSizes) {
  return linearCrossEntropy(ctx, x, w, ids, mask, /*vocabParallel=*/true,
                            vocabStarts, vocabSizes);
}

Tensors composed::accumulate_linear_cross_entropy(
    Context &ctx, const Tensor &x, const Tensor &w, const Tensor &ids,
    const Tensor &mask, const char *fqn, int64_t splitDim, bool owned,
    bool vocabParallel, std::vector<int64_t> vocabStarts,
    std::vector<int64_t> vocabSizes) {
  Tensors r = linearCrossEntropy(ctx, x, w, ids, mask, vocabParallel,
                                 vocabStarts, vocabSizes);
  accumulate_grad(ctx, r[2], w, fqn, splitDim, owned);
  return {r[0], r[1]};
}

Tensors composed::add_rms_norm(Context &ctx, const Tensor &a, const Tensor &b,
                               const Tensor &w, double eps, double offset) {
  Tensor sum = add(ctx, a, b);
  return {sum, rms_norm(ctx, sum, w, eps, offset, 0)};
}

Tensors composed::silu_mul_grad(Context &ctx, const Tensor &gate,
                                const Tensor &up, const Tensor &dy) {
  return {silu_grad(ctx, gate, mul(ctx, dy, up)),
          mul(ctx, dy, silu(ctx, gate))};
}

void composed::accumulate_linear_grad_weight(Context &ctx, const Tensor &dy,
                                             const Tensor &x,
                                             const Tensor &param,
                                             const char *fqn, int64_t splitDim,
                                             bool owned) {
  accumulate_grad(ctx, linear_grad_weight(ctx, dy, x), param, fqn, splitDim,
                  owned);
}

void composed::accumulate_embedding_grad(Context &ctx, const Tensor &ids,
                                         const Tensor &dy, const Tensor &param,
                                         const char *fqn, int64_t splitDim,
                                         bool owned, bool vocabParallel,
                                         int64_t paddingIdx,
                                         std::vector<int64_t> vocabStarts,
                                         std::vector<int64_t> vocabSizes) {
  accumulate_grad(ctx,
                  embedding_grad(ctx, ids, dy, param, vocabParallel, paddingIdx,
                                 std::move(vocabStarts), std::move(vocabSizes)),
                  param, fqn, splitDim, owned);
}

} // namespace tprt
