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
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
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
  /// The last accumulation of it in the training step's body (per
  /// micro-batch reduction goes after it).
  Operation *lastAccumulation = nullptr;
};

/// A group of gradients bucketed together: the decoder layer they are
/// accumulated in (--zero 2 reduces each layer's buckets after its
/// backward; -1 outside the layers, and for every gradient otherwise),
/// their class and their dtype's order.
using GroupKey = std::tuple<int64_t, GradReduction, unsigned>;

struct TPReplicaGradSyncPass
    : public tp::impl::TPReplicaGradSyncBase<TPReplicaGradSyncPass> {
  using Base::Base;

  using Groups = std::map<GroupKey, SmallVector<ReplicaGrad>>;

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
    if (dp < 1) {
      module.emitError("tp-replica-grad-sync: dp must be at least 1, got ")
          << static_cast<int64_t>(dp);
      return signalPassFailure();
    }
    if (zero < 0 || zero > 2 || (zero > 0 && dp < 2)) {
      module.emitError("tp-replica-grad-sync: zero must be 0, or 1 or 2 "
                       "with dp of 2 or more; got zero ")
          << static_cast<int64_t>(zero) << " at dp "
          << static_cast<int64_t>(dp);
      return signalPassFailure();
    }
    bool tensorParallel = module.lookupSymbol<shard::GridOp>("tp") != nullptr;

    // (unit, class, dtype) -> gradients; mean before sum, f32 before the
    // others.
    // Over dp, every gradient is a partial sum of the global batch.
    Groups tpGroups, dpGroups;
    // A fused accumulation hides its class from the walk below.
    WalkResult fused = step->walk([&](Operation *op) {
      if (!isa<AccumulateLinearGradWeightOp, AccumulateEmbeddingGradOp,
               AccumulateLinearCrossEntropyOp>(op))
        return WalkResult::advance();
      op->emitError("tp-replica-grad-sync: run before "
                    "tp-fuse-grad-accumulation, which fused the gradient of '")
          << op->getAttrOfType<StringAttr>("fqn").getValue() << "'";
      return WalkResult::interrupt();
    });
    if (fused.wasInterrupted())
      return signalPassFailure();
    // The last accumulation of each gradient, in the step's body.
    Block &body = step->getBody().front();
    llvm::StringMap<Operation *> last;
    step->walk([&](AccumulateGradOp acc) {
      Operation *at = body.findAncestorOpInBlock(*acc);
      Operation *&latest = last[acc.getFqn()];
      if (!latest || latest->isBeforeInBlock(at))
        latest = at;
    });
    WalkResult walk = step->walk([&](AccumulateGradOp acc) {
      auto type = cast<RankedTensorType>(acc.getParam().getType());
      ReplicaGrad grad{acc.getFqn(), type.getElementType(),
                       type.getNumElements() * 4, last.lookup(acc.getFqn())};
      unsigned order = grad.dtype.isF32() ? 0 : grad.dtype.isBF16() ? 1 : 2;
      int64_t unit = zero == 2 ? decoderLayerOf(acc).value_or(-1) : -1;
      if (dp > 1)
        dpGroups[{unit, GradReduction::Sum, order}].push_back(grad);
      if (!tensorParallel || acc.getOwned())
        return WalkResult::advance(); // no replicas, or each rank's own
      std::optional<GradReduction> reduction = acc.getReduction();
      if (!reduction) {
        if (acc.getSplitDimAttr().getInt() < 0) {
          acc.emitError("tp-replica-grad-sync: the replicated parameter '")
              << acc.getFqn() << "' has no replica class (run tp-partition)";
          return WalkResult::interrupt();
        }
        return WalkResult::advance(); // split: sharded, nothing to sync
      }
      tpGroups[{-1, *reduction, order}].push_back(grad);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    OpBuilder builder = OpBuilder::atBlockBegin(&update->getBody().front());
    builder.setInsertionPointAfter(*boundaries.begin());
    Location loc = (*boundaries.begin()).getLoc();
    int64_t bucket = 0;
    // The tensor-parallel replicas first: the data-parallel sum then reads
    // gradients every rank of a group agrees on.
    emitBuckets(builder, loc, tpGroups, "tp", bucket);
    if (dp > 1) {
      OpBuilder top = OpBuilder::atBlockBegin(module.getBody());
      if (!module.lookupSymbol<shard::GridOp>("dp"))
        shard::GridOp::create(top, loc, "dp", ArrayRef<int64_t>{dp});
      if (zero == 0)
        emitBuckets(builder, loc, dpGroups, "dp", bucket);
      else if (failed(shardOverDataParallel(*update, builder, loc, dpGroups,
                                            bucket, zero == 2)))
        return signalPassFailure();
    }
  }

  /// ZeRO stage 1: each data-parallel bucket reduce-scattered (padded to
  /// equal runs), the norm and the update on this rank's runs, then each
  /// bucket's parameters all-gathered after the update. Stage 2
  /// (`microBatch`): each bucket (of one decoder layer's gradients, or of
  /// those outside the layers) reduce-scattered in the training step,
  /// after the last accumulation of its gradients.
  LogicalResult shardOverDataParallel(func::FuncOp update, OpBuilder &builder,
                                      Location loc, Groups &groups,
                                      int64_t &bucket, bool microBatch) {
    auto norms = update.getOps<GradNormOp>();
    auto updates = update.getOps<OptimizerUpdateOp>();
    if (!llvm::hasSingleElement(norms) || !llvm::hasSingleElement(updates))
      return update.emitError("tp-replica-grad-sync: zero needs exactly one "
                              "tp.grad_norm and one tp.optimizer_update in "
                              "the optimizer step");
    OptimizerUpdateOp optimizerUpdate = *updates.begin();
    (*norms.begin()).setDpSharded(true);
    optimizerUpdate.setDpSharded(true);
    OpBuilder after(optimizerUpdate);
    after.setInsertionPointAfter(optimizerUpdate);
    forEachBucket(
        builder, groups,
        [&](ArrayRef<ReplicaGrad> grads, GradReduction, int64_t bytes) {
          SmallVector<Attribute> fqns;
          for (const ReplicaGrad &grad : grads)
            fqns.push_back(builder.getStringAttr(grad.fqn));
          int64_t padded = tprt::shardedBucketElements(bytes / 4, dp);
          Type dtype = grads.front().dtype;
          OpBuilder at = builder;
          if (microBatch) {
            Operation *after = grads.front().lastAccumulation;
            for (const ReplicaGrad &grad : grads)
              if (after->isBeforeInBlock(grad.lastAccumulation))
                after = grad.lastAccumulation;
            // Buckets reduced at one point go in bucket order.
            while (auto next = dyn_cast_or_null<GradBucketReduceScatterOp>(
                       after->getNextNode()))
              after = next;
            at.setInsertionPointAfter(after);
          }
          auto reduce = GradBucketReduceScatterOp::create(
              at, loc, builder.getI64IntegerAttr(bucket), TypeAttr::get(dtype),
              builder.getArrayAttr(fqns), builder.getI64IntegerAttr(bytes),
              builder.getI64IntegerAttr(padded * 4));
          if (microBatch) {
            reduce.setMicroBatch(true);
            if (Operation *after = reduce->getPrevNode())
              inheritDecoderLayer(after, reduce);
          }
          ParamBucketAllGatherOp::create(
              after, loc, builder.getI64IntegerAttr(bucket++),
              TypeAttr::get(dtype), builder.getArrayAttr(fqns),
              builder.getI64IntegerAttr(padded *
                                        (dtype.getIntOrFloatBitWidth() / 8)));
        });
    return success();
  }

  /// Calls fn(gradients, class, FP32 bytes) for each bucket of each group:
  /// greedy in FQN order, as the runtime's planBuckets fills them.
  template <typename Fn>
  void forEachBucket(OpBuilder &builder, Groups &groups, Fn fn) {
    auto limit = static_cast<int64_t>(bucketMib * 1024 * 1024);
    for (auto &[key, grads] : groups) {
      llvm::sort(grads, [](const ReplicaGrad &a, const ReplicaGrad &b) {
        return a.fqn < b.fqn;
      });
      std::vector<int64_t> sizes;
      for (const ReplicaGrad &grad : grads)
        sizes.push_back(grad.bytes);
      for (auto [begin, end] : tprt::planBuckets(sizes, limit)) {
        ArrayRef<ReplicaGrad> bucket(grads.begin() + begin,
                                     grads.begin() + end);
        int64_t bytes = 0;
        for (const ReplicaGrad &grad : bucket)
          bytes += grad.bytes;
        fn(bucket, std::get<1>(key), bytes);
      }
    }
  }

  /// One tp.grad_bucket_all_reduce per bucket of each group, in FQN order.
  void emitBuckets(OpBuilder &builder, Location loc, Groups &groups,
                   StringRef group, int64_t &bucket) {
    forEachBucket(
        builder, groups,
        [&](ArrayRef<ReplicaGrad> grads, GradReduction reduction,
            int64_t bytes) {
          SmallVector<Attribute> fqns;
          for (const ReplicaGrad &grad : grads)
            fqns.push_back(builder.getStringAttr(grad.fqn));
          GradBucketAllReduceOp::create(
              builder, loc, builder.getI64IntegerAttr(bucket++),
              GradReductionAttr::get(builder.getContext(), reduction),
              TypeAttr::get(grads.front().dtype), builder.getArrayAttr(fqns),
              builder.getI64IntegerAttr(bytes), builder.getStringAttr(group));
        });
  }
};

} // namespace
