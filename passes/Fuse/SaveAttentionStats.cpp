//===- SaveAttentionStats.cpp - the backward reads the forward's softmax --===//
//
// tp.attention_grad needs each query's softmax normalisation (its
// log-sum-exp) and dout . out. Without them it runs the forward again per
// tile, which is a third of the backward's work again. The forward knows
// both: where a tp.attention_grad has its tp.attention (the same q, k, v,
// mask and attributes, before it), the forward also gives its log-sum-exp
// and the backward takes that and the forward's output, as
// FlashAttention's backward does. The output is usually kept for the
// backward anyway (the output projection's weight gradient reads it); the
// log-sum-exp is one f32 per query and head. Runs on the rank's program.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Dominance.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPSAVEATTENTIONSTATS
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Whether `fwd` computes the attention `grad` differentiates.
bool sameAttention(AttentionOp fwd, AttentionGradOp grad) {
  return fwd.getQ() == grad.getQ() && fwd.getK() == grad.getK() &&
         fwd.getV() == grad.getV() && fwd.getKeyMask() == grad.getKeyMask() &&
         fwd.getNumHeadsAttr() == grad.getNumHeadsAttr() &&
         fwd.getNumKvHeadsAttr() == grad.getNumKvHeadsAttr() &&
         fwd.getHeadDimAttr() == grad.getHeadDimAttr() &&
         fwd.getScaleAttr() == grad.getScaleAttr() &&
         fwd.getCausal() == grad.getCausal() &&
         fwd.getSlidingWindowAttr() == grad.getSlidingWindowAttr() &&
         fwd.getSoftcapAttr() == grad.getSoftcapAttr();
}

/// The tp.attention before `grad` that it differentiates, if any.
AttentionOp forwardOf(AttentionGradOp grad, DominanceInfo &dominance) {
  for (Operation *user : grad.getQ().getUsers())
    if (auto fwd = dyn_cast<AttentionOp>(user))
      if (sameAttention(fwd, grad) && dominance.properlyDominates(fwd, grad))
        return fwd;
  return {};
}

/// `fwd` with its log-sum-exp result ([batch, seq_q, num_heads], f32).
AttentionOp withLogSumExp(AttentionOp fwd) {
  if (fwd.getLse())
    return fwd;
  ArrayRef<int64_t> q = fwd.getQ().getType().getShape();
  OpBuilder b(fwd);
  auto lseType = RankedTensorType::get(
      {q[0], q[1], fwd.getNumHeadsAttr().getInt()}, b.getF32Type());
  auto both = AttentionOp::create(
      b, fwd.getLoc(), fwd.getResult().getType(), lseType, fwd.getQ(),
      fwd.getK(), fwd.getV(), fwd.getKeyMask(), fwd.getNumHeadsAttr(),
      fwd.getNumKvHeadsAttr(), fwd.getHeadDimAttr(), fwd.getScaleAttr(),
      fwd.getCausalAttr(), fwd.getSlidingWindowAttr(), fwd.getSoftcapAttr());
  fwd.getResult().replaceAllUsesWith(both.getResult());
  fwd.erase();
  return both;
}

struct TPSaveAttentionStats
    : public tp::impl::TPSaveAttentionStatsBase<TPSaveAttentionStats> {
  void runOnOperation() override {
    SmallVector<AttentionGradOp> grads;
    getOperation().walk([&](AttentionGradOp op) {
      if (!op.getOut())
        grads.push_back(op);
    });
    DominanceInfo dominance(getOperation());
    for (AttentionGradOp grad : grads) {
      AttentionOp fwd = forwardOf(grad, dominance);
      if (!fwd)
        continue;
      fwd = withLogSumExp(fwd);
      OpBuilder b(grad);
      auto saved = AttentionGradOp::create(
          b, grad.getLoc(), grad.getResultTypes(), grad.getQ(), grad.getK(),
          grad.getV(), grad.getDout(), grad.getKeyMask(), fwd.getResult(),
          fwd.getLse(), grad.getNumHeadsAttr(), grad.getNumKvHeadsAttr(),
          grad.getHeadDimAttr(), grad.getScaleAttr(), grad.getCausalAttr(),
          grad.getSlidingWindowAttr(), grad.getSoftcapAttr());
      grad.replaceAllUsesWith(saved.getResults());
      grad.erase();
    }
  }
};

} // namespace
