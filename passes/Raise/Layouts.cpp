//===- Layouts.cpp - how activations are viewed
//-----------------------------===//
//
// Recognisers that change only how an activation's logical ONNX tensor maps
// onto its packed tp value: pass-through casts, transposes and reshapes
// between the packed [batch, seq, hidden] and head-split layouts.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

FailureOr<SmallVector<int64_t>>
Raiser::resolveReshape(NodeOp node, ArrayRef<int64_t> from,
                       const ProbeTensor &targetT) {
  bool allowZero = false;
  if (auto attr = node.getOnnxAttrs().getAs<IntegerAttr>("allowzero"))
    allowZero = attr.getInt() != 0;
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1, total = 1;
  // Sizes come from the graph: every product is checked.
  for (int64_t d : from)
    if (d < 0 || __builtin_mul_overflow(total, d, &total))
      return nodeError(node) << "reshape of a tensor whose size overflows";
  for (double v : targetT.data) {
    int64_t d = probeInt(v);
    if (d == 0 && !allowZero) {
      if (shape.size() >= from.size())
        return nodeError(node) << "reshape copies a missing dimension";
      d = from[shape.size()];
    }
    if (d == -1 && inferred < 0)
      inferred = shape.size();
    else if (d < 0 || __builtin_mul_overflow(known, d, &known))
      return nodeError(node) << "reshape to a negative or overflowing shape";
    shape.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return nodeError(node) << "reshape cannot infer its -1 dimension";
    shape[inferred] = total / known;
  }
  return shape;
}

namespace {

/// Cast, Identity and Dropout (inference) change nothing raising sees.
FailureOr<bool> passThrough(Raiser &, NodeOp, ArrayRef<Abstract *> in,
                            Abstract &out) {
  out = *in[0];
  return true;
}

/// A transposed parameter (an unfolded export's explicit weight
/// transpose), or an activation moving between head layouts.
FailureOr<bool> transpose(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                          Abstract &out) {
  std::optional<SmallVector<int64_t>> perm = intsAttr(node, "perm");
  if (isKind(in, 0, Abstract::Param)) {
    out = *in[0];
    out.viaTranspose = !out.viaTranspose;
    return true;
  }
  if (!isAct(in, 0) || !perm)
    return false;
  Activation act = in[0]->act;
  ArrayRef<int64_t> p = *perm;
  bool swap12 = p == ArrayRef<int64_t>{0, 2, 1, 3};
  if (act.layout == Layout::Heads && swap12)
    act.layout = Layout::HeadsT;
  else if (act.layout == Layout::HeadsT && swap12)
    act.layout = Layout::Heads;
  else if (act.layout == Layout::HeadsT && p == ArrayRef<int64_t>{0, 1, 3, 2})
    act.layout = Layout::KeyT;
  else if (act.layout == Layout::Heads && p == ArrayRef<int64_t>{0, 2, 3, 1})
    act.layout = Layout::KeyT;
  else if (act.layout == Layout::FlatHeadsT && p == ArrayRef<int64_t>{0, 2, 1})
    act.layout = Layout::FlatKeyT;
  else
    return r.nodeError(node) << "unsupported transpose of an activation";
  out = r.makeAct(act, r.logicalShape(act));
  return true;
}

/// Splitting the hidden dimension into heads and merging them back, and
/// the reshape that ends repeat_kv.
FailureOr<bool> reshape(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                        Abstract &out) {
  if (in.size() < 2 || !Raiser::isConcrete(in[1]) ||
      !(isAct(in, 0) || isKind(in, 0, Abstract::KVExpanded)))
    return false;
  FailureOr<SmallVector<int64_t>> shape =
      r.resolveReshape(node, in[0]->shape, *in[1]->probe);
  if (failed(shape))
    return failure();
  const SmallVector<int64_t> &s = *shape;
  Activation act = in[0]->act;
  if (s == in[0]->shape) {
    out = *in[0];
    return true;
  }
  if (isKind(in, 0, Abstract::KVExpanded) && s.size() == 4 &&
      s[1] == in[0]->shape[1] * in[0]->shape[2]) {
    act.repeat *= in[0]->group;
    out = r.makeAct(act, r.logicalShape(act));
    return true;
  }
  if (isAct(in, 0) && act.layout == Layout::Packed && s.size() == 4 &&
      s[0] == r.probeBatch && s[1] == r.probeSeq &&
      s[2] * s[3] == in[0]->shape[2]) {
    act.layout = Layout::Heads;
    act.headDim = s[3];
    out = r.makeAct(act, r.logicalShape(act));
    return true;
  }
  if (isAct(in, 0) && act.layout == Layout::Heads && act.repeat == 1 &&
      s.size() == 3 && s[0] == r.probeBatch && s[1] == r.probeSeq &&
      s[2] == r.featuresOf(act.value)) {
    act.layout = Layout::Packed;
    act.headDim = 0;
    out = r.makeAct(act, r.logicalShape(act));
    return true;
  }
  // The dynamo exporter's SDPA transposes k as [B*H, S, D] -> [B*H, D, S]
  // and back to [B, H, D, S].
  if (isAct(in, 0)) {
    Activation flat = act;
    if (act.layout == Layout::HeadsT)
      flat.layout = Layout::FlatHeadsT;
    else if (act.layout == Layout::FlatKeyT)
      flat.layout = Layout::KeyT;
    if (flat.layout != act.layout && s == r.logicalShape(flat)) {
      out = r.makeAct(flat, s);
      return true;
    }
  }
  return r.nodeError(node) << "unsupported reshape of an activation to ["
                           << llvm::make_range(s.begin(), s.end()) << "]";
}

} // namespace

void mlir::tp::raise::registerLayoutRecognizers(RecognizerTable &table) {
  for (StringRef op : {"Cast", "Identity", "Dropout"})
    table.add(op, "pass-through", Stage::BeforeExpressions, passThrough);
  table.add("Transpose", "transpose", Stage::OnActivations, transpose);
  table.add("Reshape", "reshape", Stage::OnActivations, reshape);
}
