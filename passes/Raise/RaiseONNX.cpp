//===- RaiseONNX.cpp - onnx-level IR to tp building blocks ----------------===//
//
// Abstract interpretation of the onnx-level function: every ONNX value gets
// an abstract value. Side computations (shapes, masks, RoPE tables) are
// evaluated concretely at a probe shape; activations are emitted as tp ops
// as soon as the sub-graph that computes a building block is complete, and
// partially matched blocks (the pieces of an RMS norm, of rotate_half, of
// the attention scores) are abstract values of their own. Nothing depends on
// node order or node names, except parameter naming, which uses scopes when
// the exporter dropped the FQNs.
//
// This file is the driver: it walks the nodes, evaluates side computations
// and asks the recognisers of each node's op type (Raiser.h; one file per
// building block) what the node means.
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"
#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Plan/Architecture.h"
#include "tpopt/Plan/HFConfig.h"
#include "tpopt/Plan/Plan.h"

#include "tpopt/Passes.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cstring>

#define DEBUG_TYPE "tp-raise-onnx"

namespace mlir::tp {
#define GEN_PASS_DEF_TPRAISEONNX
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

StringRef mlir::tp::raise::kindName(Abstract::Kind kind) {
  switch (kind) {
  case Abstract::Concrete:
    return "constant";
  case Abstract::Ids:
    return "token-ids";
  case Abstract::Act:
    return "activation";
  case Abstract::Param:
    return "parameter";
  case Abstract::ParamPlus:
    return "parameter-plus-constant";
  case Abstract::Elementwise:
    return "elementwise";
  case Abstract::MeanSquare:
  case Abstract::MeanSquareEps:
  case Abstract::Rms:
  case Abstract::InvRms:
  case Abstract::Normed:
    return "partial-rms-norm";
  case Abstract::TableProduct:
  case Abstract::RopeHalf:
  case Abstract::RopeNegHalf:
  case Abstract::RopeRotated:
  case Abstract::RotatedProduct:
    return "partial-rotary";
  case Abstract::KVUnsqueezed:
  case Abstract::KVExpanded:
    return "partial-repeat-kv";
  case Abstract::Scores:
  case Abstract::MaskedScores:
  case Abstract::Probs:
  case Abstract::ProbsIsNaN:
    return "partial-attention";
  case Abstract::KVCache:
    return "kv-cache";
  case Abstract::EmptyPart:
    return "empty-part";
  }
  return "unknown";
}

static bool looksLikeFqn(StringRef name) {
  return !name.contains(':') && !name.starts_with("/") && name.contains('.') &&
         (name.ends_with(".weight") || name.ends_with(".bias"));
}

FailureOr<Value> Raiser::useParam(NodeOp node, const Abstract &p,
                                  ArrayRef<int64_t> canonicalShape,
                                  bool transposed, StringRef suffix,
                                  StringRef explicitFqn) {
  ParamInfo &info = params[p.argIndex];
  std::string fqn = explicitFqn.str();
  StringRef initName = source
                           .getArgAttrOfType<StringAttr>(
                               p.argIndex, onnx_ir::ONNXDialect::kNameAttrName)
                           .getValue();
  // The module scope of the node that uses the parameter names it; an
  // exporter-kept FQN is the fallback. Scope first, because a tied
  // parameter has one initializer name for two modules (dynamo names the
  // shared embedding "lm_head.weight").
  std::string scope = scopeOf(node);
  if (!fqn.empty())
    ;
  else if (!scope.empty())
    fqn = scope + "." + suffix.str();
  else if (looksLikeFqn(initName))
    fqn = initName.str();
  else
    return nodeError(node) << "parameter '" << initName
                           << "' has no FQN and the node has no module "
                              "scope to derive one from";
  if (info.used) {
    if (info.transposed != transposed ||
        ArrayRef<int64_t>(info.canonicalShape) != canonicalShape)
      return nodeError(node) << "parameter '" << info.fqn
                             << "' is used with two different orientations";
    return target.getArgument(p.argIndex);
  }
  info.used = true;
  info.fqn = fqn;
  info.transposed = transposed;
  info.canonicalShape.assign(canonicalShape.begin(), canonicalShape.end());
  Value arg = target.getArgument(p.argIndex);
  arg.setType(RankedTensorType::get(
      canonicalShape, cast<ShapedType>(arg.getType()).getElementType()));
  return arg;
}

LogicalResult Raiser::readLeadingRows(NodeOp node, Abstract *param,
                                      int64_t rows) {
  if (!param || param->kind != Abstract::Param || param->probe)
    return success();
  auto src = source.getArgAttrOfType<SourceAttr>(param->argIndex,
                                                 TPDialect::kSourceAttrName);
  auto type =
      dyn_cast<RankedTensorType>(source.getArgument(param->argIndex).getType());
  // The importer locates the graph at the model file as it was named.
  auto model = dyn_cast<FileLineColLoc>(source.getLoc());
  if (!src || !model || !type || !type.hasStaticShape() ||
      type.getRank() == 0 || !type.getElementType().isF32() ||
      src.getTransposed())
    return success(); // stays unknown; the caller says why it needs it
  rows = std::min(rows, type.getDimSize(0));
  int64_t rowElems = type.getNumElements() / type.getDimSize(0);
  uint64_t bytes = rows * rowElems * sizeof(float);
  SmallString<256> path =
      llvm::sys::path::parent_path(model.getFilename().getValue());
  llvm::sys::path::append(path, src.getFile());
  auto file = llvm::MemoryBuffer::getFileSlice(path, bytes, src.getOffset());
  if (!file || (*file)->getBufferSize() != bytes)
    return nodeError(node) << "cannot read the first " << rows
                           << " rows of initializer '" << src.getInitializer()
                           << "' from '" << path << "'";
  ProbeTensor t;
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  t.shape[0] = rows;
  t.data.resize(rows * rowElems);
  const char *data = (*file)->getBufferStart();
  for (size_t i = 0; i < t.data.size(); ++i) {
    float v;
    std::memcpy(&v, data + i * sizeof(float), sizeof(float));
    t.data[i] = v;
  }
  param->probe = std::move(t);
  return success();
}

std::optional<SmallVector<int64_t>>
Raiser::axesOf(NodeOp node, ArrayRef<Abstract *> in, unsigned inputIndex) {
  if (auto attr = intsAttr(node, "axes"))
    return attr;
  if (inputIndex < in.size() && isConcrete(in[inputIndex])) {
    SmallVector<int64_t> axes;
    for (double v : in[inputIndex]->probe->data)
      axes.push_back(probeInt(v));
    return axes;
  }
  return std::nullopt;
}

/// Every recogniser, by op type; built once.
static const RecognizerTable &getRecognizers() {
  static const RecognizerTable table = [] {
    RecognizerTable t;
    registerLayoutRecognizers(t);
    registerLinearRecognizers(t);
    registerNormRecognizers(t);
    registerRotaryRecognizers(t);
    registerAttentionRecognizers(t);
    registerFusedRecognizers(t);
    registerSliceRecognizers(t);
    registerElementwiseRecognizers(t);
    return t;
  }();
  return table;
}

LogicalResult Raiser::recognizeNode(NodeOp node, ArrayRef<Abstract *> in,
                                    Abstract &out) {
  ArrayRef<RecognizerTable::Entry> recognizers =
      getRecognizers().lookup(node.getOpType());
  // A recogniser that fails has emitted its diagnostic: stop there.
  auto run = [&](Stage stage) -> FailureOr<bool> {
    for (const RecognizerTable::Entry &r : recognizers) {
      if (r.stage != stage)
        continue;
      FailureOr<bool> match = r.fn(*this, node, in, out);
      if (failed(match))
        return failure();
      if (!*match)
        continue;
      LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": " << node.getName() << " ("
                              << node.getOpType() << "): " << r.name << " -> "
                              << kindName(out.kind) << "\n");
      if (trace)
        node.emitRemark() << "'" << node.getName() << "' (" << node.getOpType()
                          << ") raised by " << r.name << " as "
                          << kindName(out.kind);
      return true;
    }
    return false;
  };

  FailureOr<bool> early = run(Stage::BeforeExpressions);
  if (failed(early) || *early)
    return failure(failed(early));
  FailureOr<bool> extended = extendElementwise(node, in, out);
  if (failed(extended))
    return failure();
  if (*extended)
    return success();
  for (Abstract *a : in)
    if (a && failed(materialize(node, *a)))
      return failure();
  FailureOr<bool> late = run(Stage::OnActivations);
  if (failed(late) || *late)
    return failure(failed(late));

  auto diag = nodeError(node) << "no building block matches it (inputs:";
  for (Abstract *a : in)
    diag << " " << (a ? kindName(a->kind) : "none");
  return diag << ")";
}

LogicalResult Raiser::recognizeMultiOutputNode(NodeOp node,
                                               ArrayRef<Abstract *> in,
                                               ArrayRef<unsigned> read) {
  for (Abstract *a : in)
    if (a && failed(materialize(node, *a)))
      return failure();
  std::vector<Abstract> outs(node.getNumResults());
  for (const RecognizerTable::MultiOutputEntry &r :
       getRecognizers().lookupMultiOutput(node.getOpType())) {
    FailureOr<bool> match = r.fn(*this, node, in, outs);
    if (failed(match))
      return failure();
    if (!*match)
      continue;
    LLVM_DEBUG(llvm::dbgs() << DEBUG_TYPE << ": " << node.getName() << " ("
                            << node.getOpType() << "): " << r.name << "\n");
    if (trace)
      node.emitRemark() << "'" << node.getName() << "' (" << node.getOpType()
                        << ") raised by " << r.name;
    for (unsigned i : read)
      slot(node.getResult(i)) = outs[i];
    return success();
  }
  return nodeError(node)
         << (read.size() > 1 ? "outputs " : "output ")
         << llvm::join(llvm::map_range(
                           read, [](unsigned i) { return std::to_string(i); }),
                       ", ")
         << (read.size() > 1 ? " of this node are read" : " alone is read")
         << ": raising takes a node with several read outputs when they are "
            "computed at compile time, when it is a fused block "
            "(GroupQueryAttention, SkipSimplifiedLayerNormalization), a Split "
            "of an activation's features (a fused projection's parts) or "
            "inside a Mamba2 mixer";
}

LogicalResult Raiser::evaluate(NodeOp node, ArrayRef<Abstract *> in) {
  if (node.getOpType() == "Shape" && in.size() == 1 && in[0] &&
      !isConcrete(in[0])) {
    // Shape only reads the input's shape: probe it with an empty payload.
    ProbeTensor shaped;
    shaped.kind = ProbeTensor::Kind::Int;
    if (in[0]->kind == Abstract::Param) {
      auto type =
          cast<RankedTensorType>(source.getArgument(in[0]->argIndex).getType());
      shaped.shape.assign(type.getShape().begin(), type.getShape().end());
    } else {
      shaped.shape = in[0]->shape;
    }
    llvm::Expected<std::vector<ProbeTensor>> result = evaluateOnnxOp(
        "Shape", node.getOnnxAttrs(), {std::optional<ProbeTensor>(shaped)});
    if (!result)
      return nodeError(node) << llvm::toString(result.takeError());
    Abstract a;
    a.kind = Abstract::Concrete;
    a.probe = (*result)[0];
    slot(node.getResult(0)) = a;
    return success();
  }

  SmallVector<std::optional<ProbeTensor>> inputs;
  for (Abstract *a : in)
    inputs.push_back(a ? a->probe : std::nullopt);
  llvm::Expected<std::vector<ProbeTensor>> results =
      evaluateOnnxOp(node.getOpType(), node.getOnnxAttrs(), inputs);
  if (!results)
    return nodeError(node) << llvm::toString(results.takeError());
  bool fromMask =
      llvm::any_of(in, [](Abstract *a) { return a && a->maskDerived; });
  for (auto [result, value] : llvm::zip(node.getResults(), *results)) {
    Abstract a;
    a.kind = Abstract::Concrete;
    a.probe = value;
    a.maskDerived = fromMask;
    slot(result) = a;
  }
  // A parameter stays a parameter through a transpose, a cast, or the
  // addition of a scalar (Gemma's 1 + w): its value is known too, but a
  // linear or a norm must still read it at run time.
  StringRef op = node.getOpType();
  Abstract &result = slot(node.getResult(0));
  if (in.size() >= 1 && in[0] && in[0]->kind == Abstract::Param) {
    if (op == "Transpose" || op == "Cast" || op == "Identity") {
      std::optional<ProbeTensor> value = result.probe;
      result = *in[0];
      result.probe = value;
      result.viaTranspose ^= op == "Transpose";
    }
  }
  if (op == "Add" && in.size() == 2)
    for (unsigned i = 0; i < 2; ++i)
      if (in[i]->kind == Abstract::Param && scalarOf(in[1 - i])) {
        std::optional<ProbeTensor> value = result.probe;
        result = *in[i];
        result.kind = Abstract::ParamPlus;
        result.number = *scalarOf(in[1 - i]);
        result.probe = value;
      }
  return success();
}

/// Whether raising knows `node`'s operator: the standard ONNX domain, and
/// the onnxruntime (com.microsoft) operators FusedOps.cpp raises. An
/// operator of another domain is never taken for the standard one of the
/// same name.
static bool isKnownOperator(NodeOp node) {
  StringRef domain = node.getDomain();
  if (domain.empty() || domain == "ai.onnx")
    return true;
  if (domain != "com.microsoft")
    return false;
  return llvm::is_contained({"SimplifiedLayerNormalization",
                             "SkipSimplifiedLayerNormalization",
                             "RotaryEmbedding", "GroupQueryAttention"},
                            node.getOpType());
}

LogicalResult Raiser::visit(NodeOp node) {
  layerTagger.layer = decoderLayerOfScope(scopeOf(node));
  if (!isKnownOperator(node))
    return nodeError(node) << "operator '" << node.getDomain()
                           << "::" << node.getOpType()
                           << "' is not supported (the standard ONNX "
                              "domain and onnxruntime's fused transformer "
                              "operators are)";
  if (auto it = blockOf.find(node); it != blockOf.end()) {
    ScopeBlock &block = scopeBlocks[it->second];
    // Side computations inside the block still evaluate (its constants and
    // shapes); everything else waits for the block's last node.
    if (node == block.nodes.back())
      return raiseMamba2(block);
    bool concrete = !node.getInputs().empty() || node.getOpType() == "Constant";
    for (Value in : node.getInputs())
      concrete &= isConcrete(lookup(in));
    if (!concrete)
      return success();
  }
  SmallVector<Abstract *> in;
  bool allConcrete = true;
  for (Value input : node.getInputs()) {
    if (isa<NoneType>(input.getType())) {
      in.push_back(nullptr);
      continue;
    }
    Abstract *a = lookup(input);
    if (!a)
      return nodeError(node) << "an input has no value";
    in.push_back(a);
    allConcrete &= isConcrete(a);
  }
  if ((node.getOpType() == "Shape" && in.size() == 1 && in[0] &&
       !isConcrete(in[0])) ||
      (allConcrete && node.getNumResults() >= 1))
    return evaluate(node, in);

  // Multi-output fused blocks.
  if (node.getOpType() == "GroupQueryAttention")
    return emitGroupQueryAttention(node, in);
  if (node.getOpType() == "SkipSimplifiedLayerNormalization")
    return emitSkipSimplifiedLayerNorm(node, in);
  // Trailing outputs (a norm's inverse std, attention's present key/value,
  // dropout's mask) are fine as long as nothing reads them.
  SmallVector<unsigned> read;
  for (unsigned i = 0; i < node.getNumResults(); ++i)
    if (!node.getResult(i).use_empty() &&
        (i == 0 || node.getOpType() != "Dropout"))
      read.push_back(i);
  if (read.size() > 1 || (read.size() == 1 && read[0] != 0))
    return recognizeMultiOutputNode(node, in, read);
  for (Abstract *a : in)
    if (!a)
      return nodeError(node) << "a missing optional input on an activation "
                                "is not supported";
  Abstract out;
  if (failed(recognizeNode(node, in, out)))
    return failure();
  slot(node.getResult(0)) = out;
  return success();
}

std::string Raiser::describeArchitecture(func::FuncOp source,
                                         StringRef configModelType) {
  if (!configModelType.empty()) {
    if (const Architecture *arch =
            lookupArchitectureByModelType(configModelType))
      return ("a " + arch->name + " model (model_type '" + configModelType +
              "' in --hf-config)")
          .str();
    return ("a model of model_type '" + configModelType +
            "' (--hf-config), which tp-opt does not compile")
        .str();
  }
  ArchitectureTraits traits;
  for (unsigned i = 0; i < source.getNumArguments(); ++i) {
    auto name = source.getArgAttrOfType<StringAttr>(
        i, onnx_ir::ONNXDialect::kNameAttrName);
    if (!name)
      continue;
    StringRef n = name.getValue();
    traits.mamba |= n.ends_with("A_log");
    traits.backboneNames |= n.starts_with("backbone.");
    traits.qkNorm |= n.contains(".q_norm.");
    // Gemma's sandwich norms: only its layers have them.
    traits.normWeightOffset |= n.contains("pre_feedforward_layernorm");
    traits.embeddingScale |= n.contains("pre_feedforward_layernorm");
    traits.attentionBias |= n.ends_with("self_attn.q_proj.bias");
    traits.outputProjectionBias |= n.ends_with("self_attn.o_proj.bias");
  }
  return ("a " + recognizeArchitecture(traits).name +
          " graph (as its parameter names suggest)")
      .str();
}

LogicalResult Raiser::run() {
  // The new function starts with the source's arguments; unused ones are
  // dropped at the end.
  builder.setInsertionPoint(source);
  target = func::FuncOp::create(builder, source.getLoc(), kForwardEntry,
                                source.getFunctionType());
  target->setAttr(TPDialect::kEntryAttrName,
                  builder.getStringAttr(kForwardEntry));
  Block *body = target.addEntryBlock();
  builder.setInsertionPointToEnd(body);
  params.resize(source.getNumArguments());

  for (unsigned i = 0; i < source.getNumArguments(); ++i) {
    Value arg = source.getArgument(i);
    auto name = source.getArgAttrOfType<StringAttr>(
        i, onnx_ir::ONNXDialect::kNameAttrName);
    bool isParam =
        static_cast<bool>(source.getArgAttr(i, TPDialect::kSourceAttrName)) ||
        static_cast<bool>(
            source.getArgAttr(i, onnx_ir::ONNXDialect::kValueAttrName));
    Abstract a;
    if (isParam) {
      a.kind = Abstract::Param;
      a.argIndex = i;
      if (auto value = source.getArgAttrOfType<DenseElementsAttr>(
              i, onnx_ir::ONNXDialect::kValueAttrName))
        a.probe = ProbeTensor::fromAttr(value);
      if (!source.getArgAttr(i, TPDialect::kSourceAttrName))
        a.kind = Abstract::Concrete; // typed-field constant, not a weight
      // A folded copy of a tied weight is the original, transposed.
      if (auto original = source.getArgAttrOfType<StringAttr>(
              i, onnx_ir::ONNXDialect::kTransposedCopyOfAttrName)) {
        for (unsigned j = 0; j < source.getNumArguments(); ++j)
          if (source.getArgAttrOfType<StringAttr>(
                  j, onnx_ir::ONNXDialect::kNameAttrName) == original) {
            a.argIndex = j;
            a.viaTranspose = true;
            a.probe.reset();
          }
      }
      slot(arg) = a;
      continue;
    }
    StringRef inputName = name ? name.getValue() : "";
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if (inputName == "input_ids") {
      a.kind = Abstract::Ids;
      a.runtime = target.getArgument(i);
      a.shape = {probeBatch, probeSeq};
    } else if (inputName == "attention_mask") {
      // Left padding in the first row, right padding in the last.
      std::vector<double> data;
      probeKeep.assign(probeBatch, std::vector<int>(probeSeq, 1));
      for (int64_t b = 0; b < probeBatch; ++b)
        for (int64_t s = 0; s < probeSeq; ++s) {
          bool pad = (b == 0 && s < 3) ||
                     (b == probeBatch - 1 && b != 0 && s >= probeSeq - 2);
          probeKeep[b][s] = !pad;
          data.push_back(pad ? 0 : 1);
        }
      a.kind = Abstract::Concrete;
      a.probe = ProbeTensor::ints({probeBatch, probeSeq}, data);
      if (type && !type.getElementType().isInteger(64))
        a.probe->kind = ProbeTensor::Kind::Float;
      a.maskDerived = true;
      attentionMask = target.getArgument(i);
    } else if (inputName.starts_with("past_key_values.") ||
               inputName.starts_with("past_key.") ||
               inputName.starts_with("past_value.")) {
      // A KV cache input (onnxruntime-genai writes them always): the
      // compiled program runs a whole sequence from an empty cache.
      auto cacheType = dyn_cast<RankedTensorType>(arg.getType());
      if (!cacheType || cacheType.getRank() != 4 ||
          ShapedType::isDynamic(cacheType.getDimSize(1)) ||
          ShapedType::isDynamic(cacheType.getDimSize(3)))
        return source.emitError()
               << "KV-cache input '" << inputName
               << "' must be [batch, kv_heads, past, head_dim]";
      a.kind = Abstract::Concrete;
      a.probe = ProbeTensor();
      a.probe->kind = ProbeTensor::Kind::Float;
      a.probe->shape = {probeBatch, cacheType.getDimSize(1), 0,
                        cacheType.getDimSize(3)};
    } else if (inputName == "position_ids") {
      std::vector<double> data;
      for (int64_t b = 0; b < probeBatch; ++b)
        for (int64_t s = 0; s < probeSeq; ++s)
          data.push_back(s);
      a.kind = Abstract::Concrete;
      a.probe = ProbeTensor::ints({probeBatch, probeSeq}, data);
    } else {
      return source.emitError()
             << "graph input '" << inputName
             << "' is not supported (inputs are input_ids, attention_mask, "
                "position_ids and an empty KV cache)";
    }
    slot(arg) = a;
  }

  findScopeBlocks();
  for (Operation &op : source.getBody().front()) {
    if (auto node = dyn_cast<NodeOp>(op)) {
      if (failed(visit(node)))
        return failure();
    } else if (!isa<onnx_ir::NoneOp, func::ReturnOp>(op)) {
      return op.emitError("unexpected op in an onnx-level function");
    }
  }
  return finish();
}

LogicalResult Raiser::finish() {
  layerTagger.layer.reset();
  auto ret = cast<func::ReturnOp>(source.getBody().front().getTerminator());
  SmallVector<Value> results;
  for (Value v : ret.getOperands()) {
    Abstract *a = lookup(v);
    // The cache a step would hand to the next one: not part of a forward
    // pass over the whole sequence.
    if (a && a->kind == Abstract::KVCache)
      continue;
    // An expression on the output (Gemma's final soft-capping) is raised
    // here, where nothing extends it further.
    if (a && a->kind == Abstract::Elementwise)
      if (auto node = v.getDefiningOp<NodeOp>())
        if (failed(materialize(node, *a)))
          return failure();
    if (!a || a->kind != Abstract::Act || a->act.layout != Layout::Packed)
      return ret.emitError("a graph output is not a raised activation "
                           "[batch, seq, features]");
    results.push_back(a->act.value);
  }
  func::ReturnOp::create(builder, ret.getLoc(), results);

  // Arguments: inputs stay, used parameters get their FQN and orientation,
  // everything else (constants the raising consumed) goes.
  llvm::BitVector erase(target.getNumArguments());
  for (unsigned i = 0; i < target.getNumArguments(); ++i) {
    Value arg = target.getArgument(i);
    auto sourceAttr =
        source.getArgAttrOfType<SourceAttr>(i, TPDialect::kSourceAttrName);
    if (!sourceAttr) {
      if (arg.use_empty() && lookup(source.getArgument(i)) &&
          lookup(source.getArgument(i))->kind == Abstract::Concrete &&
          lookup(source.getArgument(i))->runtime == Value() &&
          arg != attentionMask)
        erase.set(i);
      if (auto name = source.getArgAttr(i, onnx_ir::ONNXDialect::kNameAttrName))
        target.setArgAttr(i, onnx_ir::ONNXDialect::kNameAttrName, name);
      continue;
    }
    const ParamInfo &info = params[i];
    if (!info.used) {
      if (!arg.use_empty())
        return source.emitError()
               << "internal: parameter " << sourceAttr.getInitializer()
               << " used without a name";
      erase.set(i);
      continue;
    }
    target.setArgAttr(i, TPDialect::kFqnAttrName,
                      builder.getStringAttr(info.fqn));
    target.setArgAttr(
        i, TPDialect::kSourceAttrName,
        SourceAttr::get(ctx, sourceAttr.getInitializer(), sourceAttr.getFile(),
                        sourceAttr.getOffset(), sourceAttr.getLength(),
                        info.transposed, sourceAttr.getStoredType(),
                        sourceAttr.getStoredOffset(), info.storedForm));
  }
  target.setType(FunctionType::get(ctx, target.getBody().getArgumentTypes(),
                                   ValueRange(results).getTypes()));
  if (failed(target.eraseArguments(erase)))
    return failure();
  if (failed(recordConfig(source->getParentOfType<ModuleOp>(), target)))
    return failure();
  source.erase();
  return success();
}

namespace {

struct TPRaiseONNXPass : public tp::impl::TPRaiseONNXBase<TPRaiseONNXPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<func::FuncOp> graphs;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.getBody().empty() &&
          llvm::any_of(func.getBody().front(),
                       [](Operation &op) { return isa<NodeOp>(op); }))
        graphs.push_back(func);
    // An imported graph without a node (only inputs passed through) has
    // nothing to raise; a module raised before has its tp.config.
    if (graphs.empty() && !getOperation()->hasAttr(ModelConfig::kAttrName)) {
      InFlightDiagnostic diag = getOperation().emitError(
          "nothing to raise: no function holds an ONNX node");
      for (auto func : getOperation().getOps<func::FuncOp>())
        diag.attachNote(func.getLoc())
            << "'@" << func.getSymName() << "' has no onnx.node";
      return signalPassFailure();
    }
    if (probeSeq < 4 || probeBatch < 1) {
      getOperation().emitError("probe-seq must be >= 4 and probe-batch >= 1");
      return signalPassFailure();
    }
    std::optional<tprt::RopeScaling> configRope;
    double configTheta = 0;
    std::string modelType;
    if (!hfConfig.empty() &&
        failed(readConfigRope(configRope, configTheta, modelType)))
      return signalPassFailure();
    for (func::FuncOp func : graphs) {
      Raiser raiser(func, probeBatch, probeSeq, trace, configRope, configTheta,
                    modelType);
      if (failed(raiser.run()))
        return signalPassFailure();
    }
    // The module-level ONNX bookkeeping is no longer meaningful.
    getOperation()->removeAttr("onnx.opset_import");
  }

  /// LongRoPE's parameters as _compute_longrope_parameters reads them: the
  /// per-pair factors, the original length, and the attention factor (given,
  /// or sqrt(1 + ln(factor) / ln(original)) with factor defaulting to
  /// max_position_embeddings / original).
  LogicalResult readLongrope(const llvm::json::Object &json,
                             const llvm::json::Object &params,
                             std::optional<tprt::RopeScaling> &rope,
                             double &theta) {
    auto fail = [&](const Twine &what) {
      getOperation().emitError()
          << "hf-config '" << hfConfig << "': longrope " << what;
      return failure();
    };
    tprt::RopeScaling longrope;
    longrope.type = tprt::RopeType::Longrope;
    for (auto [key, into] : {std::pair{"short_factor", &longrope.shortFactor},
                             std::pair{"long_factor", &longrope.longFactor}}) {
      const llvm::json::Array *list = params.getArray(key);
      if (!list)
        return fail(Twine("needs ") + key);
      for (const llvm::json::Value &v : *list) {
        std::optional<double> f = v.getAsNumber();
        if (!f || !(*f > 0))
          return fail(Twine(key) + " must hold positive numbers");
        into->push_back(*f);
      }
    }
    std::optional<int64_t> original =
        params.getInteger("original_max_position_embeddings");
    if (!original || *original <= 1)
      return fail("needs original_max_position_embeddings");
    longrope.originalMaxPositions = *original;
    std::optional<double> factor = params.getNumber("factor");
    if (!factor) {
      std::optional<int64_t> max = json.getInteger("max_position_embeddings");
      if (!max)
        return fail("needs factor or max_position_embeddings");
      factor = static_cast<double>(*max) / *original;
    }
    std::optional<double> attention = params.getNumber("attention_factor");
    longrope.attentionFactor =
        attention ? *attention
        : *factor <= 1.0
            ? 1.0
            : std::sqrt(1 + std::log(*factor) / std::log(*original));
    if (theta <= 0)
      return fail("needs rope_theta");
    rope = longrope;
    return success();
  }

  /// The config's model_type; YaRN's parameters from the config's
  /// rope_parameters (or rope_scaling),
  /// with transformers' defaults (_compute_yarn_parameters), and dynamic
  /// NTK's (factor, max_position_embeddings): neither can be read off the
  /// tables (an export traced at a short length holds dynamic's unscaled
  /// ones); linear's and llama3's, which the tables show but which raising
  /// then checks rather than fits.
  LogicalResult readConfigRope(std::optional<tprt::RopeScaling> &rope,
                               double &theta, std::string &modelType) {
    llvm::Expected<llvm::json::Object> file = readHFConfig(hfConfig);
    if (!file) {
      getOperation().emitError()
          << "hf-config: " << llvm::toString(file.takeError());
      return failure();
    }
    const llvm::json::Object *json = &*file;
    // The architecture, for errors (CheckHFConfig checks it against the
    // raised graph).
    if (std::optional<StringRef> type = json->getString("model_type"))
      modelType = type->str();
    if (const llvm::json::Object *text = json->getObject("text_config"))
      json = text;
    const llvm::json::Object *params = json->getObject("rope_parameters");
    if (!params)
      params = json->getObject("rope_scaling");
    // The base, for tables too coarse to read it from exactly (bf16).
    if (std::optional<double> t = json->getNumber("rope_theta"))
      theta = *t;
    if (params)
      if (std::optional<double> t = params->getNumber("rope_theta"))
        theta = *t;
    if (!params)
      return success();
    std::optional<StringRef> type = params->getString("rope_type");
    if (!type)
      type = params->getString("type");
    if (type == StringRef("dynamic")) {
      std::optional<double> factor = params->getNumber("factor");
      std::optional<int64_t> max = json->getInteger("max_position_embeddings");
      if (!factor || !(*factor >= 1) || !max || *max <= 0) {
        getOperation().emitError() << "hf-config '" << hfConfig
                                   << "': dynamic RoPE needs a factor >= 1 and "
                                      "max_position_embeddings";
        return failure();
      }
      tprt::RopeScaling dynamic;
      dynamic.type = tprt::RopeType::Dynamic;
      dynamic.factor = *factor;
      dynamic.originalMaxPositions = *max;
      rope = dynamic;
      return success();
    }
    if (type == StringRef("longrope"))
      return readLongrope(*json, *params, rope, theta);
    if (type == StringRef("llama3") || type == StringRef("linear")) {
      // What transformers requires of each (_validate_*_parameters).
      bool llama3 = type == StringRef("llama3");
      std::optional<double> factor = params->getNumber("factor"),
                            low = params->getNumber("low_freq_factor"),
                            high = params->getNumber("high_freq_factor");
      std::optional<int64_t> original =
          params->getInteger("original_max_position_embeddings");
      if (!factor || !(*factor >= 1) ||
          (llama3 && (!low || !high || !original || !(*low > 0) ||
                      !(*high > 0) || *original <= 0))) {
        getOperation().emitError()
            << "hf-config '" << hfConfig << "': " << *type
            << (llama3 ? " RoPE needs a factor >= 1, positive low_freq_factor "
                         "and high_freq_factor, and "
                         "original_max_position_embeddings"
                       : " RoPE needs a factor >= 1");
        return failure();
      }
      tprt::RopeScaling scaling;
      scaling.type = llama3 ? tprt::RopeType::Llama3 : tprt::RopeType::Linear;
      scaling.factor = *factor;
      if (llama3) {
        scaling.lowFreqFactor = *low;
        scaling.highFreqFactor = *high;
        scaling.originalMaxPositions = *original;
      }
      rope = scaling;
      return success();
    }
    if (type != StringRef("yarn"))
      return success();
    auto fail = [&](const Twine &what) {
      getOperation().emitError()
          << "hf-config '" << hfConfig << "': yarn " << what;
      return failure();
    };
    tprt::RopeScaling yarn;
    yarn.type = tprt::RopeType::Yarn;
    std::optional<double> base = params->getNumber("rope_theta");
    if (!base)
      base = json->getNumber("rope_theta");
    std::optional<int64_t> original =
        params->getInteger("original_max_position_embeddings");
    if (!base || !original)
      return fail("needs rope_theta and original_max_position_embeddings");
    theta = *base;
    yarn.originalMaxPositions = *original;
    std::optional<double> factor = params->getNumber("factor");
    if (!factor) {
      std::optional<int64_t> max = json->getInteger("max_position_embeddings");
      if (!max)
        return fail("needs factor or max_position_embeddings");
      factor = static_cast<double>(*max) / *original;
    }
    yarn.factor = *factor;
    auto mscale = [](double scale, double m) {
      return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0;
    };
    if (std::optional<double> a = params->getNumber("attention_factor")) {
      yarn.attentionFactor = *a;
    } else {
      std::optional<double> m = params->getNumber("mscale"),
                            all = params->getNumber("mscale_all_dim");
      yarn.attentionFactor = m && all && *m && *all
                                 ? mscale(*factor, *m) / mscale(*factor, *all)
                                 : mscale(*factor, 1);
    }
    // `or` in transformers: 0 and null both take the default.
    yarn.betaFast = params->getNumber("beta_fast").value_or(0);
    if (!yarn.betaFast)
      yarn.betaFast = 32;
    yarn.betaSlow = params->getNumber("beta_slow").value_or(0);
    if (!yarn.betaSlow)
      yarn.betaSlow = 1;
    yarn.truncate = params->getBoolean("truncate").value_or(true);
    rope = yarn;
    return success();
  }
};

} // namespace
