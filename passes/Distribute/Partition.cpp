//===- Partition.cpp - the program of one tensor-parallel rank ------------===//
//
// A small dataflow partitioner for the tp building blocks: the placements
// are fixed by the plan, so each op's local form and the collectives
// follow from whether its inputs are replicated, split on their last
// dimension, split on the sequence (dim 1, sequence parallelism), or
// partial sums. (Upstream shard-partition needs every value
// annotated and silently all-gathers weights; see
// ../shared/spec/shard-interface.md.)
//
//===----------------------------------------------------------------------===//

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPPARTITION
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

struct TPPartitionPass : public tp::impl::TPPartitionBase<TPPartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grid = module.lookupSymbol<shard::GridOp>("tp");
    FailureOr<FunctionOpInterface> entry = lookupEntry(module, kForwardEntry);
    if (failed(entry))
      return signalPassFailure();
    auto func = dyn_cast_or_null<func::FuncOp>(entry->getOperation());
    if (!grid || !func || grid.getShape().size() != 1 ||
        ShapedType::isDynamic(grid.getShape()[0])) {
      module.emitError("tp-partition: expected shard.grid @tp of one static "
                       "axis and func.func @forward (run tp-apply-plan)");
      return signalPassFailure();
    }
    // The training step (when there is one) is partitioned by the same
    // rules: its backward collectives follow from the forward's layouts.
    FailureOr<FunctionOpInterface> trainStep =
        lookupEntry(module, kTrainStepEntry);
    if (failed(trainStep))
      return signalPassFailure();
    SmallVector<func::FuncOp, 2> funcs = {func};
    if (*trainStep) {
      auto train = dyn_cast<func::FuncOp>(trainStep->getOperation());
      if (!train) {
        trainStep->getOperation()->emitError(
            "tp-partition: the training step must be a func.func");
        return signalPassFailure();
      }
      funcs.push_back(train);
    }
    // Both ends are checked here, not only by the pass manager: MLIR is
    // built without assertions, and a rewrite on invalid IR fails late.
    if (failed(verify(module)))
      return signalPassFailure();
    for (func::FuncOp f : funcs) {
      PartitionState state(module.getContext(), grid.getShape()[0]);
      if (failed(partition(f, state)))
        return signalPassFailure();
    }
    if (failed(verify(module)))
      signalPassFailure();
  }

  /// Split dims of an activation annotation; failure if unreadable.
  FailureOr<SmallVector<int64_t>> splitDims(shard::ShardOp annotated) {
    auto sharding = annotated.getSharding().getDefiningOp<shard::ShardingOp>();
    if (!sharding)
      return annotated.emitError("tp-partition: the sharding is not a "
                                 "shard.sharding op");
    SmallVector<int64_t> dims;
    for (auto [d, axes] : llvm::enumerate(sharding.getSplitAxes().getAxes())) {
      if (axes.empty())
        continue;
      if (axes.asArrayRef() != ArrayRef<int16_t>{0})
        return annotated.emitError("tp-partition: only grid axis 0 of @tp "
                                   "splits values");
      dims.push_back(d);
    }
    return dims;
  }

  /// The parameters' local shapes and shard records; their annotations go.
  LogicalResult partitionParams(func::FuncOp func, PartitionState &state) {
    Builder builder(func.getContext());
    int64_t ranks = state.getRanks();
    Block &body = func.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      auto annotated = dyn_cast<shard::ShardOp>(op);
      if (!annotated)
        continue;
      auto arg = dyn_cast<BlockArgument>(annotated.getSrc());
      if (!arg)
        continue; // an activation: at its place in the op walk
      auto sharding =
          annotated.getSharding().getDefiningOp<shard::ShardingOp>();
      if (!sharding || !annotated.getAnnotateForUsers())
        return annotated.emitError("tp-partition: a parameter annotation "
                                   "must be a shard.sharding for its users");
      int64_t dim = -1;
      for (auto [d, axes] : llvm::enumerate(sharding.getSplitAxes().getAxes()))
        if (!axes.empty())
          dim = d;
      annotated.getResult().replaceAllUsesWith(arg);
      annotated.erase();
      if (sharding.use_empty())
        sharding.erase();
      if (dim < 0)
        continue;
      // The plan's placement (hand-written IR may have only the
      // annotation); KV heads shared by a query group: fewer blocks than
      // ranks.
      auto placement = func.getArgAttrOfType<PlacementAttr>(
          arg.getArgNumber(), TPDialect::kPlacementAttrName);
      if (!placement)
        placement = PlacementAttr::getSplit(func.getContext(), dim, 1, "");
      if (placement.getSplitDim() != dim || placement.isPartitioned())
        return func.emitError()
               << "argument " << arg.getArgNumber() << ": annotated split on "
               << "dim " << dim << " but placed " << placement;
      int64_t replicas = placement.getReplicas();
      auto type = cast<RankedTensorType>(arg.getType());
      if (type.isDynamicDim(dim))
        return func.emitError()
               << "argument " << arg.getArgNumber() << ": dim " << dim << " of "
               << type
               << " is dynamic; only parameters (of static shape) are split "
                  "by an annotation of the argument";
      if (placement.isUneven()) {
        // Each rank's range in a block of the largest (tp-apply-plan made
        // the ranges; they must fit this grid and this parameter).
        if (static_cast<int64_t>(placement.getSizes().size()) != ranks ||
            placement.getGlobalSize(type.getDimSize(dim)) !=
                type.getDimSize(dim))
          return func.emitError()
                 << "argument " << arg.getArgNumber() << ": " << placement
                 << " does not split dim " << dim << " of " << type << " over "
                 << ranks << " ranks";
        SmallVector<int64_t> shape(type.getShape());
        shape[dim] = placement.getUnevenExtent();
        arg.setType(RankedTensorType::get(shape, type.getElementType()));
        func.setArgAttr(arg.getArgNumber(), TPDialect::kPlacementAttrName,
                        placement.withBlocks(ranks));
        state.setParamSplitDim(arg, dim);
        state.setUneven(arg, {SmallVector<int64_t>(placement.getStarts()),
                              SmallVector<int64_t>(placement.getSizes())});
        continue;
      }
      if (ranks % replicas || type.getDimSize(dim) % (ranks / replicas))
        return func.emitError()
               << "argument " << arg.getArgNumber() << ": dim " << dim << " of "
               << type << " does not split into " << ranks << " / " << replicas
               << " blocks";
      int64_t blocks = ranks / replicas;
      SmallVector<int64_t> shape(type.getShape());
      shape[dim] /= blocks;
      arg.setType(RankedTensorType::get(shape, type.getElementType()));
      func.setArgAttr(arg.getArgNumber(), TPDialect::kPlacementAttrName,
                      placement.withBlocks(blocks));
      state.setParamSplitDim(arg, dim);
    }
    return success();
  }

  LogicalResult partition(func::FuncOp func, PartitionState &state) {
    if (failed(partitionParams(func, state)))
      return failure();
    // Activations, op by op: each tp op by its PartitionOpInterface.
    Block &body = func.getBody().front();
    for (Operation &op : llvm::make_early_inc_range(body)) {
      state.getBuilder().setInsertionPointAfter(&op);
      // Partial sums stay pending through annotations and the ops linear
      // in them (base and LoRA partials then share one reduction); any
      // other reader completes them with an all-reduce.
      auto partitionable = dyn_cast<PartitionOpInterface>(op);
      bool keepsPartial =
          isa<shard::ShardOp>(op) ||
          (partitionable && partitionable.keepsPartialSums(state));
      if (!keepsPartial)
        for (OpOperand &operand : op.getOpOperands())
          if (state.getLayout(operand.get()) == ShardLayout::Partial)
            operand.set(state.completed(operand.get()));
      LogicalResult ok = success();
      if (partitionable)
        ok = partitionable.partition(state);
      else if (auto ret = dyn_cast<func::ReturnOp>(op))
        ok = partitionReturn(ret, state);
      else if (auto annotated = dyn_cast<shard::ShardOp>(op))
        ok = partitionActivation(annotated, state);
      else if (!isa<shard::ShardingOp, shard::AllReduceOp, shard::AllGatherOp,
                    shard::ReduceScatterOp>(op))
        ok = op.emitError("tp-partition: no partitioning rule for ")
             << op.getName();
      if (failed(ok))
        return failure();
    }
    // What partitioning replaced (tp.hold_like) is left unused.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (!isa<RuntimeCallOpInterface>(op) && isOpTriviallyDead(&op))
        op.erase();
    func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                   func.getResultTypes()));
    return success();
  }

  /// The program returns whole values: split results are gathered.
  LogicalResult partitionReturn(func::ReturnOp ret, PartitionState &state) {
    state.getBuilder().setInsertionPoint(ret);
    for (OpOperand &operand : ret->getOpOperands()) {
      ShardLayout in = state.getLayout(operand.get());
      if (in != ShardLayout::SplitSequence && in != ShardLayout::SplitLast)
        continue;
      int64_t rank = cast<RankedTensorType>(operand.get().getType()).getRank();
      FailureOr<Value> full = state.gathered(
          ret, operand.get(), in == ShardLayout::SplitSequence ? 1 : rank - 1);
      if (failed(full))
        return failure();
      operand.set(*full);
    }
    return success();
  }

  /// The uneven ranges of the row-split linears that read `annotated`'s
  /// result (through LoRA's scale); null when they split evenly.
  static const PartitionState::UnevenSplit *
  unevenRangesOfReaders(shard::ShardOp annotated, const PartitionState &state) {
    SmallVector<Operation *> readers(annotated->getUsers());
    while (!readers.empty()) {
      Operation *reader = readers.pop_back_val();
      if (isa<ScaleOp>(reader))
        readers.append(reader->user_begin(), reader->user_end());
      else if (auto linear = dyn_cast<LinearOp>(reader);
               linear && state.getParamSplitDim(linear.getWeight()) == 1)
        if (const PartitionState::UnevenSplit *split =
                state.getUneven(linear.getWeight()))
          return split;
    }
    return nullptr;
  }

  /// An activation annotation of tp-apply-plan's sequence parallelism: a
  /// sequence-split result of a row-split op is reduce-scattered; a value
  /// its users want replicated is all-gathered when sequence-split.
  LogicalResult partitionActivation(shard::ShardOp annotated,
                                    PartitionState &state) {
    FailureOr<SmallVector<int64_t>> dims = splitDims(annotated);
    if (failed(dims))
      return failure();
    Value src = annotated.getSrc();
    ShardLayout in = state.getLayout(src);
    int64_t rank = cast<RankedTensorType>(src.getType()).getRank();
    state.getBuilder().setInsertionPoint(annotated);
    Value local = src;
    if (dims->empty()) {
      // Wanted whole (a replicated result or operand): gather a split,
      // complete a partial sum.
      if (in == ShardLayout::SplitSequence || in == ShardLayout::SplitLast) {
        FailureOr<Value> full = state.gathered(
            annotated, src, in == ShardLayout::SplitSequence ? 1 : rank - 1);
        if (failed(full))
          return failure();
        local = *full;
      } else if (in == ShardLayout::Partial) {
        local = state.completed(src);
      }
    } else if (!annotated.getAnnotateForUsers() && dims->size() == 1 &&
               ((*dims)[0] == 1 || (*dims)[0] == rank - 1)) {
      // Split on the sequence (sequence parallelism) or on the last
      // dimension: a partial sum is reduce-scattered there (LoRA's rank
      // under Rowwise); a value already split so stays.
      int64_t axis = (*dims)[0];
      ShardLayout split = axis == rank - 1 ? ShardLayout::SplitLast
                                           : ShardLayout::SplitSequence;
      if (in == split) {
        // already this rank's block
      } else if (in != ShardLayout::Partial) {
        return annotated.emitError("tp-partition: only the partial result "
                                   "of a row-split op is split here");
      } else {
        // Over the readers' uneven ranges when they have them (a LoRA B
        // whose rank is split unevenly).
        FailureOr<Value> scattered = state.reduceScattered(
            annotated, src, axis,
            axis == rank - 1 ? unevenRangesOfReaders(annotated, state)
                             : nullptr);
        if (failed(scattered))
          return failure();
        local = *scattered;
        state.setLayout(local, split);
      }
    } else if (annotated.getAnnotateForUsers() && dims->size() == 1 &&
               ((*dims)[0] == 1 || (*dims)[0] == rank - 1) &&
               (in == ShardLayout::Replicated ||
                in == ((*dims)[0] == rank - 1 ? ShardLayout::SplitLast
                                              : ShardLayout::SplitSequence))) {
      // Wanted split by its users (a row-split linear with a replicated
      // input, transformers' rowwise_rep; a sequence-parallel norm): a
      // replicated value is sliced locally, a split one stays.
      if (in == ShardLayout::Replicated) {
        int64_t axis = (*dims)[0];
        FailureOr<Value> block = state.sliced(
            annotated, src, axis,
            axis == rank - 1 ? unevenRangesOfReaders(annotated, state)
                             : nullptr);
        if (failed(block))
          return failure();
        local = *block;
        state.setLayout(local, axis == rank - 1 ? ShardLayout::SplitLast
                                                : ShardLayout::SplitSequence);
      }
    } else {
      return annotated.emitError("tp-partition: unsupported activation "
                                 "annotation (a sequence- or last-dimension-"
                                 "split result, or a replicated value)");
    }
    annotated.getResult().replaceAllUsesWith(local);
    Value sharding = annotated.getSharding();
    annotated.erase();
    if (sharding.use_empty())
      sharding.getDefiningOp()->erase();
    return success();
  }
};

} // namespace
