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
#include "tpopt/Dialect/TP/TPUtils.h"
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

/// Whether the weight of `linear` is annotated split on its input features
/// (Rowwise): its output is a partial sum.
bool isRowSplit(LinearOp linear) {
  auto annotated = linear.getWeight().getDefiningOp<shard::ShardOp>();
  auto sharding =
      annotated ? annotated.getSharding().getDefiningOp<shard::ShardingOp>()
                : shard::ShardingOp();
  if (!sharding)
    return false;
  ArrayRef<shard::GridAxesAttr> axes = sharding.getSplitAxes().getAxes();
  return axes.size() == 2 && !axes[1].empty();
}

/// Moves `linear`'s bias into a tp.bias_add after its output: after the
/// output's layout annotation when it has one (sequence parallelism
/// reduce-scatters there), so the bias is added once, to the whole sum. A
/// row-split output is a partial sum until that annotation, and what adds
/// into it before (a LoRA branch: base + B(A(x))) adds partial sums: the
/// bias goes after those adds too, (y + b) + u = (y + u) + b.
void splitOffBias(LinearOp linear, bool rowSplit) {
  Value bias = linear.getBias();
  Value output = linear.getResult();
  Operation *after = linear;
  while (rowSplit && output.hasOneUse())
    if (auto sum = dyn_cast<AddOp>(*output.getUsers().begin())) {
      output = sum.getResult();
      after = sum;
    } else {
      break;
    }
  if (output.hasOneUse())
    if (auto annotated = dyn_cast<shard::ShardOp>(*output.getUsers().begin()))
      if (!annotated.getAnnotateForUsers()) {
        output = annotated.getResult();
        after = annotated;
      }
  linear.getBiasMutable().clear();
  OpBuilder b(after->getContext());
  b.setInsertionPointAfter(after);
  auto add = BiasAddOp::create(b, linear.getLoc(), output, bias);
  inheritDecoderLayer(linear, add);
  output.replaceAllUsesExcept(add.getResult(), add);
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
      // A row-split linear's partial sums are reduced before its bias is
      // added (PyTorch's RowwiseParallel: the bias is replicated and added
      // once). With async-TP, F.linear without bias, then the bias: the
      // matmul stays next to the collective that async-TP fuses with it.
      bool rowSplit = isRowSplit(linear);
      if (linear.getBias() &&
          (rowSplit || (asyncTP && form != LinearForm::Bmm))) {
        splitOffBias(linear, rowSplit);
        if (asyncTP && form != LinearForm::Bmm)
          form = LinearForm::Linear;
      }
      linear.setForm(form);
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
