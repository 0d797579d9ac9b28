//===- FuseLinearCrossEntropy.cpp - the loss by blocks of positions -------===//
//
// A training step's output projection writes [batch, seq, vocab] logits,
// the loss reads them, its gradient writes as many again, and the
// projection's two backward products read that: for a large vocabulary the
// largest tensors of the step. When nothing else reads the logits or their
// gradient, the five ops become one tp.linear_cross_entropy, which runs
// them a block of positions at a time and holds one block's logits.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPFUSELINEARCROSSENTROPY
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// The ops tp.linear_cross_entropy replaces around one tp.cross_entropy.
struct LossOps {
  LinearOp projection;
  CrossEntropyOp loss;
  CrossEntropyGradOp lossGrad;
  LinearGradInputOp gradInput;
  LinearGradWeightOp gradWeight;
};

/// The ops around `loss` when they have the fused op's shape: a bias-free
/// projection whose logits only the loss and its gradient read, the loss's
/// lse only its gradient, and the gradient only the projection's two
/// backward products (a frozen head, as under LoRA, has no weight gradient
/// and stays unfused).
std::optional<LossOps> match(CrossEntropyOp loss) {
  LossOps ops{};
  ops.loss = loss;
  Value logits = loss.getLogits();
  ops.projection = logits.getDefiningOp<LinearOp>();
  if (!ops.projection || ops.projection.getBias())
    return std::nullopt;
  for (Operation *user : logits.getUsers()) {
    if (user == loss)
      continue;
    auto grad = dyn_cast<CrossEntropyGradOp>(user);
    if (!grad || ops.lossGrad || grad.getLse() != loss.getLse() ||
        grad.getIds() != loss.getIds() || grad.getMask() != loss.getMask() ||
        grad.getVocabParallel() != loss.getVocabParallel() ||
        grad.getVocabStartsAttr() != loss.getVocabStartsAttr() ||
        grad.getVocabSizesAttr() != loss.getVocabSizesAttr())
      return std::nullopt;
    ops.lossGrad = grad;
  }
  if (!ops.lossGrad || !loss.getLse().hasOneUse())
    return std::nullopt;
  for (Operation *user : ops.lossGrad.getResult().getUsers()) {
    if (auto input = dyn_cast<LinearGradInputOp>(user);
        input && !ops.gradInput &&
        input.getWeight() == ops.projection.getWeight()) {
      ops.gradInput = input;
      continue;
    }
    if (auto weight = dyn_cast<LinearGradWeightOp>(user);
        weight && !ops.gradWeight && weight.getX() == ops.projection.getX()) {
      ops.gradWeight = weight;
      continue;
    }
    return std::nullopt;
  }
  if (!ops.gradInput || !ops.gradWeight)
    return std::nullopt;
  return ops;
}

struct TPFuseLinearCrossEntropy
    : public tp::impl::TPFuseLinearCrossEntropyBase<TPFuseLinearCrossEntropy> {
  void runOnOperation() override {
    SmallVector<CrossEntropyOp> losses;
    getOperation().walk([&](CrossEntropyOp op) { losses.push_back(op); });
    for (CrossEntropyOp loss : losses) {
      std::optional<LossOps> ops = match(loss);
      if (!ops)
        continue;
      // At the loss: every operand is defined before it, and the
      // gradients' users all come after it.
      OpBuilder b(loss);
      auto fused = LinearCrossEntropyOp::create(
          b, ops->projection.getLoc(), loss.getLoss().getType(),
          ops->gradInput.getResult().getType(),
          ops->gradWeight.getResult().getType(), ops->projection.getX(),
          ops->projection.getWeight(), loss.getIds(), loss.getMask(),
          loss.getVocabParallel(), loss.getVocabStartsAttr(),
          loss.getVocabSizesAttr());
      inheritDecoderLayer(ops->projection, fused);
      loss.getLoss().replaceAllUsesWith(fused.getLoss());
      ops->gradInput.getResult().replaceAllUsesWith(fused.getDx());
      ops->gradWeight.getResult().replaceAllUsesWith(fused.getDweight());
      ops->gradInput.erase();
      ops->gradWeight.erase();
      ops->lossGrad.erase();
      loss.erase();
      ops->projection.erase();
    }
  }
};

} // namespace
