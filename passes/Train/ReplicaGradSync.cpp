//===- ReplicaGradSync.cpp - replica gradients in buckets, once per step --===//
//
// Replicated parameters drift apart unless their gradients are the same on
// every rank. Reducing them per op and per micro-batch costs one small
// collective per parameter per micro-batch; reducing the accumulated
// buffers once per optimizer step, packed into few large FP32 buffers, is
// what AutoModel's synchronize_tp_replica_gradients does. The classes come
// from tp-partition (tp.accumulate_grad's reduction); this pass only packs.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "tprt/Buckets.h"

#include <map>

namespace mlir::tp {
#define GEN_PASS_DEF_TPREPLICAGRADSYNC
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// One replicated parameter's gradient to synchronize.
struct ReplicaGrad {
  StringRef fqn;
  Type dtype;
  /// At FP32 size: what the reduction moves.
  int64_t bytes;
};

struct TPReplicaGradSyncPass
    : public tp::impl::TPReplicaGradSyncBase<TPReplicaGradSyncPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!(bucketMib > 0)) {
      module.emitError("tp-replica-grad-sync: bucket-mib must be positive, "
                       "got ")
          << bucketMib;
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> step = requireEntry<func::FuncOp>(
        module, kTrainStepEntry,
        "tp-replica-grad-sync: no training step (run tp-build-train-step)");
    FailureOr<func::FuncOp> update = requireEntry<func::FuncOp>(
        module, kOptimizerStepEntry,
        "tp-replica-grad-sync: no optimizer step (run tp-build-train-step)");
    if (failed(step) || failed(update))
      return signalPassFailure();
    auto boundaries = update->getOps<OptimizerBoundaryOp>();
    if (!llvm::hasSingleElement(boundaries)) {
      update->emitError("tp-replica-grad-sync: the optimizer step must have "
                        "exactly one tp.optimizer_boundary");
      return signalPassFailure();
    }
    if (!update->getOps<GradBucketAllReduceOp>().empty()) {
      update->emitError("tp-replica-grad-sync: the gradients are already "
                        "bucketed");
      return signalPassFailure();
    }
    // One rank: nothing to synchronize.
    if (!module.lookupSymbol<shard::GridOp>("tp"))
      return;

    // (class, dtype) -> gradients; mean before sum, f32 before the others.
    std::map<std::pair<GradReduction, unsigned>, SmallVector<ReplicaGrad>>
        groups;
    WalkResult walk = step->walk([&](AccumulateGradOp acc) {
      std::optional<GradReduction> reduction = acc.getReduction();
      if (!reduction) {
        if (acc.getSplitDimAttr().getInt() < 0) {
          acc.emitError("tp-replica-grad-sync: the replicated parameter '")
              << acc.getFqn() << "' has no replica class (run tp-partition)";
          return WalkResult::interrupt();
        }
        return WalkResult::advance(); // split: sharded, nothing to sync
      }
      auto type = cast<RankedTensorType>(acc.getParam().getType());
      Type dtype = type.getElementType();
      unsigned order = dtype.isF32() ? 0 : dtype.isBF16() ? 1 : 2;
      groups[{*reduction, order}].push_back(
          {acc.getFqn(), dtype, type.getNumElements() * 4});
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    OpBuilder builder = OpBuilder::atBlockBegin(&update->getBody().front());
    builder.setInsertionPointAfter(*boundaries.begin());
    Location loc = (*boundaries.begin()).getLoc();
    auto limit = static_cast<int64_t>(bucketMib * 1024 * 1024);
    int64_t bucket = 0;
    for (auto &[key, grads] : groups) {
      llvm::sort(grads, [](const ReplicaGrad &a, const ReplicaGrad &b) {
        return a.fqn < b.fqn;
      });
      // Greedy in FQN order, as the runtime's planBuckets fills them.
      std::vector<int64_t> sizes;
      for (const ReplicaGrad &grad : grads)
        sizes.push_back(grad.bytes);
      for (auto [begin, end] : tprt::planBuckets(sizes, limit)) {
        SmallVector<Attribute> fqns;
        int64_t bytes = 0;
        for (size_t i = begin; i < end; ++i) {
          fqns.push_back(builder.getStringAttr(grads[i].fqn));
          bytes += grads[i].bytes;
        }
        GradBucketAllReduceOp::create(
            builder, loc, builder.getI64IntegerAttr(bucket++),
            GradReductionAttr::get(builder.getContext(), key.first),
            TypeAttr::get(grads.front().dtype), builder.getArrayAttr(fqns),
            builder.getI64IntegerAttr(bytes));
      }
    }
  }
};

} // namespace
