//===- ShardParams.cpp - parameters gathered per layer where read ---------===//
//
// ZeRO stage 3 keeps every parameter as data-parallel runs and gathers a
// decoder layer's parameters only while the layer computes. The units are
// the per-layer buckets of stage 2 (tp-replica-grad-sync, zero = 2), whose
// runs the reduce-scatters and the update already use; this pass makes the
// training step read each parameter through a gather of its bucket.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
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
    if (failed(checkOneBucketPerLayer(buckets)))
      return signalPassFailure();

    llvm::StringMap<BlockArgument> argOf;
    for (BlockArgument arg : step->getArguments())
      if (auto fqn = step->getArgAttrOfType<StringAttr>(
              arg.getArgNumber(), TPDialect::kFqnAttrName))
        argOf[fqn.getValue()] = arg;

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
        for (OpOperand &use : arg.getUses()) {
          // A gradient sink names its parameter; it does not read it.
          if (auto acc = dyn_cast<AccumulateGradOp>(use.getOwner()))
            if (&acc.getParamMutable() == &use)
              continue;
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
  }

  /// A layer is gathered as one bucket per dtype: one that fills more is
  /// an error naming it.
  LogicalResult
  checkOneBucketPerLayer(ArrayRef<GradBucketReduceScatterOp> buckets) {
    DenseMap<std::pair<int64_t, Type>, GradBucketReduceScatterOp> seen;
    for (GradBucketReduceScatterOp bucket : buckets) {
      int64_t layer = decoderLayerOf(bucket).value_or(-1);
      auto [it, fresh] = seen.insert({{layer, bucket.getDtype()}, bucket});
      if (fresh)
        continue;
      return bucket.emitError("tp-shard-params: the ")
             << (layer < 0 ? std::string("parameters outside the layers")
                           : "parameters of layer " + std::to_string(layer))
             << " (" << bucket.getDtype()
             << ") fill more than one bucket (buckets "
             << it->second.getBucketAttr().getInt() << " and "
             << bucket.getBucketAttr().getInt()
             << "): a layer is gathered as one; raise --bucket-mib";
    }
    return success();
  }

  /// One gather per entry, in the order of their first reads, the (k+1)-th
  /// issued right before the k-th's first read (prefetch).
  void gatherInOrder(MutableArrayRef<Reads> all) {
    llvm::sort(all, [](const Reads &a, const Reads &b) {
      return a.first->isBeforeInBlock(b.first);
    });
    for (auto [k, reads] : llvm::enumerate(all)) {
      Operation *at = k == 0 ? reads.first : all[k - 1].first;
      OpBuilder builder(at);
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
