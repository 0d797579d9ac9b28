//===- Linear.cpp - linear layers and embeddings
//----------------------------===//
//
// MatMul against a parameter is a linear layer (the stored weight is
// [in, out], or [out, in] behind an explicit Transpose); a following Add of
// a parameter vector is its bias; Gather of a parameter at the token ids is
// the embedding.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

LogicalResult Raiser::emitLinear(NodeOp node, Abstract &x, Abstract &w,
                                 Abstract &out) {
  if (x.act.layout != Layout::Packed)
    return nodeError(node) << "a linear layer on a head-split activation";
  auto stored =
      cast<RankedTensorType>(source.getArgument(w.argIndex).getType());
  if (stored.getRank() != 2)
    return nodeError(node) << "weight is not 2-D: " << stored;
  // MatMul computes x @ B with B = [in, out]. B is the stored tensor, or its
  // transpose when the graph has an explicit Transpose (unfolded export).
  int64_t in = w.viaTranspose ? stored.getDimSize(1) : stored.getDimSize(0);
  int64_t outF = w.viaTranspose ? stored.getDimSize(0) : stored.getDimSize(1);
  int64_t features = featuresOf(x.act.value);
  if (in != features)
    return nodeError(node) << "weight " << stored << " does not take "
                           << features << " input features";
  FailureOr<Value> weight =
      useParam(node, w, {outF, in}, /*transposed=*/!w.viaTranspose, "weight");
  if (failed(weight))
    return failure();
  Value y = LinearOp::create(builder, node.getLoc(), packedType(outF),
                             x.act.value, *weight, Value(), LinearFormAttr());
  out = makeAct({y}, {probeBatch, probeSeq, outF});
  return success();
}

namespace {

FailureOr<bool> embedding(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                          Abstract &out) {
  if (!isKind(in, 0, Abstract::Param) || !isKind(in, 1, Abstract::Ids))
    return false;
  auto table =
      cast<RankedTensorType>(r.source.getArgument(in[0]->argIndex).getType());
  if (table.getRank() != 2)
    return r.nodeError(node) << "embedding table is not 2-D: " << table;
  FailureOr<Value> w =
      r.useParam(node, *in[0], table.getShape(), false, "weight");
  if (failed(w))
    return failure();
  r.elementType = table.getElementType();
  Value y = EmbeddingOp::create(r.builder, node.getLoc(),
                                r.packedType(table.getDimSize(1)),
                                in[1]->runtime, *w, /*vocab_parallel=*/false,
                                DenseI64ArrayAttr(), DenseI64ArrayAttr(),
                                /*runs_bucket=*/IntegerAttr(),
                                /*block_rows=*/IntegerAttr());
  out = r.makeAct({y}, {r.probeBatch, r.probeSeq, table.getDimSize(1)});
  return true;
}

FailureOr<bool> linear(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                       Abstract &out) {
  if (!isAct(in, 0) || !isKind(in, 1, Abstract::Param))
    return false;
  return matched(r.emitLinear(node, *in[0], *in[1], out));
}

/// A parameter vector added to a bias-less linear's output is its bias.
FailureOr<bool> bias(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                     Abstract &out) {
  for (unsigned i = 0; i < 2; ++i) {
    Abstract *a = in[i], *b = in[1 - i];
    if (a->kind != Abstract::Param || b->kind != Abstract::Act ||
        b->act.layout != Layout::Packed)
      continue;
    auto linear = b->act.value.getDefiningOp<LinearOp>();
    auto biasType =
        cast<RankedTensorType>(r.source.getArgument(a->argIndex).getType());
    if (!linear || linear.getBias() || biasType.getRank() != 1 ||
        biasType.getDimSize(0) != r.featuresOf(b->act.value))
      continue;
    FailureOr<Value> bias =
        r.useParam(node, *a, biasType.getShape(), false, "bias");
    if (failed(bias))
      return failure();
    linear.getBiasMutable().assign(*bias);
    out = *b;
    return true;
  }
  return false;
}

} // namespace

void mlir::tp::raise::registerLinearRecognizers(RecognizerTable &table) {
  table.add("Gather", "embedding", Stage::OnActivations, embedding);
  table.add("MatMul", "linear", Stage::OnActivations, linear);
  table.add("Add", "linear-bias", Stage::OnActivations, bias);
}
