//===- Norms.cpp - RMS norms
//------------------------------------------------===//
//
// An RMS norm arrives as a chain: the mean of a square, plus epsilon, a
// square root, its reciprocal (or a division), the product with x, the
// product with the weight (or with 1 + weight, Gemma's offset). Each step is
// an abstract value of its own until the weight completes the block.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

LogicalResult Raiser::emitRmsNorm(NodeOp node, Abstract &normed,
                                  Abstract &weight, Abstract &out) {
  int64_t group = normed.group;
  auto stored =
      cast<RankedTensorType>(source.getArgument(weight.argIndex).getType());
  if (stored.getRank() != 1 || stored.getDimSize(0) != group)
    return nodeError(node) << "norm weight " << stored
                           << " does not match the normalized size " << group;
  FailureOr<Value> w = useParam(node, weight, {group}, false, "weight");
  if (failed(w))
    return failure();
  const Activation &x = normed.act;
  int64_t features = featuresOf(x.value);
  // Per head (q_norm, k_norm), also where the activation is one head (one
  // KV head: Gemma3 1B), whose group is its whole last dimension.
  bool perHead = x.layout != Layout::Packed && x.headDim == group;
  IntegerAttr groupAttr;
  if (group != features || perHead)
    groupAttr = builder.getI64IntegerAttr(group);
  else if (x.layout != Layout::Packed)
    return nodeError(node) << "normalization over all heads of a head-split "
                              "activation";
  Value y = RmsNormOp::create(
      builder, node.getLoc(), x.value.getType(), x.value, *w,
      builder.getF64FloatAttr(roundSignificant(normed.number)),
      builder.getF64FloatAttr(weight.kind == Abstract::ParamPlus ? weight.number
                                                                 : 0.0),
      groupAttr);
  Activation result = x;
  result.value = y;
  out = makeAct(result, normed.shape);
  return success();
}

namespace {

/// mean(x^2) over the last axis, the square spelled x * x or x ^ 2.
FailureOr<bool> meanSquare(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                           Abstract &out) {
  if (!isKind(in, 0, Abstract::Elementwise))
    return false;
  std::optional<SmallVector<int64_t>> axes = r.axesOf(node, in, 1);
  int64_t rank = in[0]->shape.size();
  bool lastAxis =
      axes && axes->size() == 1 && ((*axes)[0] == -1 || (*axes)[0] == rank - 1);
  auto keep = node.getOnnxAttrs().getAs<IntegerAttr>("keepdims");
  bool square = true;
  for (double x : {-2.5, -1.0, 0.5, 3.0})
    square &= std::fabs(r.evalExpr(in[0]->group, x) - x * x) < 1e-9;
  if (!lastAxis || !square || (keep && keep.getInt() != 1))
    return false;
  out = r.derived(Abstract::MeanSquare, *in[0]);
  out.group = in[0]->shape.back();
  return true;
}

/// mean(x^2) + eps, and a parameter plus a constant (Gemma's 1 + w).
FailureOr<bool> plusConstant(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                             Abstract &out) {
  if (in.size() != 2)
    return false;
  for (unsigned i = 0; i < 2; ++i) {
    Abstract *a = in[i], *b = in[1 - i];
    std::optional<double> c = Raiser::scalarOf(b);
    if (!c)
      continue;
    if (a->kind == Abstract::MeanSquare) {
      out = r.derived(Abstract::MeanSquareEps, *a);
      out.number = *c;
      return true;
    }
    if (a->kind == Abstract::Param) {
      out = r.derived(Abstract::ParamPlus, *a);
      out.number = *c;
      return true;
    }
  }
  return false;
}

FailureOr<bool> squareRoot(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                           Abstract &out) {
  if (!isKind(in, 0, Abstract::MeanSquareEps))
    return false;
  out = r.derived(Abstract::Rms, *in[0]);
  return true;
}

FailureOr<bool> reciprocal(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                           Abstract &out) {
  if (!isKind(in, 0, Abstract::Rms))
    return false;
  out = r.derived(Abstract::InvRms, *in[0]);
  return true;
}

/// 1 / rms, or x / rms.
FailureOr<bool> divideByRms(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                            Abstract &out) {
  if (in.size() != 2 || !isKind(in, 1, Abstract::Rms))
    return false;
  if (Raiser::scalarOf(in[0]) == 1.0) {
    out = r.derived(Abstract::InvRms, *in[1]);
    return true;
  }
  if (isAct(in, 0) && in[0]->act.value == in[1]->act.value) {
    out = r.derived(Abstract::Normed, *in[1]);
    return true;
  }
  return false;
}

/// x * (1 / rms), then the normalized x times the weight.
FailureOr<bool> scaleByRms(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                           Abstract &out) {
  if (in.size() != 2)
    return false;
  for (unsigned i = 0; i < 2; ++i) {
    Abstract *a = in[i], *b = in[1 - i];
    if (a->kind == Abstract::Act && b->kind == Abstract::InvRms &&
        a->act.value == b->act.value && a->act.layout == b->act.layout) {
      out = r.derived(Abstract::Normed, *b);
      return true;
    }
    if ((a->kind == Abstract::Param || a->kind == Abstract::ParamPlus) &&
        b->kind == Abstract::Normed)
      return matched(r.emitRmsNorm(node, *b, *a, out));
  }
  return false;
}

} // namespace

void mlir::tp::raise::registerNormRecognizers(RecognizerTable &table) {
  table.add("ReduceMean", "rms-norm-mean-square", Stage::BeforeExpressions,
            meanSquare);
  table.add("Add", "rms-norm-epsilon", Stage::OnActivations, plusConstant);
  table.add("Sqrt", "rms-norm-root", Stage::OnActivations, squareRoot);
  table.add("Reciprocal", "rms-norm-reciprocal", Stage::OnActivations,
            reciprocal);
  table.add("Div", "rms-norm-divide", Stage::OnActivations, divideByRms);
  table.add("Mul", "rms-norm", Stage::OnActivations, scaleByRms);
}
