//===- TPPartitionRules.cpp - each tp op on one tensor-parallel rank ------===//
//
// PartitionOpInterface of every tp op: its local types and result layouts
// from its operands' layouts (see TPInterfaces.td). tp-partition walks the
// program and asks each op; the collectives come from PartitionState.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"

#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace mlir::tp;

/// `type` with its last dimension set to `last`.
static RankedTensorType withLast(Type type, int64_t last) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape.back() = last;
  return RankedTensorType::get(shape, t.getElementType());
}

/// The split dimension of `layout` for a value of `rank` (-1: none).
static int64_t splitDimOf(ShardLayout layout, int64_t rank) {
  return layout == ShardLayout::SplitLast       ? rank - 1
         : layout == ShardLayout::SplitSequence ? 1
                                                : -1;
}

/// `to` takes `from`'s uneven split, if it has one.
static void copyUneven(PartitionState &state, Value from, Value to) {
  if (const PartitionState::UnevenSplit *split = state.getUneven(from))
    state.setUneven(to, *split);
}

/// Sets `op`'s vocab_starts and vocab_sizes to `split`'s ranges (an
/// uneven vocabulary).
template <typename VocabOp>
static void setVocabRanges(VocabOp op,
                           const PartitionState::UnevenSplit *split) {
  if (!split)
    return;
  Builder b(op.getContext());
  op.setVocabStartsAttr(b.getDenseI64ArrayAttr(split->starts));
  op.setVocabSizesAttr(b.getDenseI64ArrayAttr(split->sizes));
}

/// Elementwise binary ops need their operands held alike.
static LogicalResult partitionElementwise(Operation *op,
                                          PartitionState &state) {
  Value first = op->getOperand(0);
  for (Value operand : op->getOperands().drop_front())
    if (state.getLayout(operand) != state.getLayout(first) ||
        state.getParamSplitDim(operand) != state.getParamSplitDim(first) ||
        !state.splitAlike(operand, first))
      return op->emitError("tp-partition: operands are split differently");
  state.propagate(op->getOperand(0), op->getResult(0));
  return success();
}

LogicalResult EmbeddingOp::partition(PartitionState &state) {
  int64_t d = state.getParamSplitDim(getTable());
  if (d < 0)
    return success();
  if (d == 1) {
    // Hidden features split (transformers' embedding_colwise): each rank
    // looks up its slice of every vector.
    getResult().setType(
        withLast(getResult().getType(), getTable().getType().getDimSize(1)));
    state.setLayout(getResult(), ShardLayout::SplitLast);
    copyUneven(state, getTable(), getResult());
    return success();
  }
  if (d == 0 && getResult().getType().getShape().back() !=
                    getTable().getType().getDimSize(1))
    return emitError("tp-partition: a vocabulary-split embedding's rows are "
                     "whole");
  setVocabParallel(true);
  setVocabRanges(*this, state.getUneven(getTable()));
  state.markPartial(getResult());
  return success();
}

LogicalResult LinearOp::partition(PartitionState &state) {
  int64_t d = state.getParamSplitDim(getWeight());
  ShardLayout in = state.getLayout(getX());
  if (d < 0) {
    // Per token: a sequence split carries through.
    if (in == ShardLayout::SplitLast)
      return emitError("tp-partition: a replicated linear on an activation "
                       "split on its last dimension");
    state.setLayout(getResult(), in);
    return success();
  }
  if (d == 0) {
    if (in != ShardLayout::Replicated)
      return emitError("tp-partition: a column-split linear needs a "
                       "replicated input (a sequence-split one is gathered "
                       "by annotating it for its users)");
    getResult().setType(
        withLast(getResult().getType(), getWeight().getType().getDimSize(0)));
    state.setLayout(getResult(), ShardLayout::SplitLast);
    copyUneven(state, getWeight(), getResult());
    return success();
  }
  if (in != ShardLayout::SplitLast)
    return emitError("tp-partition: a row-split linear needs an input split "
                     "on its last dimension")
           << (in == ShardLayout::Replicated
                   ? "; its input is replicated (no column-split module "
                     "produces it, e.g. after a fused projection's parts): "
                     "plan the module as rowwise with input_layouts "
                     "\"replicate\" (transformers' rowwise_split_input) so "
                     "that each rank takes its block"
                   : "");
  if (!state.splitAlike(getX(), getWeight()))
    return emitError("tp-partition: a row-split linear's input and weight "
                     "are split over different ranges (an uneven split "
                     "reaches a row-split linear only from the column-split "
                     "one it pairs with)");
  if (getBias())
    return emitError("tp-partition: a row-split linear must add its bias "
                     "after the reduction (run tp-lower-linear, which "
                     "splits it into a tp.bias_add)");
  state.markPartial(getResult());
  return success();
}

LogicalResult BiasAddOp::partition(PartitionState &state) {
  ShardLayout in = state.getLayout(getX());
  if ((in == ShardLayout::SplitLast) !=
          (state.getParamSplitDim(getBias()) == 0) ||
      (in == ShardLayout::SplitLast && !state.splitAlike(getX(), getBias())))
    return emitError("tp-partition: the bias and its input are split "
                     "differently");
  state.propagate(getX(), getResult());
  return success();
}

LogicalResult RmsNormOp::partition(PartitionState &state) {
  if (state.getLayout(getX()) == ShardLayout::SplitLast && !getGroupSizeAttr())
    return emitError("tp-partition: a norm over a split last dimension needs "
                     "its whole row");
  state.propagate(getX(), getResult());
  return success();
}

LogicalResult RotaryOp::partition(PartitionState &state) {
  state.propagate(getX(), getResult());
  return success();
}

/// tp.attention and its backward on one rank: q, k, v (and the output
/// gradient) held alike; on split heads, this rank's head counts.
template <typename AttentionLikeOp>
static LogicalResult partitionAttention(AttentionLikeOp op,
                                        PartitionState &state,
                                        ArrayRef<Value> operands) {
  ShardLayout q = state.getLayout(op.getQ());
  for (Value v : operands)
    if (state.getLayout(v) != q)
      return op.emitError("tp-partition: q, k and v are split differently");
  if (q == ShardLayout::SplitSequence)
    return op.emitError("tp-partition: attention needs whole sequences "
                        "(causal attention on sequence shards is wrong); "
                        "gather before the q/k/v projections");
  if (q != ShardLayout::SplitLast)
    return success();
  // This rank's heads are what its projections produce (KV heads may be
  // shared by a query group).
  int64_t ranks = state.getRanks();
  int64_t d = op.getHeadDim(), heads = op.getNumHeads(),
          kv = op.getNumKvHeads();
  int64_t qf = op.getQ().getType().getShape().back(),
          kf = op.getK().getType().getShape().back();
  int64_t localHeads = qf / d, localKv = kf / d;
  // Uneven heads (tp-apply-plan's allow-uneven) come in padded blocks
  // whose query groups line up with the KV heads by construction; the
  // ranges sum to the heads.
  const PartitionState::UnevenSplit *uneven = state.getUneven(op.getQ());
  int64_t unevenHeads = 0;
  if (uneven)
    for (int64_t size : uneven->sizes)
      unevenHeads += size;
  bool evenMismatch =
      !uneven && !state.getUneven(op.getK()) &&
      (heads != localHeads * ranks ||
       (kv % ranks == 0 ? localKv * ranks != kv : localKv != 1 || ranks % kv));
  bool unevenMismatch = uneven && unevenHeads != heads * d;
  if (qf % d || kf % d || localKv < 1 || localHeads % localKv || evenMismatch ||
      unevenMismatch)
    return op.emitError() << "tp-partition: " << heads << " heads / " << kv
                          << " KV heads do not split into " << ranks
                          << " (this rank's projections give " << qf << " and "
                          << kf << " features)";
  Builder b(op.getContext());
  op.setNumHeadsAttr(b.getI64IntegerAttr(localHeads));
  op.setNumKvHeadsAttr(b.getI64IntegerAttr(localKv));
  return success();
}

LogicalResult AttentionOp::partition(PartitionState &state) {
  state.propagate(getQ(), getResult());
  if (failed(partitionAttention(*this, state, {getK(), getV()})))
    return failure();
  // The log-sum-exp is per head, the last dimension: split as q's heads.
  if (Value lse = getLse()) {
    ArrayRef<int64_t> q = getQ().getType().getShape();
    lse.setType(RankedTensorType::get({q[0], q[1], getNumHeadsAttr().getInt()},
                                      getElementTypeOrSelf(lse.getType())));
    state.setLayout(lse, state.getLayout(getQ()));
  }
  return success();
}

LogicalResult Mamba2MixerOp::partition(PartitionState &state) {
  for (Value v : getOperands())
    if (state.getParamSplitDim(v) >= 0 ||
        state.getLayout(v) != ShardLayout::Replicated)
      return emitError("tp-partition: the Mamba2 mixer runs replicated only");
  return success();
}

// The unary elementwise ops propagate their operand's layout (TPOps.td).

/// A scaled partial sum is a partial sum (LoRA's alpha / r).
bool ScaleOp::keepsPartialSums(const PartitionState &) { return true; }

LogicalResult AddOp::partition(PartitionState &state) {
  return partitionElementwise(*this, state);
}

/// The sum of partial sums is a partial sum (base + LoRA under Rowwise).
bool AddOp::keepsPartialSums(const PartitionState &state) {
  return llvm::all_of(getOperands(), [&](Value v) {
    return state.getLayout(v) == ShardLayout::Partial;
  });
}

LogicalResult MulOp::partition(PartitionState &state) {
  return partitionElementwise(*this, state);
}

//===----------------------------------------------------------------------===//
// Training step
//===----------------------------------------------------------------------===//

/// The layout of a gradient that sums over every token: split like the
/// parameter it is the gradient of (`splitDim`), replicated, or, when the
/// tokens themselves are split over the ranks, a partial sum.
static LogicalResult setTokenSumLayout(Operation *op, PartitionState &state,
                                       Value result, ShardLayout tokens,
                                       int64_t splitDim,
                                       Value splitFrom = nullptr) {
  if (tokens == ShardLayout::SplitSequence) {
    if (splitDim >= 0)
      return op->emitError("tp-partition: a gradient both split and summed "
                           "over sequence shards");
    state.markPartial(result);
    return success();
  }
  if (splitDim >= 0)
    state.setParamSplitDim(result, splitDim);
  if (splitFrom)
    copyUneven(state, splitFrom, result);
  return success();
}

LogicalResult CrossEntropyOp::partition(PartitionState &state) {
  ShardLayout in = state.getLayout(getLogits());
  if (in == ShardLayout::SplitSequence)
    return emitError("tp-partition: the loss needs whole sequences (each "
                     "position's label is the next token)");
  // Split on the vocabulary: the op's own reductions make both results
  // whole on every rank.
  setVocabParallel(in == ShardLayout::SplitLast);
  setVocabRanges(*this, state.getUneven(getLogits()));
  return success();
}

LogicalResult CrossEntropyGradOp::partition(PartitionState &state) {
  setVocabParallel(state.getLayout(getLogits()) == ShardLayout::SplitLast);
  setVocabRanges(*this, state.getUneven(getLogits()));
  state.propagate(getLogits(), getResult());
  return success();
}

LogicalResult LinearGradInputOp::partition(PartitionState &state) {
  int64_t d = state.getParamSplitDim(getWeight());
  ShardLayout dy = state.getLayout(getDy());
  auto local = withLast(getDy().getType(), getWeight().getType().getDimSize(1));
  getResult().setType(local);
  if (d < 0) {
    if (dy == ShardLayout::SplitLast)
      return emitError("tp-partition: the gradient of a replicated linear's "
                       "output is split on its last dimension");
    state.setLayout(getResult(), dy);
  } else if (d == 0) {
    if (dy != ShardLayout::SplitLast)
      return emitError("tp-partition: a column-split linear's output "
                       "gradient must be split on its last dimension");
    if (!state.splitAlike(getDy(), getWeight()))
      return emitError("tp-partition: a column-split linear's output "
                       "gradient and weight are split over different ranges");
    state.markPartial(getResult());
  } else {
    if (dy != ShardLayout::Replicated)
      return emitError("tp-partition: a row-split linear's output gradient "
                       "must be replicated");
    state.setLayout(getResult(), ShardLayout::SplitLast);
    copyUneven(state, getWeight(), getResult());
  }
  return success();
}

LogicalResult LinearGradWeightOp::partition(PartitionState &state) {
  ShardLayout dy = state.getLayout(getDy()), x = state.getLayout(getX());
  getResult().setType(RankedTensorType::get(
      {getDy().getType().getShape().back(), getX().getType().getShape().back()},
      getResult().getType().getElementType()));
  if (dy == ShardLayout::SplitLast && x != ShardLayout::SplitLast)
    return setTokenSumLayout(*this, state, getResult(), x, 0, getDy());
  if (x == ShardLayout::SplitLast && dy != ShardLayout::SplitLast)
    return setTokenSumLayout(*this, state, getResult(), dy, 1, getX());
  if (dy != x || dy == ShardLayout::SplitLast)
    return emitError("tp-partition: a weight gradient from an output "
                     "gradient and an input split differently");
  return setTokenSumLayout(*this, state, getResult(), dy, -1);
}

LogicalResult SumLeadingOp::partition(PartitionState &state) {
  ShardLayout in = state.getLayout(getX());
  getResult().setType(
      RankedTensorType::get({getX().getType().getShape().back()},
                            getResult().getType().getElementType()));
  return setTokenSumLayout(*this, state, getResult(), in,
                           in == ShardLayout::SplitLast ? 0 : -1, getX());
}

LogicalResult EmbeddingGradOp::partition(PartitionState &state) {
  int64_t d = state.getParamSplitDim(getTable());
  ShardLayout dy = state.getLayout(getDy());
  getResult().setType(getTable().getType());
  if (dy != (d == 1 ? ShardLayout::SplitLast : ShardLayout::Replicated) ||
      (d == 1 && !state.splitAlike(getDy(), getTable())))
    return emitError("tp-partition: the embedding's output gradient is not "
                     "held as its table is split");
  setVocabParallel(d == 0);
  if (d == 0)
    setVocabRanges(*this, state.getUneven(getTable()));
  if (d >= 0)
    state.setParamSplitDim(getResult(), d);
  copyUneven(state, getTable(), getResult());
  return success();
}

LogicalResult RmsNormGradOp::partition(PartitionState &state) {
  ShardLayout x = state.getLayout(getX());
  if (state.getLayout(getDy()) != x)
    return emitError("tp-partition: the norm's input and output gradient "
                     "are split differently");
  if (x == ShardLayout::SplitLast && !getGroupSizeAttr())
    return emitError("tp-partition: a norm over a split last dimension needs "
                     "its whole row");
  state.propagate(getX(), getDx());
  // Each rank's rows (its heads, or its share of the sequence) give part of
  // the weight's gradient.
  if (x != ShardLayout::Replicated)
    state.markPartial(getDweight());
  return success();
}

LogicalResult AttentionGradOp::partition(PartitionState &state) {
  state.propagate(getQ(), getDq());
  state.propagate(getK(), getDk());
  state.propagate(getV(), getDv());
  SmallVector<Value> operands = {getK(), getV(), getDout()};
  if (getOut())
    operands.append({getOut(), getLse()});
  return partitionAttention(*this, state, operands);
}

LogicalResult SiluGradOp::partition(PartitionState &state) {
  return partitionElementwise(*this, state);
}

LogicalResult ReluSquaredGradOp::partition(PartitionState &state) {
  return partitionElementwise(*this, state);
}

LogicalResult GeluGradOp::partition(PartitionState &state) {
  return partitionElementwise(*this, state);
}

LogicalResult SoftcapGradOp::partition(PartitionState &state) {
  return partitionElementwise(*this, state);
}

LogicalResult SiluMulGradOp::partition(PartitionState &state) {
  if (failed(partitionElementwise(*this, state)))
    return failure();
  state.propagate(getGate(), getDup());
  return success();
}

/// A feature slice (or its gradient) reads whole rows: an operand split on
/// its features is gathered first (once for all its parts); a sequence
/// split carries through.
static LogicalResult partitionFeatureSlice(Operation *op, OpOperand &operand,
                                           int64_t width,
                                           PartitionState &state) {
  Value in = operand.get();
  auto type = cast<RankedTensorType>(in.getType());
  if (type.getRank() < 2 && state.getLayout(in) != ShardLayout::Replicated)
    return op->emitError("tp-partition: a feature slice of a split vector");
  if (state.getLayout(in) == ShardLayout::SplitLast) {
    // The parts of one value share its all-gather.
    FailureOr<Value> whole = state.gatheredOnce(
        op, in, splitDimOf(ShardLayout::SplitLast, type.getRank()));
    if (failed(whole))
      return failure();
    operand.set(*whole);
    in = *whole;
  }
  ShardLayout layout = state.getLayout(in);
  Value result = op->getResult(0);
  auto local = cast<RankedTensorType>(in.getType());
  SmallVector<int64_t> shape(local.getShape());
  shape.back() = width;
  result.setType(RankedTensorType::get(
      shape, cast<RankedTensorType>(result.getType()).getElementType()));
  state.setLayout(result, layout);
  return success();
}

LogicalResult FeatureSliceOp::partition(PartitionState &state) {
  return partitionFeatureSlice(*this, getXMutable(), getSize(), state);
}

LogicalResult FeatureSliceGradOp::partition(PartitionState &state) {
  return partitionFeatureSlice(*this, getDyMutable(), getWidth(), state);
}

bool HoldLikeOp::keepsPartialSums(const PartitionState &) { return true; }

/// `like` tells the layout wanted; its value is not read.
bool HoldLikeOp::readsOnlyLayout(OpOperand &use) {
  return use.getOperandNumber() == 1;
}

LogicalResult HoldLikeOp::partition(PartitionState &state) {
  ShardLayout have = state.getLayout(getCotangent());
  ShardLayout want = state.getLayout(getLike());
  // A partial sum's every part is read whole by the sum.
  if (want == ShardLayout::Partial)
    want = ShardLayout::Replicated;
  int64_t rank = getType().getRank();
  OpBuilder::InsertionGuard guard(state.getBuilder());
  state.getBuilder().setInsertionPoint(*this);
  Value local = getCotangent();
  // An uneven split is wanted over `like`'s ranges (on the last dimension).
  const PartitionState::UnevenSplit *wantRanges =
      want == ShardLayout::SplitLast ? state.getUneven(getLike()) : nullptr;
  if (have == want && !state.splitAlike(local, getLike()))
    return emitError("tp-partition: a gradient is split over other ranges "
                     "than the value it is the gradient of");
  if (have == ShardLayout::Partial) {
    if (want == ShardLayout::Replicated) {
      local = state.completed(local);
    } else {
      FailureOr<Value> scattered = state.reduceScattered(
          *this, local, splitDimOf(want, rank), wantRanges);
      if (failed(scattered))
        return failure();
      local = *scattered;
    }
  } else if (have != want) {
    if (have != ShardLayout::Replicated) {
      FailureOr<Value> whole =
          state.gathered(*this, local, splitDimOf(have, rank));
      if (failed(whole))
        return failure();
      local = *whole;
    }
    if (want != ShardLayout::Replicated) {
      FailureOr<Value> block =
          state.sliced(*this, local, splitDimOf(want, rank), wantRanges);
      if (failed(block))
        return failure();
      local = *block;
    }
  }
  state.setLayout(local, want);
  getResult().setType(cast<RankedTensorType>(local.getType()));
  getResult().replaceAllUsesWith(local);
  return success();
}

// A replicated parameter's partial gradient is accumulated as it is: the
// optimizer boundary reduces the step's sum once (tp-replica-grad-sync).
bool AccumulateGradOp::keepsPartialSums(const PartitionState &state) {
  return state.getParamSplitDim(getParam()) < 0;
}

LogicalResult AccumulateGradOp::partition(PartitionState &state) {
  int64_t d = state.getParamSplitDim(getParam());
  ShardLayout layout = state.getLayout(getGrad());
  auto arg = cast<BlockArgument>(getParam());
  auto func = cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (d < 0 && layout == ShardLayout::Partial) {
    // The replica class, read off the backward: whole on every rank (each
    // computed it all) or a partial sum (each saw part of the heads or of
    // the sequence). A plan may override it.
    setDerivedReduction(GradReduction::Sum);
  } else if (layout == ShardLayout::Replicated &&
             state.getParamSplitDim(getGrad()) == d &&
             state.splitAlike(getGrad(), getParam())) {
    if (d < 0)
      setDerivedReduction(GradReduction::Mean);
  } else {
    return emitError("tp-partition: the gradient of '")
           << getFqn() << "' is not held as its parameter is ("
           << (d < 0 ? "replicated" : "split on dim " + std::to_string(d))
           << ")";
  }
  if (d < 0 &&
      func.getArgAttr(arg.getArgNumber(), TPDialect::kExcludeAttrName)) {
    // Each rank's own copy (the plan's exclude): no class.
    removeDerivedReductionAttr();
    setOwned(true);
  } else if (d < 0) {
    auto forced = func.getArgAttrOfType<GradReductionAttr>(
        arg.getArgNumber(), TPDialect::kGradReductionAttrName);
    setReduction(forced ? forced.getValue() : *getDerivedReduction());
  }
  auto placement = func.getArgAttrOfType<PlacementAttr>(
      arg.getArgNumber(), TPDialect::kPlacementAttrName);
  // Blocks shared by several ranks: each has its query heads' part.
  SmallVector<int64_t> blocks =
      placement ? placement.getSharedBlocks() : SmallVector<int64_t>();
  if (!blocks.empty()) {
    OpBuilder::InsertionGuard guard(state.getBuilder());
    state.getBuilder().setInsertionPoint(*this);
    Value sum =
        ReplicaSumOp::create(state.getBuilder(), getLoc(), getGrad(),
                             state.getBuilder().getDenseI64ArrayAttr(blocks));
    inheritDecoderLayer(*this, sum.getDefiningOp());
    state.propagate(getGrad(), sum);
    getGradMutable().assign(sum);
  }
  // The gradient norm sums a split gradient's squares over the ranks.
  setSplitDim(d);
  return success();
}

LogicalResult ReplicaSumOp::partition(PartitionState &state) {
  state.propagate(getX(), getResult());
  return success();
}

LogicalResult Mamba2MixerGradOp::partition(PartitionState &state) {
  for (Value v : getOperands())
    if (state.getParamSplitDim(v) >= 0 ||
        state.getLayout(v) != ShardLayout::Replicated)
      return emitError("tp-partition: the Mamba2 mixer runs replicated only");
  return success();
}
