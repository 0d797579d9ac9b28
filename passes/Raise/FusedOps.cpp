//===- FusedOps.cpp - one-node building blocks
//------------------------------===//
//
// Exporters that fuse (the ONNX opset-23 RMSNormalization, RotaryEmbedding
// and Attention operators; onnxruntime's com.microsoft
// SimplifiedLayerNormalization, SkipSimplifiedLayerNormalization,
// RotaryEmbedding and GroupQueryAttention) write a building block as one
// node: its attributes and constant inputs say what the tp op is.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

LogicalResult Raiser::emitFusedRotary(NodeOp node, ArrayRef<Abstract *> in,
                                      Abstract &out) {
  bool msft = node.getDomain() == "com.microsoft";
  DictionaryAttr attrs = node.getOnnxAttrs();
  auto intAttr = [&](StringRef name, int64_t def) {
    auto a = attrs.getAs<IntegerAttr>(name);
    return a ? a.getInt() : def;
  };
  if (auto scale = attrs.getAs<FloatAttr>("scale");
      scale && scale.getValueAsDouble() != 1.0)
    return nodeError(node) << "rotary scale other than 1";
  auto operand = [&](unsigned i) -> Abstract * {
    return i < in.size() ? in[i] : nullptr;
  };
  Abstract *cosA = operand(msft ? 2 : 1), *sinA = operand(msft ? 3 : 2),
           *posA = operand(msft ? 1 : 3);
  // Caches too large for the importer to inline: the positions the probe
  // checks are their first rows.
  if (failed(readLeadingRows(node, cosA, probeSeq)) ||
      failed(readLeadingRows(node, sinA, probeSeq)))
    return failure();
  if (!isConcrete(cosA) || !isConcrete(sinA) || (posA && !isConcrete(posA)))
    return nodeError(node) << "rotary caches and positions must be known at "
                              "compile time";
  Activation x = in[0]->act;
  if (x.layout == Layout::Packed) {
    int64_t heads = intAttr("num_heads", 0);
    if (heads <= 0 || featuresOf(x.value) % heads)
      return nodeError(node) << "a 3-D rotary input needs num_heads";
    x.headDim = featuresOf(x.value) / heads;
  } else if (x.layout != Layout::HeadsT && x.layout != Layout::Heads) {
    return nodeError(node) << "rotary on an unsupported layout";
  }
  int64_t d = x.headDim, rot = intAttr("rotary_embedding_dim", 0);
  if (rot == 0)
    rot = d;
  int64_t half = rot / 2;
  bool interleaved = intAttr("interleaved", 0) != 0;
  const ProbeTensor &c = *cosA->probe, &sn = *sinA->probe;
  // cos[b, p, i]: by position id from a [max_pos, half] cache, or directly
  // from a [batch, seq, half] one.
  auto at = [&](const ProbeTensor &t, int64_t b, int64_t p,
                int64_t i) -> std::optional<double> {
    if (posA) {
      const ProbeTensor &pos = *posA->probe;
      int64_t id = probeInt(
          pos.data[pos.numElements() == probeSeq ? p : b * probeSeq + p]);
      if (t.rank() != 2 || id < 0 || id >= t.shape[0] || t.shape[1] < half)
        return std::nullopt;
      if (id != p)
        return std::nullopt;
      return t.data[id * t.shape[1] + i];
    }
    if (t.rank() != 3 || t.shape[2] < half)
      return std::nullopt;
    return t
        .data[((t.shape[0] == 1 ? 0 : b) * t.shape[1] + p) * t.shape[2] + i];
  };
  FailureOr<RopeFit> fit = fitRotaryTables(
      node, rot, half,
      [&](int64_t b, int64_t p, int64_t i) { return at(c, b, p, i); },
      [&](int64_t b, int64_t p, int64_t i) { return at(sn, b, p, i); },
      {&c, &sn});
  if (failed(fit))
    return failure();
  Value y = createRotary(node.getLoc(), x.value, d, rot, interleaved, *fit);
  Activation result = in[0]->act;
  result.value = y;
  out = makeAct(result, in[0]->shape);
  return success();
}

LogicalResult Raiser::emitFusedAttention(NodeOp node, ArrayRef<Abstract *> in,
                                         Abstract &out) {
  DictionaryAttr attrs = node.getOnnxAttrs();
  auto intAttr = [&](StringRef name, int64_t def) {
    auto a = attrs.getAs<IntegerAttr>(name);
    return a ? a.getInt() : def;
  };
  if (in.size() > 4 && (in[4] || (in.size() > 5 && in[5])))
    return nodeError(node) << "past key/value inputs (a KV cache) are not "
                              "supported; export with use_cache=False";
  if (intAttr("qk_matmul_output_mode", 0) != 0)
    return nodeError(node) << "qk_matmul_output_mode is not supported";
  for (unsigned i = 1; i < node.getNumResults(); ++i)
    if (!node.getResult(i).use_empty())
      return nodeError(node) << "only the attention output may be used";
  Activation q = in[0]->act, k = in[1]->act, v = in[2]->act;
  int64_t heads, kvHeads, d;
  if (q.layout == Layout::Packed) {
    heads = intAttr("q_num_heads", 0);
    kvHeads = intAttr("kv_num_heads", 0);
    if (heads <= 0 || kvHeads <= 0 || featuresOf(q.value) % heads)
      return nodeError(node) << "3-D attention inputs need q_num_heads and "
                                "kv_num_heads";
    d = featuresOf(q.value) / heads;
    if (k.layout != Layout::Packed || v.layout != Layout::Packed ||
        featuresOf(k.value) != kvHeads * d ||
        featuresOf(v.value) != kvHeads * d)
      return nodeError(node) << "k and v do not match the heads";
  } else if (q.layout == Layout::HeadsT && k.layout == Layout::HeadsT &&
             v.layout == Layout::HeadsT) {
    d = q.headDim;
    heads = featuresOf(q.value) / d;
    kvHeads = featuresOf(k.value) / d;
  } else {
    return nodeError(node) << "attention inputs must be all 3-D or all "
                              "[batch, heads, seq, head_dim]";
  }
  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (auto s = attrs.getAs<FloatAttr>("scale"))
    scale = s.getValueAsDouble();
  scale *= q.pendingScale * k.pendingScale;
  bool isCausal = intAttr("is_causal", 0) != 0;
  bool causal = isCausal, usesPadding = false;
  std::optional<int64_t> window;
  if (in.size() > 3 && in[3]) {
    if (!isConcrete(in[3]))
      return nodeError(node) << "the attention mask must be computable from "
                                "shapes and the attention_mask input";
    ProbeTensor mask = *in[3]->probe;
    if (isCausal) {
      // Fold is_causal into the mask: keep only j <= i.
      ProbeTensor full;
      full.kind = ProbeTensor::Kind::Bool;
      full.shape = {probeBatch, 1, probeSeq, probeSeq};
      full.data.assign(probeBatch * probeSeq * probeSeq, 0.0);
      for (int64_t b = 0; b < probeBatch; ++b)
        for (int64_t i = 0; i < probeSeq; ++i)
          for (int64_t j = 0; j < probeSeq; ++j) {
            double m = mask.data[mask.broadcastIndex({b, 0, i, j})];
            bool keep =
                mask.kind == ProbeTensor::Kind::Bool ? m != 0 : m > -1e4;
            full.data[(b * probeSeq + i) * probeSeq + j] = keep && j <= i;
          }
      mask = full;
    }
    if (failed(classifyMask(node, mask, node.getInputs()[3], causal,
                            usesPadding, window)))
      return failure();
  }
  auto softcap = attrs.getAs<FloatAttr>("softcap");
  Value y =
      AttentionOp::create(
          builder, node.getLoc(), q.value.getType(), /*lse=*/Type(), q.value,
          k.value, v.value, usesPadding ? attentionMask : Value(),
          builder.getI64IntegerAttr(heads), builder.getI64IntegerAttr(kvHeads),
          builder.getI64IntegerAttr(d),
          builder.getF64FloatAttr(roundSignificant(scale)),
          causal ? builder.getUnitAttr() : UnitAttr(),
          window ? builder.getI64IntegerAttr(*window) : IntegerAttr(),
          softcap && softcap.getValueAsDouble() > 0 ? softcap : FloatAttr())
          .getResult();
  Activation result;
  result.value = y;
  result.layout = q.layout;
  result.headDim = q.layout == Layout::Packed ? 0 : d;
  out = makeAct(result,
                q.layout == Layout::Packed
                    ? SmallVector<int64_t>{probeBatch, probeSeq, featuresOf(y)}
                    : logicalShape(result));
  return success();
}

FailureOr<RopeFit> Raiser::fitRopeCaches(NodeOp node, const ProbeTensor &c,
                                         const ProbeTensor &sn, int64_t rot) {
  int64_t half = rot / 2;
  if (c.rank() != 2 || sn.rank() != 2 || c.shape[1] < half ||
      sn.shape[1] < half || c.shape[0] < probeSeq || sn.shape[0] < probeSeq)
    return nodeError(node) << "rotary caches must be [max_position >= "
                           << probeSeq << ", " << half << "]";
  // The same caches for every batch row.
  auto at = [&](const ProbeTensor &t) {
    return [&t](int64_t, int64_t p, int64_t i) -> std::optional<double> {
      return t.data[p * t.shape[1] + i];
    };
  };
  return fitRotaryTables(node, rot, half, at(c), at(sn), {&c, &sn});
}

LogicalResult Raiser::emitGroupQueryAttention(NodeOp node,
                                              ArrayRef<Abstract *> in) {
  // com.microsoft GroupQueryAttention(query, key, value, past_key,
  // past_value, seqlens_k, total_sequence_length, cos_cache, sin_cache),
  // raised for a whole sequence from an empty cache.
  DictionaryAttr attrs = node.getOnnxAttrs();
  auto intAttr = [&](StringRef name, int64_t def) {
    auto a = attrs.getAs<IntegerAttr>(name);
    return a ? a.getInt() : def;
  };
  auto operand = [&](unsigned i) -> Abstract * {
    return i < in.size() ? in[i] : nullptr;
  };
  Abstract *q = operand(0), *k = operand(1), *v = operand(2);
  if (!q || !k || !v || q->kind != Abstract::Act || k->kind != Abstract::Act ||
      v->kind != Abstract::Act || q->act.layout != Layout::Packed ||
      k->act.layout != Layout::Packed || v->act.layout != Layout::Packed)
    return nodeError(node) << "expected separate packed query, key and value";
  for (unsigned i : {3u, 4u})
    if (!operand(i) || !isConcrete(operand(i)) ||
        operand(i)->probe->numElements() != 0)
      return nodeError(node) << "the past key/value must be the graph's "
                                "(empty) KV-cache input";
  int64_t heads = intAttr("num_heads", 0), kvHeads = intAttr("kv_num_heads", 0);
  if (heads <= 0 || kvHeads <= 0 || featuresOf(q->act.value) % heads)
    return nodeError(node) << "num_heads and kv_num_heads are required";
  int64_t d = featuresOf(q->act.value) / heads;
  // seqlens_k is the valid length minus one of each row: what the padding
  // mask keeps when rows are right-padded.
  Abstract *seqlens = operand(5), *total = operand(6);
  if (!isConcrete(seqlens) || !isConcrete(total) ||
      probeInt(total->probe->scalar()) != probeSeq)
    return nodeError(node) << "seqlens_k and total_sequence_length must come "
                              "from the attention mask's length";
  bool usesPadding = false;
  for (int64_t b = 0; b < probeBatch; ++b) {
    int64_t kept = 0;
    for (int64_t j = 0; j < probeSeq; ++j)
      kept += probeKeep.empty() || probeKeep[b][j] != 0;
    int64_t got = probeInt(seqlens->probe->data[b]);
    if (got != kept - 1)
      return nodeError(node) << "seqlens_k is not the attention mask's row "
                                "sums minus one";
    usesPadding |= kept != probeSeq;
  }
  if (intAttr("local_window_size", -1) > 0)
    return nodeError(node) << "local_window_size is not supported yet";
  if (intAttr("smooth_softmax", 0) != 0)
    return nodeError(node) << "smooth_softmax is not supported";
  Value qv = q->act.value, kv = k->act.value;
  if (intAttr("do_rotary", 0)) {
    Abstract *c = operand(7), *sn = operand(8);
    if (failed(readLeadingRows(node, c, probeSeq)) ||
        failed(readLeadingRows(node, sn, probeSeq)))
      return failure();
    if (!isConcrete(c) || !isConcrete(sn))
      return nodeError(node) << "do_rotary needs constant cos/sin caches";
    FailureOr<RopeFit> fit = fitRopeCaches(node, *c->probe, *sn->probe, d);
    if (failed(fit))
      return failure();
    bool interleaved = intAttr("rotary_interleaved", 0) != 0;
    qv = createRotary(node.getLoc(), qv, d, d, interleaved, *fit);
    kv = createRotary(node.getLoc(), kv, d, d, interleaved, *fit);
  }
  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (auto s = attrs.getAs<FloatAttr>("scale"); s && s.getValueAsDouble() != 0)
    scale = s.getValueAsDouble();
  auto softcap = attrs.getAs<FloatAttr>("softcap");
  if (usesPadding && !attentionMask)
    return nodeError(node) << "padding without an attention_mask input";
  Value y =
      AttentionOp::create(
          builder, node.getLoc(), qv.getType(), /*lse=*/Type(), qv, kv,
          v->act.value, usesPadding ? attentionMask : Value(),
          builder.getI64IntegerAttr(heads), builder.getI64IntegerAttr(kvHeads),
          builder.getI64IntegerAttr(d),
          builder.getF64FloatAttr(roundSignificant(scale)),
          builder.getUnitAttr(), IntegerAttr(),
          softcap && softcap.getValueAsDouble() > 0 ? softcap : FloatAttr())
          .getResult();
  slot(node.getResult(0)) = makeAct({y}, {probeBatch, probeSeq, featuresOf(y)});
  for (unsigned i = 1; i < node.getNumResults(); ++i) {
    Abstract cache;
    cache.kind = Abstract::KVCache;
    slot(node.getResult(i)) = cache;
  }
  return success();
}

LogicalResult Raiser::emitSkipSimplifiedLayerNorm(NodeOp node,
                                                  ArrayRef<Abstract *> in) {
  // com.microsoft: sum = input + skip; output = rms_norm(sum); the sum is
  // output 3 (the residual).
  if (in.size() < 3 || !in[0] || !in[1] || !in[2] ||
      in[0]->kind != Abstract::Act || in[1]->kind != Abstract::Act ||
      in[2]->kind != Abstract::Param || (in.size() > 3 && in[3]))
    return nodeError(node) << "expected (input, skip, gamma) activations "
                              "and weight, without bias";
  for (unsigned i : {1u, 2u})
    if (i < node.getNumResults() && !node.getResult(i).use_empty())
      return nodeError(node) << "mean and inverse standard deviation "
                                "outputs are not supported";
  const Activation &a = in[0]->act, &b = in[1]->act;
  if (a.layout != Layout::Packed || b.layout != Layout::Packed ||
      a.value.getType() != b.value.getType())
    return nodeError(node) << "input and skip must be [batch, seq, hidden]";
  Value sum = AddOp::create(builder, node.getLoc(), a.value, b.value);
  Abstract sumAbs = makeAct({sum}, in[0]->shape);
  Abstract normed = derived(Abstract::Normed, sumAbs);
  normed.group = in[0]->shape.back();
  auto eps = node.getOnnxAttrs().getAs<FloatAttr>("epsilon");
  normed.number = eps ? eps.getValueAsDouble() : 1e-5;
  Abstract y;
  if (failed(emitRmsNorm(node, normed, *in[2], y)))
    return failure();
  slot(node.getResult(0)) = y;
  if (node.getNumResults() > 3)
    slot(node.getResult(3)) = sumAbs;
  return success();
}

namespace {

/// ONNX opset-23 RMSNormalization and com.microsoft
/// SimplifiedLayerNormalization: one node for the whole norm.
FailureOr<bool> rmsNormalization(Raiser &r, NodeOp node,
                                 ArrayRef<Abstract *> in, Abstract &out) {
  if (!isAct(in, 0) || !isKind(in, 1, Abstract::Param))
    return false;
  auto axis = node.getOnnxAttrs().getAs<IntegerAttr>("axis");
  int64_t rank = in[0]->shape.size();
  if (axis && axis.getInt() != -1 && axis.getInt() != rank - 1)
    return r.nodeError(node) << "normalization over more than the last axis";
  auto eps = node.getOnnxAttrs().getAs<FloatAttr>("epsilon");
  Abstract normed = r.derived(Abstract::Normed, *in[0]);
  normed.group = in[0]->shape.back();
  normed.number = eps ? eps.getValueAsDouble() : 1e-5;
  return matched(r.emitRmsNorm(node, normed, *in[1], out));
}

/// ONNX opset-23 RotaryEmbedding (X, cos, sin, position_ids) and the
/// com.microsoft one (X, position_ids, cos, sin).
FailureOr<bool> rotaryEmbedding(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                                Abstract &out) {
  if (!isAct(in, 0))
    return false;
  return matched(r.emitFusedRotary(node, in, out));
}

/// ONNX opset-23 Attention on packed (3-D) or head-split (4-D) q, k, v.
FailureOr<bool> attention(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                          Abstract &out) {
  if (!isAct(in, 0) || !isAct(in, 1) || !isAct(in, 2))
    return false;
  return matched(r.emitFusedAttention(node, in, out));
}

} // namespace

void mlir::tp::raise::registerFusedRecognizers(RecognizerTable &table) {
  for (StringRef op : {"RMSNormalization", "SimplifiedLayerNormalization"})
    table.add(op, "fused-rms-norm", Stage::OnActivations, rmsNormalization);
  table.add("RotaryEmbedding", "fused-rotary", Stage::OnActivations,
            rotaryEmbedding);
  table.add("Attention", "fused-attention", Stage::OnActivations, attention);
}
