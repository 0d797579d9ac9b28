//===- ShardParams.cpp - parameters gathered per layer where read ---------===//
//
// ZeRO stage 3 keeps every parameter as data-parallel runs and gathers a
// decoder layer's parameters only while the layer computes. The units are
// the per-layer buckets of stage 2 (tp-replica-grad-sync, zero = 2), whose
// runs the reduce-scatters and the update already use (a layer larger than
// --bucket-mib is several buckets, each gathered on its own); this pass
// makes the training step read each parameter through a gather of its
// bucket, the init keep only the runs, and the optimizer step gather
// nothing.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPSHARDPARAMS
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

/// The reads of one bucket's parameters in one pass over the step (the
/// forward, the backward, or the whole step): the uses to rewire, each with
/// its parameter's position in the bucket, and the op of the body where
/// the pass's first read is.
struct Reads {
  GradBucketReduceScatterOp bucket;
  std::optional<int64_t> layer;
  /// The members' types, in bucket order.
  SmallVector<Type> types;
  SmallVector<std::pair<OpOperand *, unsigned>> uses;
  Operation *first = nullptr;
};

struct TPShardParamsPass
    : public tp::impl::TPShardParamsBase<TPShardParamsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<func::FuncOp> step = requireEntry<func::FuncOp>(
        module, kTrainStepEntry,
        "tp-shard-params: no training step (run tp-build-train-step)");
    if (failed(step))
      return signalPassFailure();
    Block &body = step->getBody().front();
    SmallVector<GradBucketReduceScatterOp> buckets;
    step->walk([&](GradBucketReduceScatterOp bucket) {
      if (bucket.getMicroBatch())
        buckets.push_back(bucket);
    });
    if (buckets.empty()) {
      step->emitError("tp-shard-params: no bucket is reduced per "
                      "micro-batch (run tp-replica-grad-sync with zero=2)");
      return signalPassFailure();
    }
    auto losses = step->getOps<CrossEntropyOp>();
    if (!llvm::hasSingleElement(losses)) {
      step->emitError("tp-shard-params: the training step must have exactly "
                      "one tp.cross_entropy (the forward's end)");
      return signalPassFailure();
    }
    Operation *loss = *losses.begin();

    llvm::StringMap<BlockArgument> argOf = argumentsByFqn(*step);

    // Each bucket's reads, split at the loss for a layer's.
    SmallVector<Reads> forward, backward;
    for (GradBucketReduceScatterOp bucket : buckets) {
      std::optional<int64_t> layer = decoderLayerOf(bucket);
      Reads before{bucket, layer}, after{bucket, layer};
      for (auto [position, fqn] : llvm::enumerate(bucket.getFqns())) {
        BlockArgument arg = argOf.lookup(cast<StringAttr>(fqn).getValue());
        if (!arg) {
          bucket.emitError("tp-shard-params: parameter '")
              << cast<StringAttr>(fqn).getValue()
              << "' is not an argument of the training step";
          return signalPassFailure();
        }
        before.types.push_back(arg.getType());
        // Every use, gradient sinks included: they take the parameter's
        // shape from the gathered value, so nothing reads it whole.
        for (OpOperand &use : arg.getUses()) {
          Operation *at = body.findAncestorOpInBlock(*use.getOwner());
          Reads &reads = !layer || at->isBeforeInBlock(loss) ? before : after;
          reads.uses.push_back({&use, position});
          if (!reads.first || at->isBeforeInBlock(reads.first))
            reads.first = at;
        }
      }
      after.types = before.types;
      if (before.first)
        forward.push_back(std::move(before));
      if (after.first)
        backward.push_back(std::move(after));
    }
    gatherInOrder(forward);
    gatherInOrder(backward);
    if (failed(shardInInit(module, buckets)))
      return signalPassFailure();
    // The update writes the runs, which are all there is of a parameter
    // between steps: nothing to gather after it.
    FailureOr<FunctionOpInterface> update =
        lookupEntry(module, kOptimizerStepEntry);
    if (failed(update))
      return signalPassFailure();
    if (*update)
      update->walk([](ParamBucketAllGatherOp gather) { gather.erase(); });
  }

  /// In the init, each bucket's tp.param_bucket_shard right after the last
  /// op that reads one of its parameters (their broadcasts), so that the
  /// init holds one layer's whole parameters at a time.
  LogicalResult shardInInit(ModuleOp module,
                            ArrayRef<GradBucketReduceScatterOp> buckets) {
    FailureOr<func::FuncOp> init = requireEntry<func::FuncOp>(
        module, kInitEntry,
        "tp-shard-params: no init (run tp-broadcast-replicas)");
    if (failed(init))
      return failure();
    llvm::StringMap<BlockArgument> argOf = argumentsByFqn(*init);
    Block &body = init->getBody().front();
    for (GradBucketReduceScatterOp bucket : buckets) {
      Operation *last = nullptr;
      for (Attribute fqn : bucket.getFqns()) {
        BlockArgument arg = argOf.lookup(cast<StringAttr>(fqn).getValue());
        if (!arg || arg.use_empty())
          return bucket.emitError("tp-shard-params: parameter '")
                 << cast<StringAttr>(fqn).getValue()
                 << "' is not read by the init, which shards it";
        for (Operation *user : arg.getUsers()) {
          Operation *at = body.findAncestorOpInBlock(*user);
          if (!last || last->isBeforeInBlock(at))
            last = at;
        }
      }
      OpBuilder builder(last->getBlock(), std::next(last->getIterator()));
      int64_t element = bucket.getDtype().getIntOrFloatBitWidth() / 8;
      auto shard = ParamBucketShardOp::create(
          builder, bucket.getLoc(), bucket.getBucketAttr(),
          bucket.getDtypeAttr(), bucket.getFqnsAttr(),
          builder.getI64IntegerAttr(bucket.getPaddedBytesAttr().getInt() / 4 *
                                    element));
      setDecoderLayer(shard, decoderLayerOf(bucket));
    }
    return success();
  }

  /// One gather per entry, in the order of their first reads, the (k+1)-th
  /// issued right after the k-th's first read, before the rest of the k-th's
  /// compute (prefetch; one op into the layer, so that every layer's range
  /// of calls holds the next layer's gather and the layer loops roll them).
  void gatherInOrder(MutableArrayRef<Reads> all) {
    llvm::sort(all, [](const Reads &a, const Reads &b) {
      return a.first->isBeforeInBlock(b.first);
    });
    for (auto [k, reads] : llvm::enumerate(all)) {
      OpBuilder builder(reads.first);
      if (k > 0 && all[k - 1].first->isBeforeInBlock(reads.first))
        builder.setInsertionPointAfter(all[k - 1].first);
      GradBucketReduceScatterOp bucket = reads.bucket;
      int64_t element = bucket.getDtype().getIntOrFloatBitWidth() / 8;
      auto gather = ParamBucketGatherOp::create(
          builder, bucket.getLoc(), reads.types, bucket.getBucketAttr(),
          bucket.getDtypeAttr(), bucket.getFqnsAttr(),
          builder.getI64IntegerAttr(bucket.getPaddedBytesAttr().getInt() / 4 *
                                    element));
      setDecoderLayer(gather, reads.layer);
      for (auto [use, position] : reads.uses)
        use->set(gather.getResult(position));
    }
  }
};

} // namespace
