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
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/TypeSwitch.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPPARTITION
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

enum class State {
  Replicated,
  SplitLast,
  /// Split on dim 1, the sequence (sequence parallelism).
  SplitSequence,
  /// A partial sum not yet reduced: all-reduced when read whole,
  /// reduce-scattered by a split result annotation.
  Partial,
};

struct TPPartitionPass : public tp::impl::TPPartitionBase<TPPartitionPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grid = module.lookupSymbol<shard::GridOp>("tp");
    func::FuncOp func = module.lookupSymbol<func::FuncOp>("forward");
    if (!grid || !func || grid.getShape().size() != 1 ||
        ShapedType::isDynamic(grid.getShape()[0])) {
      module.emitError("tp-partition: expected shard.grid @tp of one static "
                       "axis and func.func @forward (run tp-apply-plan)");
      return signalPassFailure();
    }
    ranks = grid.getShape()[0];
    // Both ends are checked here, not only by the pass manager: MLIR is
    // built without assertions, and a rewrite on invalid IR fails late.
    if (failed(verify(module)) || failed(partition(func)) ||
        failed(verify(module)))
      signalPassFailure();
  }

  RankedTensorType withLast(Type type, int64_t last) {
    auto t = cast<RankedTensorType>(type);
    SmallVector<int64_t> shape(t.getShape());
    shape.back() = last;
    return RankedTensorType::get(shape, t.getElementType());
  }

  /// `type` with dimension `dim` cut to one rank's block, or multiplied
  /// back by the ranks; a static size that does not divide is an error.
  FailureOr<RankedTensorType> resized(Operation *op, Type type, int64_t dim,
                                      bool gather) {
    auto t = cast<RankedTensorType>(type);
    if (dim < 0 || dim >= t.getRank()) {
      op->emitError() << "tp-partition: " << type << " has no dimension " << dim
                      << " to split";
      return failure();
    }
    SmallVector<int64_t> shape(t.getShape());
    if (!ShapedType::isDynamic(shape[dim])) {
      if (!gather && shape[dim] % ranks) {
        op->emitError() << "tp-partition: "
                        << (dim == 1 ? "sequence length " : "last dimension ")
                        << shape[dim] << " is not divisible by tp " << ranks;
        return failure();
      }
      shape[dim] = gather ? shape[dim] * ranks : shape[dim] / ranks;
    }
    return RankedTensorType::get(shape, t.getElementType());
  }

  /// All ranks' blocks of `v` along `dim`, concatenated.
  FailureOr<Value> gathered(OpBuilder &b, Operation *op, Value v, int64_t dim) {
    FailureOr<RankedTensorType> type =
        resized(op, v.getType(), dim, /*gather=*/true);
    if (failed(type))
      return failure();
    return Value(shard::AllGatherOp::create(
        b, op->getLoc(), *type, FlatSymbolRefAttr::get(b.getContext(), "tp"),
        b.getDenseI16ArrayAttr({0}), v, b.getIndexAttr(dim)));
  }

  /// The all-reduce that completes partial sum `v`, made once, right after
  /// `v`'s producer, when something first reads `v` whole.
  Value completed(OpBuilder &b, Value v) {
    Value &sum = allReduced[v];
    if (!sum) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(v);
      sum = allReduce(b, v.getLoc(), v);
    }
    return sum;
  }

  /// A partial sum read once stays pending (its reader may be a sum with
  /// another partial, a scaling or an annotation); one read several times
  /// is completed at once and all its readers share the all-reduce.
  void markPartial(OpBuilder &b, Value v, llvm::DenseMap<Value, State> &state) {
    if (v.hasOneUse()) {
      state[v] = State::Partial;
      return;
    }
    Value sum = completed(b, v);
    v.replaceAllUsesExcept(sum, sum.getDefiningOp());
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

  Value allReduce(OpBuilder &b, Location loc, Value v) {
    return shard::AllReduceOp::create(
        b, loc, v.getType(), FlatSymbolRefAttr::get(b.getContext(), "tp"),
        b.getDenseI16ArrayAttr({0}), v,
        shard::ReductionKindAttr::get(b.getContext(),
                                      shard::ReductionKind::Sum));
  }

  LogicalResult partition(func::FuncOp func) {
    MLIRContext *ctx = func.getContext();
    OpBuilder builder(ctx);
    Block &body = func.getBody().front();

    // 1. Parameters: local shapes, shard records; annotations go.
    llvm::DenseMap<Value, int64_t> split; // parameter -> split dim
    for (Operation &op : llvm::make_early_inc_range(body)) {
      auto annotated = dyn_cast<shard::ShardOp>(op);
      if (!annotated)
        continue;
      auto arg = dyn_cast<BlockArgument>(annotated.getSrc());
      if (!arg)
        continue; // an activation: at its place in step 2
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
      // KV heads shared by a query group: fewer blocks than ranks.
      int64_t replicas = 1;
      if (auto r = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                      "tp.shard_replicas"))
        replicas = r.getInt();
      auto type = cast<RankedTensorType>(arg.getType());
      if (ranks % replicas || type.getDimSize(dim) % (ranks / replicas))
        return func.emitError()
               << "argument " << arg.getArgNumber() << ": dim " << dim << " of "
               << type << " does not split into " << ranks << " / " << replicas
               << " blocks";
      int64_t blocks = ranks / replicas;
      SmallVector<int64_t> shape(type.getShape());
      shape[dim] /= blocks;
      arg.setType(RankedTensorType::get(shape, type.getElementType()));
      func.setArgAttr(arg.getArgNumber(), "tp.shard_dim",
                      builder.getI64IntegerAttr(dim));
      func.setArgAttr(arg.getArgNumber(), "tp.shards",
                      builder.getI64IntegerAttr(blocks));
      split[arg] = dim;
    }
    auto splitDim = [&](Value v) -> int64_t {
      auto it = split.find(v);
      return it == split.end() ? -1 : it->second;
    };

    // 2. Activations, op by op.
    llvm::DenseMap<Value, State> state;
    auto stateOf = [&](Value v) {
      auto it = state.find(v);
      return it == state.end() ? State::Replicated : it->second;
    };
    for (Operation &op : llvm::make_early_inc_range(body)) {
      builder.setInsertionPointAfter(&op);
      // Partial sums stay pending through sums and scalings (base and LoRA
      // partials then share one reduction); any other reader completes
      // them with an all-reduce.
      bool keepsPartial =
          isa<shard::ShardOp, ScaleOp>(op) ||
          (isa<AddOp>(op) && llvm::all_of(op.getOperands(), [&](Value v) {
             return stateOf(v) == State::Partial;
           }));
      if (!keepsPartial)
        for (OpOperand &operand : op.getOpOperands())
          if (stateOf(operand.get()) == State::Partial)
            operand.set(completed(builder, operand.get()));
      LogicalResult ok =
          llvm::TypeSwitch<Operation *, LogicalResult>(&op)
              .Case([&](EmbeddingOp o) -> LogicalResult {
                int64_t d = splitDim(o.getTable());
                if (d < 0)
                  return success();
                if (d != 0)
                  return o.emitError("tp-partition: an embedding split on "
                                     "its hidden dimension is not supported");
                o.setVocabParallel(true);
                markPartial(builder, o.getResult(), state);
                return success();
              })
              .Case([&](LinearOp o) -> LogicalResult {
                int64_t d = splitDim(o.getWeight());
                State in = stateOf(o.getX());
                if (d < 0) {
                  // Per token: a sequence split carries through.
                  if (in == State::SplitLast)
                    return o.emitError("tp-partition: a replicated linear "
                                       "on an activation split on its last "
                                       "dimension");
                  state[o.getResult()] = in;
                  return success();
                }
                if (d == 0) {
                  if (in != State::Replicated)
                    return o.emitError("tp-partition: a column-split linear "
                                       "needs a replicated input (a "
                                       "sequence-split one is gathered by "
                                       "annotating it for its users)");
                  o.getResult().setType(
                      withLast(o.getResult().getType(),
                               o.getWeight().getType().getDimSize(0)));
                  state[o.getResult()] = State::SplitLast;
                  return success();
                }
                if (in != State::SplitLast)
                  return o.emitError("tp-partition: a row-split linear needs "
                                     "an input split on its last dimension");
                if (o.getBias())
                  return o.emitError("tp-partition: a row-split linear with "
                                     "a bias is not supported yet");
                markPartial(builder, o.getResult(), state);
                return success();
              })
              .Case([&](BiasAddOp o) -> LogicalResult {
                State in = stateOf(o.getX());
                if ((in == State::SplitLast) != (splitDim(o.getBias()) == 0))
                  return o.emitError("tp-partition: the bias and its input "
                                     "are split differently");
                o.getResult().setType(o.getX().getType());
                state[o.getResult()] = in;
                return success();
              })
              .Case([&](RmsNormOp o) -> LogicalResult {
                State in = stateOf(o.getX());
                if (in == State::SplitLast && !o.getGroupSizeAttr())
                  return o.emitError("tp-partition: a norm over a split "
                                     "last dimension needs its whole row");
                o.getResult().setType(o.getX().getType());
                state[o.getResult()] = in;
                return success();
              })
              .Case([&](RotaryOp o) -> LogicalResult {
                o.getResult().setType(o.getX().getType());
                state[o.getResult()] = stateOf(o.getX());
                return success();
              })
              .Case([&](AttentionOp o) -> LogicalResult {
                State q = stateOf(o.getQ()), k = stateOf(o.getK()),
                      v = stateOf(o.getV());
                if (q != k || k != v)
                  return o.emitError("tp-partition: q, k and v are split "
                                     "differently");
                if (q == State::SplitSequence)
                  return o.emitError("tp-partition: attention needs whole "
                                     "sequences (causal attention on "
                                     "sequence shards is wrong); gather "
                                     "before the q/k/v projections");
                o.getResult().setType(o.getQ().getType());
                if (q == State::SplitLast) {
                  // This rank's heads are what its projections produce (KV
                  // heads may be shared by a query group).
                  int64_t d = o.getHeadDim(),
                          heads = o.getNumHeadsAttr().getInt(),
                          kv = o.getNumKvHeadsAttr().getInt();
                  int64_t qf = o.getQ().getType().getShape().back(),
                          kf = o.getK().getType().getShape().back();
                  int64_t localHeads = qf / d, localKv = kf / d;
                  if (qf % d || kf % d || heads != localHeads * ranks ||
                      localKv < 1 || localHeads % localKv ||
                      (kv % ranks == 0 ? localKv * ranks != kv
                                       : localKv != 1 || ranks % kv))
                    return o.emitError()
                           << "tp-partition: " << heads << " heads / " << kv
                           << " KV heads do not split into " << ranks
                           << " (this rank's projections give " << qf << " and "
                           << kf << " features)";
                  o.setNumHeadsAttr(builder.getI64IntegerAttr(localHeads));
                  o.setNumKvHeadsAttr(builder.getI64IntegerAttr(localKv));
                }
                state[o.getResult()] = q;
                return success();
              })
              .Case<SiluOp, GeluOp, ReluSquaredOp, ScaleOp>(
                  [&](Operation *o) -> LogicalResult {
                    o->getResult(0).setType(o->getOperand(0).getType());
                    state[o->getResult(0)] = stateOf(o->getOperand(0));
                    return success();
                  })
              .Case<AddOp, MulOp>([&](Operation *o) -> LogicalResult {
                if (stateOf(o->getOperand(0)) != stateOf(o->getOperand(1)))
                  return o->emitError("tp-partition: operands are split "
                                      "differently");
                o->getResult(0).setType(o->getOperand(0).getType());
                state[o->getResult(0)] = stateOf(o->getOperand(0));
                return success();
              })
              .Case([&](Mamba2MixerOp o) -> LogicalResult {
                for (Value v : o->getOperands())
                  if (splitDim(v) >= 0 || stateOf(v) != State::Replicated)
                    return o.emitError("tp-partition: the Mamba2 mixer runs "
                                       "replicated only");
                return success();
              })
              .Case([&](func::ReturnOp o) -> LogicalResult {
                builder.setInsertionPoint(o);
                for (OpOperand &operand : o->getOpOperands()) {
                  State in = stateOf(operand.get());
                  if (in != State::SplitSequence && in != State::SplitLast)
                    continue;
                  int64_t rank =
                      cast<RankedTensorType>(operand.get().getType()).getRank();
                  FailureOr<Value> full =
                      gathered(builder, o, operand.get(),
                               in == State::SplitSequence ? 1 : rank - 1);
                  if (failed(full))
                    return failure();
                  operand.set(*full);
                }
                return success();
              })
              .Case([&](shard::ShardOp o) -> LogicalResult {
                return partitionActivation(builder, o, state);
              })
              .Case<shard::ShardingOp, shard::AllReduceOp, shard::AllGatherOp,
                    shard::ReduceScatterOp>(
                  [](Operation *) { return success(); })
              .Default([](Operation *o) -> LogicalResult {
                return o->emitError("tp-partition: no partitioning rule for ")
                       << o->getName();
              });
      if (failed(ok))
        return failure();
    }
    func.setType(
        FunctionType::get(ctx, body.getArgumentTypes(), func.getResultTypes()));
    return success();
  }

  /// An activation annotation of tp-apply-plan's sequence parallelism: a
  /// sequence-split result of a row-split op is reduce-scattered; a value
  /// its users want replicated is all-gathered when sequence-split.
  LogicalResult partitionActivation(OpBuilder &b, shard::ShardOp annotated,
                                    llvm::DenseMap<Value, State> &state) {
    FailureOr<SmallVector<int64_t>> dims = splitDims(annotated);
    if (failed(dims))
      return failure();
    Value src = annotated.getSrc();
    auto it = state.find(src);
    State in = it == state.end() ? State::Replicated : it->second;
    int64_t rank = cast<RankedTensorType>(src.getType()).getRank();
    b.setInsertionPoint(annotated);
    Value local = src;
    auto grid = FlatSymbolRefAttr::get(b.getContext(), "tp");
    if (dims->empty()) {
      // Wanted whole (a replicated result or operand): gather a split,
      // complete a partial sum.
      if (in == State::SplitSequence || in == State::SplitLast) {
        FailureOr<Value> full = gathered(
            b, annotated, src, in == State::SplitSequence ? 1 : rank - 1);
        if (failed(full))
          return failure();
        local = *full;
      } else if (in == State::Partial) {
        local = completed(b, src);
      }
    } else if (!annotated.getAnnotateForUsers() && dims->size() == 1 &&
               ((*dims)[0] == 1 || (*dims)[0] == rank - 1)) {
      // Split on the sequence (sequence parallelism) or on the last
      // dimension: a partial sum is reduce-scattered there (LoRA's rank
      // under Rowwise); a value already split so stays.
      int64_t axis = (*dims)[0];
      State split = axis == rank - 1 ? State::SplitLast : State::SplitSequence;
      if (in == split) {
        // already this rank's block
      } else if (in != State::Partial) {
        return annotated.emitError("tp-partition: only the partial result "
                                   "of a row-split op is split here");
      } else {
        FailureOr<RankedTensorType> localType =
            resized(annotated, src.getType(), axis, /*gather=*/false);
        if (failed(localType))
          return failure();
        local = shard::ReduceScatterOp::create(
            b, annotated.getLoc(), *localType, grid,
            b.getDenseI16ArrayAttr({0}), src,
            shard::ReductionKindAttr::get(b.getContext(),
                                          shard::ReductionKind::Sum),
            b.getIndexAttr(axis));
        state[local] = split;
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

  int64_t ranks = 1;
  /// Partial sums and their all-reduce.
  llvm::DenseMap<Value, Value> allReduced;
};

} // namespace
