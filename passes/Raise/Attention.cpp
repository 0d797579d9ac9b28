//===- Attention.cpp - scaled dot-product attention
//-------------------------===//
//
// Eager attention: q k^T (scaled before or after), plus or masked by a
// mask table, softmax, times v; with repeat_kv's unsqueeze, expand and
// reshape for grouped KV heads. The mask is read at the probe: causal, a
// sliding window, the padding mask.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

llvm::hash_code Raiser::structureOf(Value v) {
  if (auto it = structureCache.find(v); it != structureCache.end())
    return it->second;
  llvm::hash_code h;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    // Constants by value, inputs by name.
    Abstract *a = lookup(v);
    if (a && a->probe && a->kind != Abstract::Concrete) {
      const std::vector<double> &data = a->probe->data;
      auto *bytes = reinterpret_cast<const char *>(data.data());
      h = llvm::hash_combine_range(bytes, bytes + data.size() * sizeof(double));
    } else if (auto name = source.getArgAttrOfType<StringAttr>(
                   arg.getArgNumber(), onnx_ir::ONNXDialect::kNameAttrName)) {
      h = llvm::hash_value(name.getValue());
    } else {
      h = llvm::hash_value(arg.getArgNumber());
    }
  } else if (auto node = v.getDefiningOp<NodeOp>()) {
    h = llvm::hash_combine(node.getOpType(), node.getDomain(),
                           mlir::hash_value(node.getOnnxAttrs()),
                           cast<OpResult>(v).getResultNumber());
    for (Value in : node.getInputs())
      h = llvm::hash_combine(h, isa<NoneType>(in.getType()) ? llvm::hash_code(0)
                                                            : structureOf(in));
  } else {
    h = llvm::hash_value(v.getAsOpaquePointer());
  }
  structureCache[v] = h;
  return h;
}

LogicalResult Raiser::classifyMask(NodeOp node, const ProbeTensor &m,
                                   Value maskSource, bool &causal,
                                   bool &usesPadding,
                                   std::optional<int64_t> &window) {
  causal = false;
  usesPadding = false;
  window.reset();
  {
    auto allowedAt = [&](int64_t b, int64_t i,
                         int64_t j) -> std::optional<bool> {
      // A mask shorter than the probe reads is no mask raising knows.
      std::optional<double> at = m.at({b, 0, i, j});
      if (!at)
        return std::nullopt;
      double value = *at;
      if (m.kind == ProbeTensor::Kind::Bool)
        return value != 0.0;
      if (value <= -1e4)
        return false;
      if (std::fabs(value) > 1e-6)
        return std::nullopt; // an additive bias, not a mask
      return true;
    };
    auto keep = [&](int64_t b, int64_t j) {
      return probeKeep.empty() || probeKeep[b][j] != 0;
    };
    int64_t maxDistance = -1;
    bool future = false, paddingMasked = false;
    for (int64_t b = 0; b < probeBatch; ++b)
      for (int64_t i = 0; i < probeSeq; ++i) {
        if (!keep(b, i))
          continue;
        for (int64_t j = 0; j < probeSeq; ++j) {
          std::optional<bool> allowed = allowedAt(b, i, j);
          if (!allowed)
            return nodeError(node) << "the attention mask adds values other "
                                      "than 0 and a large negative number";
          if (*allowed) {
            future |= j > i;
            maxDistance = std::max(maxDistance, i - j);
            if (!keep(b, j))
              return nodeError(node)
                     << "the attention mask lets queries see padding keys";
          } else if (!keep(b, j)) {
            paddingMasked = true;
          }
        }
      }
    causal = !future;
    usesPadding = paddingMasked;
    // A window shows only if some visible pair lies beyond it.
    if (causal)
      for (int64_t b = 0; b < probeBatch && !window; ++b)
        for (int64_t i = 0; i < probeSeq && !window; ++i)
          for (int64_t j = 0; j <= i && !window; ++j)
            if (keep(b, i) && keep(b, j) && i - j > maxDistance)
              window = maxDistance + 1;
    // Check the candidate reproduces the mask exactly.
    for (int64_t b = 0; b < probeBatch; ++b)
      for (int64_t i = 0; i < probeSeq; ++i) {
        if (!keep(b, i))
          continue;
        for (int64_t j = 0; j < probeSeq; ++j) {
          bool expect = (!causal || j <= i) && (!window || i - j < *window) &&
                        (!usesPadding || keep(b, j));
          if (*allowedAt(b, i, j) != expect)
            return nodeError(node)
                   << "the attention mask is not causal, sliding-window or "
                      "padding at the probe (batch "
                   << b << ", query " << i << ", key " << j << ")";
        }
      }
    if (usesPadding && !attentionMask)
      return nodeError(node) << "padding mask without an attention_mask input";
  }
  // Two different mask tensors that mean the same at the probe: one of
  // them is probably a sliding window wider than the probe can show.
  std::string meaning =
      llvm::formatv("{0}/{1}/{2}", causal, usesPadding, window ? *window : 0);
  size_t structure = maskSource ? size_t(structureOf(maskSource)) : 0;
  maskMeaning.try_emplace(structure, meaning);
  for (auto &[other, otherMeaning] : maskMeaning)
    if (other != structure && otherMeaning == meaning)
      return nodeError(node)
             << "two different attention masks are identical at the probe "
                "length "
             << probeSeq
             << " (a sliding window at least that wide?); raise "
                "probe-seq above the window plus 3";
  return success();
}

LogicalResult Raiser::emitAttention(NodeOp node, Abstract &probs, Abstract &v,
                                    Abstract &out) {
  const Activation &q = probs.act, &k = probs.other;
  if (q.layout != Layout::HeadsT || k.layout != Layout::KeyT ||
      v.act.layout != Layout::HeadsT)
    return nodeError(node) << "attention operands are not [batch, heads, "
                              "seq, head_dim]";
  int64_t d = q.headDim;
  if (k.headDim != d || v.act.headDim != d)
    return nodeError(node) << "q, k and v have different head sizes";
  if (k.repeat != v.act.repeat)
    return nodeError(node) << "k and v are repeated differently";
  int64_t heads = featuresOf(q.value) / d;
  int64_t kvHeads = featuresOf(k.value) / d;
  if (kvHeads * k.repeat != heads)
    return nodeError(node) << heads << " query heads do not match " << kvHeads
                           << " KV heads repeated " << k.repeat << " times";
  double scale = probs.number * q.pendingScale * k.pendingScale;

  // What the mask allows, read at the probe.
  bool causal = false, usesPadding = false;
  std::optional<int64_t> window;
  if (probs.table && failed(classifyMask(node, *probs.table, probs.maskSource,
                                         causal, usesPadding, window)))
    return failure();

  Value mask = usesPadding ? attentionMask : Value();
  Value y =
      AttentionOp::create(
          builder, node.getLoc(), q.value.getType(), /*lse=*/Type(), q.value,
          k.value, v.act.value, mask, builder.getI64IntegerAttr(heads),
          builder.getI64IntegerAttr(kvHeads), builder.getI64IntegerAttr(d),
          builder.getF64FloatAttr(roundSignificant(scale)),
          causal ? builder.getUnitAttr() : UnitAttr(),
          window ? builder.getI64IntegerAttr(*window) : IntegerAttr(),
          FloatAttr())
          .getResult();
  Activation result;
  result.value = y;
  result.layout = Layout::HeadsT;
  result.headDim = d;
  out = makeAct(result, logicalShape(result));
  return success();
}

namespace {

/// Scaling head-split q or k (SDPA applies sqrt(scale) to each): folded
/// into the attention's scale.
FailureOr<bool> pendingScale(Raiser &, NodeOp, ArrayRef<Abstract *> in,
                             Abstract &out) {
  if (in.size() != 2)
    return false;
  for (unsigned i = 0; i < 2; ++i)
    if (isAct(in, i) && in[i]->act.layout != Layout::Packed &&
        Raiser::scalarOf(in[1 - i])) {
      out = *in[i];
      out.act.pendingScale *= *Raiser::scalarOf(in[1 - i]);
      return true;
    }
  return false;
}

/// q k^T on head-split q and transposed k.
FailureOr<bool> scores(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                       Abstract &out) {
  if (!isAct(in, 0) || !isAct(in, 1) || in[0]->act.layout != Layout::HeadsT ||
      in[1]->act.layout != Layout::KeyT)
    return false;
  out = r.derived(Abstract::Scores, *in[0]);
  out.other = in[1]->act;
  out.number = 1.0;
  return true;
}

/// Scores times or divided by a constant.
FailureOr<bool> scaledScores(Raiser &, NodeOp node, ArrayRef<Abstract *> in,
                             Abstract &out) {
  if (in.size() != 2)
    return false;
  bool divide = node.getOpType() == "Div";
  for (unsigned i = 0; i < (divide ? 1u : 2u); ++i) {
    std::optional<double> c = Raiser::scalarOf(in[1 - i]);
    if (in[i]->kind != Abstract::Scores || !c)
      continue;
    out = *in[i];
    out.number = divide ? out.number / *c : out.number * *c;
    return true;
  }
  return false;
}

/// Scores plus an additive mask table.
FailureOr<bool> additiveMask(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                             Abstract &out) {
  if (in.size() != 2)
    return false;
  for (unsigned i = 0; i < 2; ++i)
    if (in[i]->kind == Abstract::Scores && Raiser::isConcrete(in[1 - i])) {
      out = r.derived(Abstract::MaskedScores, *in[i]);
      out.table = std::make_shared<ProbeTensor>(*in[1 - i]->probe);
      out.maskSource = node.getInputs()[1 - i];
      return true;
    }
  return false;
}

/// Scores masked by Where(keep, scores, very negative).
FailureOr<bool> whereMask(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                          Abstract &out) {
  if (in.size() != 3 || !Raiser::isConcrete(in[0]) ||
      !isKind(in, 1, Abstract::Scores) || !Raiser::scalarOf(in[2]) ||
      *Raiser::scalarOf(in[2]) > -1e4)
    return false;
  out = r.derived(Abstract::MaskedScores, *in[1]);
  ProbeTensor keep = *in[0]->probe;
  keep.kind = ProbeTensor::Kind::Bool;
  out.table = std::make_shared<ProbeTensor>(keep);
  out.maskSource = node.getInputs()[0];
  return true;
}

FailureOr<bool> softmax(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                        Abstract &out) {
  if (!isKind(in, 0, Abstract::Scores) &&
      !isKind(in, 0, Abstract::MaskedScores))
    return false;
  auto axis = node.getOnnxAttrs().getAs<IntegerAttr>("axis");
  if (axis && axis.getInt() != -1 && axis.getInt() != 3)
    return false;
  out = r.derived(Abstract::Probs, *in[0]);
  return true;
}

/// SDPA's guard (TorchScript export): where(isnan(probs), 0, probs). A
/// fully masked row is NaN there; tp.attention gives such rows (padding
/// queries, whose outputs no kept position reads) zeros too.
FailureOr<bool> probsIsNaN(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                           Abstract &out) {
  if (!isKind(in, 0, Abstract::Probs))
    return false;
  out = r.derived(Abstract::ProbsIsNaN, *in[0]);
  return true;
}

FailureOr<bool> probsNaNGuard(Raiser &, NodeOp node, ArrayRef<Abstract *> in,
                              Abstract &out) {
  if (in.size() != 3 || !isKind(in, 0, Abstract::ProbsIsNaN) ||
      Raiser::scalarOf(in[1]) != 0.0 || !isKind(in, 2, Abstract::Probs) ||
      node.getInputs()[0].getDefiningOp<NodeOp>().getInputs()[0] !=
          node.getInputs()[2])
    return false;
  out = *in[2];
  return true;
}

/// softmax(scores) v completes the block.
FailureOr<bool> probsTimesValues(Raiser &r, NodeOp node,
                                 ArrayRef<Abstract *> in, Abstract &out) {
  if (!isKind(in, 0, Abstract::Probs) || !isAct(in, 1))
    return false;
  return matched(r.emitAttention(node, *in[0], *in[1], out));
}

/// repeat_kv: k[:, :, None] ...
FailureOr<bool> kvUnsqueeze(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                            Abstract &out) {
  if (!isAct(in, 0) || in[0]->act.layout != Layout::HeadsT)
    return false;
  std::optional<SmallVector<int64_t>> axes = r.axesOf(node, in, 1);
  if (!axes || axes->size() != 1 || ((*axes)[0] != 2 && (*axes)[0] != -3))
    return false;
  out = r.derived(Abstract::KVUnsqueezed, *in[0]);
  out.shape.insert(out.shape.begin() + 2, 1);
  return true;
}

/// ... .expand(batch, kv_heads, n_rep, seq, head_dim) (the reshape that
/// merges the repeats is in Layouts.cpp).
FailureOr<bool> kvExpand(Raiser &r, NodeOp, ArrayRef<Abstract *> in,
                         Abstract &out) {
  if (!isKind(in, 0, Abstract::KVUnsqueezed) || in.size() < 2 ||
      !Raiser::isConcrete(in[1]))
    return false;
  const ProbeTensor &t = *in[1]->probe;
  const SmallVector<int64_t> &s = in[0]->shape;
  if (t.numElements() != 5 || t.data[0] != s[0] || t.data[1] != s[1] ||
      t.data[3] != s[3] || t.data[4] != s[4])
    return false;
  out = r.derived(Abstract::KVExpanded, *in[0]);
  out.group = probeInt(t.data[2]);
  out.shape[2] = out.group;
  return true;
}

} // namespace

void mlir::tp::raise::registerAttentionRecognizers(RecognizerTable &table) {
  table.add("Mul", "attention-scale", Stage::BeforeExpressions, pendingScale);
  table.add("MatMul", "attention-scores", Stage::OnActivations, scores);
  table.add("Mul", "attention-scores-scale", Stage::OnActivations,
            scaledScores);
  table.add("Div", "attention-scores-scale", Stage::OnActivations,
            scaledScores);
  table.add("Add", "attention-mask", Stage::OnActivations, additiveMask);
  table.add("Where", "attention-mask", Stage::OnActivations, whereMask);
  table.add("Softmax", "attention-softmax", Stage::OnActivations, softmax);
  table.add("IsNaN", "attention-nan-guard", Stage::OnActivations, probsIsNaN);
  table.add("Where", "attention-nan-guard", Stage::OnActivations,
            probsNaNGuard);
  table.add("MatMul", "attention", Stage::OnActivations, probsTimesValues);
  table.add("Unsqueeze", "repeat-kv-unsqueeze", Stage::OnActivations,
            kvUnsqueeze);
  table.add("Expand", "repeat-kv-expand", Stage::OnActivations, kvExpand);
}
