//===- Slices.cpp - the parts of a fused projection -----------------------===//
//
// Recognisers of an activation cut along its features: a fused projection
// (Phi-3's qkv_proj and gate_up_proj, a remote code's in_proj) whose output
// an exporter splits with one `Split` (several outputs read) or with one
// `Slice` per part. Each part read becomes a tp.feature_slice of the
// packed activation. Within heads, HF's partial rotary embedding cuts each
// head into the features that rotate and those that pass through: with
// every feature rotating, the first part is the whole head and the second
// an empty part its concatenation drops.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

namespace {

/// Whether `a` is a packed activation `[B, S, F]` nothing is pending on.
bool isPackedAct(const Abstract *a) {
  return a && a->kind == Abstract::Act && a->act.layout == Layout::Packed &&
         a->act.repeat == 1 && a->act.pendingScale == 1.0;
}

/// Whether ONNX `axis` of a rank-3 tensor is its last.
bool isFeatureAxis(int64_t axis) { return axis == -1 || axis == 2; }

/// The range a `Slice` of one axis with step 1 takes from a last axis of
/// `width` (`lastAxis` is that axis's index), ONNX's negative bounds
/// counted from the end and both clamped to it; nullopt for any other
/// slice, and a failure for a step other than 1.
FailureOr<std::optional<std::pair<int64_t, int64_t>>>
lastAxisRange(Raiser &r, NodeOp node, ArrayRef<Abstract *> in, int64_t lastAxis,
              int64_t width) {
  auto starts = concreteInts(in, 1), ends = concreteInts(in, 2);
  auto axes = concreteInts(in, 3), steps = concreteInts(in, 4);
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1 || !axes ||
      axes->size() != 1 || ((*axes)[0] != -1 && (*axes)[0] != lastAxis))
    return std::optional<std::pair<int64_t, int64_t>>();
  if (steps && (steps->size() != 1 || (*steps)[0] != 1))
    return r.nodeError(node) << "a slice of an activation's features with "
                                "a step other than 1 is not supported";
  auto clamp = [&](int64_t v) {
    return std::clamp<int64_t>(v < 0 ? v + width : v, 0, width);
  };
  int64_t begin = clamp((*starts)[0]), end = clamp((*ends)[0]);
  return std::optional(std::pair(begin, std::max(begin, end)));
}

/// Features [offset, offset + size) of packed `x` as a new activation.
Abstract featureSlice(Raiser &r, NodeOp node, const Abstract &x, int64_t offset,
                      int64_t size) {
  Value part = FeatureSliceOp::create(
      r.builder, node.getLoc(), r.packedType(size), x.act.value,
      r.builder.getI64IntegerAttr(offset), r.builder.getI64IntegerAttr(size));
  Activation act;
  act.value = part;
  return r.makeAct(act, r.logicalShape(act));
}

/// One `Slice` (step 1) of the last axis.
FailureOr<bool> slice(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                      Abstract &out) {
  if (!isPackedAct(in.empty() ? nullptr : in[0]))
    return false;
  auto range = lastAxisRange(r, node, in, 2, r.featuresOf(in[0]->act.value));
  if (failed(range) || !*range)
    return failure(failed(range));
  auto [begin, end] = **range;
  out = featureSlice(r, node, *in[0], begin, end - begin);
  return true;
}

/// One `Slice` of each head's features: the whole head, or none of it.
FailureOr<bool> headSlice(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                          Abstract &out) {
  if (!isAct(in, 0) || (in[0]->act.layout != Layout::Heads &&
                        in[0]->act.layout != Layout::HeadsT))
    return false;
  int64_t d = in[0]->act.headDim;
  auto range = lastAxisRange(r, node, in, 3, d);
  if (failed(range) || !*range)
    return failure(failed(range));
  auto [begin, end] = **range;
  if (begin == 0 && end == d) {
    out = *in[0];
    return true;
  }
  if (begin == end) {
    out = r.derived(Abstract::EmptyPart, *in[0]);
    return true;
  }
  return r.nodeError(node) << "features [" << begin << ", " << end
                           << ") of each " << d
                           << "-feature head: a partial rotary embedding "
                              "(partial_rotary_factor < 1) is not supported";
}

/// A concatenation with empty parts of the same activation is its other
/// input.
FailureOr<bool> concatEmpty(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                            Abstract &out) {
  const Abstract *whole = nullptr;
  for (const Abstract *a : in) {
    if (a && a->kind == Abstract::EmptyPart)
      continue;
    if (whole)
      return false;
    whole = a;
  }
  if (!whole || !isAct(in, llvm::find(in, whole) - in.begin()))
    return false;
  out = *whole;
  return true;
}

/// A `Split` of the last axis into parts, each read part sliced.
FailureOr<bool> split(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                      MutableArrayRef<Abstract> outs) {
  if (!isPackedAct(in.empty() ? nullptr : in[0]))
    return false;
  int64_t axis = 0;
  if (auto attr = node.getOnnxAttrs().getAs<IntegerAttr>("axis"))
    axis = attr.getInt();
  if (!isFeatureAxis(axis))
    return r.nodeError(node) << "a split of an activation along axis " << axis
                             << " is not supported (only its features, the "
                                "last axis, are)";
  int64_t width = r.featuresOf(in[0]->act.value);
  int64_t parts = node.getNumResults();
  // The sizes: the `split` input (opset 13+) or attribute, else equal
  // parts (opset 18's `num_outputs`: the last may be smaller).
  SmallVector<int64_t> sizes;
  if (in.size() > 1 && in[1]) {
    auto given = concreteInts(in, 1);
    if (!given)
      return r.nodeError(node) << "the sizes of a split of an activation "
                                  "must be known at compile time";
    sizes = *given;
  } else if (auto attr = intsAttr(node, "split")) {
    sizes = *attr;
  } else {
    int64_t chunk = (width + parts - 1) / std::max<int64_t>(parts, 1);
    for (int64_t i = 0, left = width; i < parts; ++i, left -= chunk)
      sizes.push_back(std::clamp<int64_t>(left, 0, chunk));
  }
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s < 0 ? width + 1 : s;
  if (static_cast<int64_t>(sizes.size()) != parts || total != width)
    return r.nodeError(node)
           << "split sizes [" << llvm::make_range(sizes.begin(), sizes.end())
           << "] do not cut the " << width << " features into " << parts
           << " parts";
  for (int64_t i = 0, offset = 0; i < parts; offset += sizes[i++])
    if (!node.getResult(i).use_empty())
      outs[i] = featureSlice(r, node, *in[0], offset, sizes[i]);
  return true;
}

} // namespace

void mlir::tp::raise::registerSliceRecognizers(RecognizerTable &table) {
  table.add("Slice", "feature-slice", Stage::OnActivations, slice);
  table.add("Slice", "head-slice", Stage::OnActivations, headSlice);
  table.add("Concat", "concat-empty-part", Stage::OnActivations, concatEmpty);
  table.addMultiOutput("Split", "feature-split", split);
}
