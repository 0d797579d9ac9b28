//===- Composed.cpp - the fused calls as the calls they stand for ---------===//
//
// composed::Name of every Composes entry of tprt/Calls.def: the separate
// calls a fused call saves passes over. The GPU runs these (no CUDA kernel
// fuses them yet); the CPU kernels fall back to them where their fusion
// does not apply (a type, library or layout it does not cover). Every call
// here goes through the dispatch layer, so each part runs on the context's
// device. Also the Runtime entries that choose between calls by rank.
//
//===----------------------------------------------------------------------===//

#include "ops/Backends.h"

namespace tprt {

Tensor composed::all_reduce_sum_consuming(Context &ctx, Tensor &x) {
  Tensor taken = std::move(x);
  x = Tensor();
  return all_reduce_sum(ctx, taken);
}

//===----------------------------------------------------------------------===//
// Products with an epilogue, siblings, SwiGLU
//===----------------------------------------------------------------------===//

namespace {
Tensor product(Context &ctx, const Tensor &x, const Tensor &w, bool bmm) {
  return bmm ? linear_bmm(ctx, x, w) : linear(ctx, x, w);
}

/// The adds' consuming forms: the residual taken (`other` left empty),
/// added once over the group when `once`.
Tensor addInto(Context &ctx, const Tensor &x, const Tensor &w, Tensor &other,
               bool bmm, bool once) {
  Tensor residual = std::move(other);
  other = Tensor();
  if (once && ctx.tp().rank() != 0)
    return product(ctx, x, w, bmm);
  return add(ctx, product(ctx, x, w, bmm), residual);
}

Tensors siblings(Context &ctx, const Tensor &x,
                 std::initializer_list<const Tensor *> weights, bool bmm) {
  Tensors results;
  for (const Tensor *w : weights)
    results.push_back(product(ctx, x, *w, bmm));
  return results;
}
} // namespace

Tensor composed::linear_add(Context &ctx, const Tensor &x, const Tensor &w,
                            const Tensor &other) {
  return add(ctx, tprt::linear(ctx, x, w), other);
}

Tensor composed::linear_bmm_add(Context &ctx, const Tensor &x, const Tensor &w,
                                const Tensor &other) {
  return add(ctx, tprt::linear_bmm(ctx, x, w), other);
}

Tensor composed::linear_silu_mul(Context &ctx, const Tensor &x, const Tensor &w,
                                 const Tensor &other, int64_t) {
  return mul(ctx, silu(ctx, tprt::linear(ctx, x, w)), other);
}

Tensor composed::linear_bmm_silu_mul(Context &ctx, const Tensor &x,
                                     const Tensor &w, const Tensor &other,
                                     int64_t) {
  return mul(ctx, silu(ctx, tprt::linear_bmm(ctx, x, w)), other);
}

Tensor composed::linear_add_consuming(Context &ctx, const Tensor &x,
                                      const Tensor &w, Tensor &other) {
  return addInto(ctx, x, w, other, /*bmm=*/false, /*once=*/false);
}

Tensor composed::linear_bmm_add_consuming(Context &ctx, const Tensor &x,
                                          const Tensor &w, Tensor &other) {
  return addInto(ctx, x, w, other, /*bmm=*/true, /*once=*/false);
}

Tensor composed::linear_add_once_consuming(Context &ctx, const Tensor &x,
                                           const Tensor &w, Tensor &other) {
  return addInto(ctx, x, w, other, /*bmm=*/false, /*once=*/true);
}

Tensor composed::linear_bmm_add_once_consuming(Context &ctx, const Tensor &x,
                                               const Tensor &w, Tensor &other) {
  return addInto(ctx, x, w, other, /*bmm=*/true, /*once=*/true);
}

Tensor linear_add_once(Context &ctx, const Tensor &x, const Tensor &w,
                       const Tensor &other) {
  return ctx.tp().rank() == 0 ? linear_add(ctx, x, w, other)
                              : linear(ctx, x, w);
}

Tensor linear_bmm_add_once(Context &ctx, const Tensor &x, const Tensor &w,
                           const Tensor &other) {
  return ctx.tp().rank() == 0 ? linear_bmm_add(ctx, x, w, other)
                              : linear_bmm(ctx, x, w);
}

Tensors composed::linear_siblings(Context &ctx, const Tensor &x,
                                  const Tensor &w0, const Tensor &w1) {
  return siblings(ctx, x, {&w0, &w1}, /*bmm=*/false);
}

Tensors composed::linear_siblings(Context &ctx, const Tensor &x,
                                  const Tensor &w0, const Tensor &w1,
                                  const Tensor &w2) {
  return siblings(ctx, x, {&w0, &w1, &w2}, /*bmm=*/false);
}

Tensors composed::linear_bmm_siblings(Context &ctx, const Tensor &x,
                                      const Tensor &w0, const Tensor &w1) {
  return siblings(ctx, x, {&w0, &w1}, /*bmm=*/true);
}

Tensors composed::linear_bmm_siblings(Context &ctx, const Tensor &x,
                                      const Tensor &w0, const Tensor &w1,
                                      const Tensor &w2) {
  return siblings(ctx, x, {&w0, &w1, &w2}, /*bmm=*/true);
}

Tensor composed::linear_swiglu(Context &ctx, const Tensor &x, const Tensor &wg,
                               const Tensor &wu) {
  return tprt::linear_silu_mul(ctx, x, wg, tprt::linear(ctx, x, wu));
}

Tensor composed::linear_bmm_swiglu(Context &ctx, const Tensor &x,
                                   const Tensor &wg, const Tensor &wu) {
  return tprt::linear_bmm_silu_mul(ctx, x, wg, tprt::linear_bmm(ctx, x, wu));
}

//===----------------------------------------------------------------------===//
// The training step
//===----------------------------------------------------------------------===//

namespace {
Tensors linearCrossEntropy(Context &ctx, const Tensor &x, const Tensor &w,
                           const Tensor &ids, const Tensor &mask,
                           bool vocabParallel) {
  Tensor logits = linear(ctx, x, w);
  Tensors loss = vocabParallel
                     ? cross_entropy_vocab_parallel(ctx, logits, ids, mask)
                     : cross_entropy(ctx, logits, ids, mask);
  Tensor dlogits =
      cross_entropy_grad(ctx, logits, ids, mask, loss[1], vocabParallel);
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

Tensors composed::linear_cross_entropy_vocab_parallel(Context &ctx,
                                                      const Tensor &x,
                                                      const Tensor &w,
                                                      const Tensor &ids,
                                                      const Tensor &mask) {
  return linearCrossEntropy(ctx, x, w, ids, mask, /*vocabParallel=*/true);
}

Tensors composed::accumulate_linear_cross_entropy(
    Context &ctx, const Tensor &x, const Tensor &w, const Tensor &ids,
    const Tensor &mask, const char *fqn, int64_t splitDim, bool owned,
    bool vocabParallel) {
  Tensors r = linearCrossEntropy(ctx, x, w, ids, mask, vocabParallel);
  accumulate_grad(ctx, r[2], w, fqn, splitDim, owned);
  return {r[0], r[1]};
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
                                         int64_t paddingIdx) {
  accumulate_grad(
      ctx, embedding_grad(ctx, ids, dy, param, vocabParallel, paddingIdx),
      param, fqn, splitDim, owned);
}

} // namespace tprt
