//===- TPPartitionRules.cpp - each tp op on one tensor-parallel rank ------===//
//
// PartitionOpInterface of every tp op: its local types and result layouts
// from its operands' layouts (see TPInterfaces.td). tp-partition walks the
// program and asks each op; the collectives come from PartitionState.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"

using namespace mlir;
using namespace mlir::tp;

/// `type` with its last dimension set to `last`.
static RankedTensorType withLast(Type type, int64_t last) {
  auto t = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(t.getShape());
  shape.back() = last;
  return RankedTensorType::get(shape, t.getElementType());
}

/// Elementwise binary ops need their operands held alike.
static LogicalResult partitionElementwise(Operation *op,
                                          PartitionState &state) {
  for (Value operand : op->getOperands().drop_front())
    if (state.getLayout(operand) != state.getLayout(op->getOperand(0)))
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
    return success();
  }
  setVocabParallel(true);
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
    return success();
  }
  if (in != ShardLayout::SplitLast)
    return emitError("tp-partition: a row-split linear needs an input split "
                     "on its last dimension");
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
      (state.getParamSplitDim(getBias()) == 0))
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

LogicalResult AttentionOp::partition(PartitionState &state) {
  ShardLayout q = state.getLayout(getQ()), k = state.getLayout(getK()),
              v = state.getLayout(getV());
  if (q != k || k != v)
    return emitError("tp-partition: q, k and v are split differently");
  if (q == ShardLayout::SplitSequence)
    return emitError("tp-partition: attention needs whole sequences (causal "
                     "attention on sequence shards is wrong); gather before "
                     "the q/k/v projections");
  state.propagate(getQ(), getResult());
  if (q != ShardLayout::SplitLast)
    return success();
  // This rank's heads are what its projections produce (KV heads may be
  // shared by a query group).
  int64_t ranks = state.getRanks();
  int64_t d = getHeadDim(), heads = getNumHeads(), kv = getNumKvHeads();
  int64_t qf = getQ().getType().getShape().back(),
          kf = getK().getType().getShape().back();
  int64_t localHeads = qf / d, localKv = kf / d;
  if (qf % d || kf % d || heads != localHeads * ranks || localKv < 1 ||
      localHeads % localKv ||
      (kv % ranks == 0 ? localKv * ranks != kv : localKv != 1 || ranks % kv))
    return emitError() << "tp-partition: " << heads << " heads / " << kv
                       << " KV heads do not split into " << ranks
                       << " (this rank's projections give " << qf << " and "
                       << kf << " features)";
  Builder b(getContext());
  setNumHeadsAttr(b.getI64IntegerAttr(localHeads));
  setNumKvHeadsAttr(b.getI64IntegerAttr(localKv));
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
