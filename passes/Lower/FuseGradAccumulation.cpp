//===- FuseGradAccumulation.cpp - weight gradients into their buffers -----===//
//
// A linear's weight gradient is a fresh [out, in] tensor that
// tp.accumulate_grad then adds into the parameter's f32 buffer and drops:
// one more pass over every weight per micro-batch. When nothing else reads
// it, the product itself can add into the buffer (beta = 1), as Megatron-LM's
// gradient-accumulation fusion does. Runs after tp-replica-grad-sync, which
// reads the accumulations' replica classes.
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
    for (AccumulateGradOp acc : accumulations) {
      auto grad = acc.getGrad().getDefiningOp<LinearGradWeightOp>();
      if (!grad || !grad->hasOneUse())
        continue;
      OpBuilder b(acc);
      auto fused = AccumulateLinearGradWeightOp::create(
          b, acc.getLoc(), grad.getDy(), grad.getX(), acc.getParam(),
          acc.getFqnAttr(), acc.getSplitDimAttr(), acc.getReductionAttr(),
          acc.getDerivedReductionAttr(), acc.getOwnedAttr());
      inheritDecoderLayer(acc, fused);
      acc.erase();
      grad.erase();
    }
  }
};

} // namespace
