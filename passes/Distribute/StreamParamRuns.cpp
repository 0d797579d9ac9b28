//===- StreamParamRuns.cpp - vocabulary tables read from their runs -------===//
//
// Under ZeRO stage 3 a vocabulary table (the embedding, the output
// projection) is a bucket of its own and the largest one: gathered whole,
// it and its FP32 gradient would be the two largest buffers of the step.
// The ops that read it in the backward can take it a block of rows at a
// time instead, from the data-parallel runs the rank holds anyway; this
// pass makes them do so where the gathered table's readers allow it.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPSTREAMPARAMRUNS
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Whether `op` can read its parameter operand from the runs.
bool streams(Operation *op) {
  return isa<EmbeddingOp, AccumulateLinearCrossEntropyOp,
             AccumulateEmbeddingGradOp>(op);
}

struct TPStreamParamRunsPass
    : public tp::impl::TPStreamParamRunsBase<TPStreamParamRunsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!(blockMib > 0)) {
      module.emitError("tp-stream-param-runs: block-mib must be positive, "
                       "got ")
          << blockMib;
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> step = requireEntry<func::FuncOp>(
        module, kTrainStepEntry,
        "tp-stream-param-runs: no training step (run tp-build-train-step)");
    if (failed(step))
      return signalPassFailure();
    DenseMap<int64_t, ParamBucketGatherOp> gatherOf;
    step->walk([&](ParamBucketGatherOp gather) {
      if (gather.getFqns().size() == 1)
        gatherOf[gather.getBucket()] = gather;
    });
    llvm::StringMap<BlockArgument> argOf = argumentsByFqn(*step);
    step->walk([&](GradBucketReduceScatterOp bucket) {
      if (!bucket.getMicroBatch() || bucket.getStreamed() ||
          bucket.getFqns().size() != 1 || !bucket.getDtype().isF32())
        return;
      ParamBucketGatherOp gather = gatherOf.lookup(bucket.getBucket());
      if (gather)
        stream(*step, argOf, bucket, gather);
    });
  }

  /// Rewires the streaming readers of `gather`'s table to the step's
  /// argument (from `argOf`), read from `bucket`'s runs.
  void stream(func::FuncOp step, const llvm::StringMap<BlockArgument> &argOf,
              GradBucketReduceScatterOp bucket, ParamBucketGatherOp gather) {
    BlockArgument arg =
        argOf.lookup(cast<StringAttr>(bucket.getFqns()[0]).getValue());
    Value table = gather.getResult(0);
    auto type = dyn_cast<RankedTensorType>(table.getType());
    if (!arg || !type || type.getRank() != 2 || !type.hasStaticShape() ||
        arg.getType() != type)
      return;
    SmallVector<OpOperand *> reads;
    for (OpOperand &use : table.getUses()) {
      Operation *user = use.getOwner();
      if (streams(user) && use.getOperandNumber() == paramOperandNumber(user))
        reads.push_back(&use);
      // A gradient added into the whole buffer (a head that is not fused
      // with its loss: Gemma's soft-capped logits): the table's gradient
      // would be split between that buffer and the run.
      else if (isa<AccumulateGradOp, AccumulateLinearGradWeightOp>(user))
        return;
    }
    if (reads.empty())
      return;
    int64_t rowBytes = std::max<int64_t>(type.getDimSize(1) * 4, 1);
    int64_t rows = std::max<int64_t>(
        1, static_cast<int64_t>(blockMib * 1024 * 1024) / rowBytes);
    Builder b(step.getContext());
    for (OpOperand *read : reads) {
      Operation *op = read->getOwner();
      read->set(arg);
      op->setAttr("runs_bucket", b.getI64IntegerAttr(bucket.getBucket()));
      op->setAttr("block_rows", b.getI64IntegerAttr(rows));
    }
    bucket.setStreamed(true);
    if (gather->use_empty())
      gather.erase();
  }

  /// The operand number of the parameter of a streaming op.
  static unsigned paramOperandNumber(Operation *op) {
    return llvm::TypeSwitch<Operation *, unsigned>(op)
        .Case<EmbeddingOp>([](EmbeddingOp lookup) {
          return lookup.getTableMutable().getOperandNumber();
        })
        .Case<AccumulateLinearCrossEntropyOp, AccumulateEmbeddingGradOp>(
            [](auto acc) { return acc.getParamMutable().getOperandNumber(); });
  }
};

} // namespace
