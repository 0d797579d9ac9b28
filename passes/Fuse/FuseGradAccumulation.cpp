//===- FuseGradAccumulation.cpp - weight gradients into their buffers -----===//
//
// A linear's weight gradient is a fresh [out, in] tensor that
// tp.accumulate_grad then adds into the parameter's f32 buffer and drops:
// one more pass over every weight per micro-batch. When nothing else reads
// it, the product itself can add into the buffer (beta = 1), as Megatron-LM's
// gradient-accumulation fusion does; an embedding's rows likewise. A
// parameter used twice (a tied embedding) has the sum of its uses'
// gradients accumulated: each is accumulated on its own instead, when it is
// made, so that neither waits for the other nor is added to it in a tensor
// of its own. Runs after tp-replica-grad-sync, which reads the
// accumulations' replica classes.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPFUSEGRADACCUMULATION
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

struct TPFuseGradAccumulation
    : public tp::impl::TPFuseGradAccumulationBase<TPFuseGradAccumulation> {
  void runOnOperation() override {
    SmallVector<AccumulateGradOp> accumulations;
    getOperation().walk(
        [&](AccumulateGradOp acc) { accumulations.push_back(acc); });
    SmallVector<AccumulateGradOp> terms;
    for (AccumulateGradOp acc : accumulations)
      splitSum(acc, terms);
    for (AccumulateGradOp acc : terms) {
      if (auto grad = acc.getGrad().getDefiningOp<LinearGradWeightOp>();
          grad && grad->hasOneUse()) {
        OpBuilder b(acc);
        auto fused = AccumulateLinearGradWeightOp::create(
            b, acc.getLoc(), grad.getDy(), grad.getX(), acc.getParam(),
            acc.getFqnAttr(), acc.getSplitDimAttr(), acc.getReductionAttr(),
            acc.getDerivedReductionAttr(), acc.getOwnedAttr());
        inheritDecoderLayer(acc, fused);
        acc.erase();
        grad.erase();
      } else if (auto loss =
                     acc.getGrad().getDefiningOp<LinearCrossEntropyOp>();
                 loss && acc.getGrad() == loss.getDweight() &&
                 loss.getDweight().hasOneUse() &&
                 loss.getWeight() == acc.getParam()) {
        // At the loss: the accumulation moves up to it.
        OpBuilder b(loss);
        auto fused = AccumulateLinearCrossEntropyOp::create(
            b, loss.getLoc(), loss.getLoss().getType(), loss.getDx().getType(),
            loss.getX(), loss.getIds(), loss.getMask(), acc.getParam(),
            acc.getFqnAttr(), acc.getSplitDimAttr(), acc.getReductionAttr(),
            acc.getDerivedReductionAttr(), acc.getOwnedAttr(),
            loss.getVocabParallelAttr(), loss.getVocabStartsAttr(),
            loss.getVocabSizesAttr(), /*runs_bucket=*/nullptr,
            /*block_rows=*/nullptr);
        inheritDecoderLayer(loss, fused);
        loss.getLoss().replaceAllUsesWith(fused.getLoss());
        loss.getDx().replaceAllUsesWith(fused.getDx());
        acc.erase();
        loss.erase();
      } else if (auto grad = acc.getGrad().getDefiningOp<EmbeddingGradOp>();
                 grad && grad->hasOneUse() &&
                 grad.getTable() == acc.getParam()) {
        OpBuilder b(acc);
        auto fused = AccumulateEmbeddingGradOp::create(
            b, acc.getLoc(), grad.getIds(), grad.getDy(), acc.getParam(),
            acc.getFqnAttr(), acc.getSplitDimAttr(), acc.getReductionAttr(),
            acc.getDerivedReductionAttr(), acc.getOwnedAttr(),
            grad.getVocabParallelAttr(), grad.getPaddingIdxAttr(),
            grad.getVocabStartsAttr(), grad.getVocabSizesAttr(),
            /*runs_bucket=*/nullptr, /*block_rows=*/nullptr);
        inheritDecoderLayer(acc, fused);
        acc.erase();
        grad.erase();
      }
    }
  }

  /// `acc` of a tp.add that nothing else reads becomes one accumulation of
  /// each operand, just after the operand is made; `terms` gets the
  /// accumulations that remain.
  static void splitSum(AccumulateGradOp acc,
                       SmallVectorImpl<AccumulateGradOp> &terms) {
    auto sum = acc.getGrad().getDefiningOp<AddOp>();
    if (!sum || !sum->hasOneUse() ||
        sum.getLhs().getType() != acc.getGrad().getType() ||
        sum.getRhs().getType() != acc.getGrad().getType()) {
      terms.push_back(acc);
      return;
    }
    SmallVector<AccumulateGradOp, 2> parts;
    for (Value term : {sum.getLhs(), sum.getRhs()}) {
      OpBuilder b(acc);
      b.setInsertionPointAfterValue(term);
      auto part = cast<AccumulateGradOp>(b.clone(*acc));
      part.getGradMutable().assign(term);
      if (Operation *def = term.getDefiningOp())
        inheritDecoderLayer(def, part);
      parts.push_back(part);
    }
    // Before the parts are split in turn: a term that is a sum is then
    // read by its part alone.
    acc.erase();
    sum.erase();
    for (AccumulateGradOp part : parts)
      splitSum(part, terms);
  }
};

} // namespace
