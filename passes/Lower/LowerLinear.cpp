//===- LowerLinear.cpp - the TPLinear bmm-or-linear dispatch --------------===//
//
// Chooses how each tp.linear runs from the sharding of its input, as NeMo's
// TPLinear does at run time: flattening [batch, seq] is only sound when
// neither dimension is sharded, so batch- or sequence-sharded 3-D inputs
// take the batched form.
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPLOWERLINEAR
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Whether `x` is annotated as sharded on a dimension other than its last;
/// failure when the annotation cannot be read.
FailureOr<bool> shardedOnLeadingDim(LinearOp linear) {
  Value x = linear.getX();
  auto annotated = x.getDefiningOp<shard::ShardOp>();
  if (!annotated)
    return false;
  auto sharding = annotated.getSharding().getDefiningOp<shard::ShardingOp>();
  if (!sharding)
    return linear.emitError("tp-lower-linear: the sharding of the input is "
                            "not a shard.sharding op");
  auto rank = cast<RankedTensorType>(x.getType()).getRank();
  for (auto [dim, axes] : llvm::enumerate(sharding.getSplitAxes().getAxes()))
    if (!axes.empty() && static_cast<int64_t>(dim) < rank - 1)
      return true;
  return false;
}

struct TPLowerLinearPass
    : public tp::impl::TPLowerLinearBase<TPLowerLinearPass> {
  using Base::Base;

  void runOnOperation() override {
    WalkResult result = getOperation().walk([&](LinearOp linear) {
      if (linear.getForm())
        return WalkResult::advance();
      int64_t rank = linear.getX().getType().getRank();
      FailureOr<bool> leading = shardedOnLeadingDim(linear);
      if (failed(leading))
        return WalkResult::interrupt();
      LinearForm form = LinearForm::Linear;
      if (rank == 2)
        form = LinearForm::Mm;
      else if (rank == 3 && *leading)
        form = LinearForm::Bmm;
      else if (*leading)
        return linear.emitError("tp-lower-linear: a rank-")
                   << rank
                   << " input sharded on a leading dimension has no form "
                      "(bmm takes 3-D inputs)",
               WalkResult::interrupt();
      if (asyncTP && form != LinearForm::Bmm && linear.getBias()) {
        // F.linear without bias, then the bias: the matmul stays next to
        // the collective that async-TP fuses with it.
        OpBuilder b(linear);
        Value bias = linear.getBias();
        linear.getBiasMutable().clear();
        linear.setForm(LinearForm::Linear);
        b.setInsertionPointAfter(linear);
        auto add =
            BiasAddOp::create(b, linear.getLoc(), linear.getResult(), bias);
        linear.getResult().replaceAllUsesExcept(add.getResult(), add);
        return WalkResult::advance();
      }
      linear.setForm(form);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
