//===- Raiser.h - raising onnx-level IR to tp building blocks ---*- C++ -*-===//
//
// Private to passes/Raise: the abstract values of raising, the Raiser state
// and the recogniser registry. RaiseONNX.cpp is the driver; each building
// block (norms, rotary, attention, elementwise functions, linears and
// embeddings, tensor layouts, fused operators, Mamba2, the configuration)
// has its own file of recognisers.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PASSES_RAISE_RAISER_H
#define TPOPT_PASSES_RAISE_RAISER_H

#include "tpopt/Dialect/ONNX/ONNXOps.h"
#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Probe/ProbeTensor.h"
#include "tpopt/Probe/RopeFit.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "tprt/Rope.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <map>
#include <memory>
#include <unordered_map>

namespace mlir::tp::raise {

using onnx_ir::NodeOp;

/// How the logical ONNX tensor of an activation maps onto its tp value, which
/// is always packed `[batch, seq, heads * head_dim]`.
enum class Layout {
  Packed, // [B, S, F]
  Heads,  // [B, S, H, D]
  HeadsT, // [B, H, S, D]
  KeyT,   // [B, H, D, S]
  // Batch and heads flattened (the dynamo exporter's SDPA transposes k so).
  FlatHeadsT, // [B*H, S, D]
  FlatKeyT,   // [B*H, D, S]
};

struct Activation {
  Value value;
  Layout layout = Layout::Packed;
  int64_t headDim = 0;
  /// GQA: each physical head is repeated this many times (repeat_kv).
  int64_t repeat = 1;
  /// A scalar factor not yet applied (SDPA scales q and k by sqrt(scale)).
  double pendingScale = 1.0;
};

struct Abstract {
  enum Kind {
    Concrete,    // probe value in `probe`
    Ids,         // token ids graph input
    Act,         // activation
    Param,       // parameter argument (maybe with a small known value)
    ParamPlus,   // parameter + scalar `number` (Gemma's 1 + w)
    Elementwise, // expression `group` (in Raiser::exprs) of activation x
    MeanSquare,  // mean(x^2) over groups of `group`
    MeanSquareEps,
    Rms,            // sqrt(mean(x^2) + eps)
    InvRms,         // 1 / Rms
    Normed,         // x / Rms
    TableProduct,   // x * table (RoPE cos)
    RopeHalf,       // first (group 1) or second (group 2) half of x's heads
    RopeNegHalf,    // -second half
    RopeRotated,    // rotate_half(x)
    RotatedProduct, // rotate_half(x) * table (RoPE sin)
    KVUnsqueezed,   // repeat_kv: x[:, :, None]
    KVExpanded,     // repeat_kv: expanded by `group`
    Scores,         // `number` * q k^T
    MaskedScores,   // scores + table
    Probs,          // softmax(scores)
    ProbsIsNaN,     // IsNaN(probs): SDPA's guard for fully masked rows
    KVCache,        // a present key/value output, which the program drops
    EmptyPart,      // no features of activation x (a partial rotary's
                    // pass-through part when every feature rotates)
  };
  Kind kind = Concrete;
  std::optional<ProbeTensor> probe;
  /// Logical ONNX shape at the probe (for Shape nodes on activations).
  SmallVector<int64_t> shape;
  Activation act, other;
  /// Parameter: the argument of the new function and the ONNX node that
  /// first used it.
  unsigned argIndex = 0;
  bool viaTranspose = false;
  double number = 1.0;
  int64_t group = 0;
  std::shared_ptr<ProbeTensor> table;
  /// The source-IR value the mask table came from (to tell masks apart).
  Value maskSource;
  /// Run-time value of an input that is also probed (attention_mask).
  Value runtime;
  /// Computed from the attention mask (to tell which blocks read it).
  bool maskDerived = false;
};

/// What kind of value a raising error shows (`constant`, `activation`, ...).
StringRef kindName(Abstract::Kind kind);

/// A node of an elementwise expression in one variable x (an activation).
/// Exporters spell activations many ways (x * sigmoid(x), the tanh
/// expansion of GELU, relu(x) * relu(x), a Gelu node); raising collects the
/// expression and recognizes the function by evaluating it.
struct Expr {
  enum Op { X, Const, Unary, Binary } op = X;
  std::string fn; // ONNX op type for Unary/Binary
  double value = 0.0;
  int lhs = -1, rhs = -1;
};

/// A parameter's use, for naming and orientation.
struct ParamInfo {
  std::string fqn;
  /// Canonical shape and whether the stored bytes are its transpose.
  SmallVector<int64_t> canonicalShape;
  bool transposed = false;
  /// What the stored elements are of the parameter (an exporter's folding
  /// undone when loading).
  StoredForm storedForm = StoredForm::Parameter;
  bool used = false;
};

inline std::string scopeOf(NodeOp node) {
  if (auto scope = node.getScopeAttr())
    return scope.getValue().str();
  return "";
}

/// Rounds to 6 significant digits: exporters hold constants as f32.
inline double roundSignificant(double v) {
  if (v == 0 || !std::isfinite(v))
    return v;
  double scale = std::pow(10.0, 5 - std::floor(std::log10(std::fabs(v))));
  return std::round(v * scale) / scale;
}

/// RoPE's base from the angle of feature `i` (0 < i < rot / 2) at position
/// 1: angle = theta^(-2i / rot). The lowest frequency (largest i) keeps the
/// exponent near 1, so f32 rounding in the tables barely moves theta (from
/// feature 1 the error is raised to the power rot / 2).
inline double ropeThetaFromAngle(double angle, int64_t i, int64_t rot) {
  return roundSignificant(
      std::pow(angle, -static_cast<double>(rot) / (2.0 * i)));
}

/// Whether every value, as a float, is exactly a `sem` value (bf16, f16):
/// the rounding a bf16 / f16 checkpoint's export leaves in its constants
/// and tables.
inline bool allRepresentableIn(ArrayRef<double> values,
                               const llvm::fltSemantics &sem) {
  return llvm::all_of(values, [&](double v) {
    llvm::APFloat f(static_cast<float>(v));
    bool lost = false;
    f.convert(sem, llvm::APFloat::rmNearestTiesToEven, &lost);
    return !lost;
  });
}

/// Whether input `i` exists and has abstract kind `kind`.
inline bool isKind(ArrayRef<Abstract *> in, unsigned i, Abstract::Kind kind) {
  return i < in.size() && in[i] && in[i]->kind == kind;
}
inline bool isAct(ArrayRef<Abstract *> in, unsigned i) {
  return isKind(in, i, Abstract::Act);
}
/// An ONNX integer-list attribute of `node`.
inline std::optional<SmallVector<int64_t>> intsAttr(NodeOp node,
                                                    StringRef name) {
  if (auto attr = node.getOnnxAttrs().getAs<DenseI64ArrayAttr>(name))
    return SmallVector<int64_t>(attr.asArrayRef());
  return std::nullopt;
}

/// The decoder layer a module scope is in ("model.layers.3.mlp" -> 3).
inline std::optional<int64_t> decoderLayerOfScope(StringRef scope) {
  SmallVector<StringRef> parts;
  scope.split(parts, '.');
  int64_t layer;
  for (size_t i = 0; i + 1 < parts.size(); ++i)
    if ((parts[i] == "layers" || parts[i] == "h") &&
        !parts[i + 1].getAsInteger(10, layer) && layer >= 0)
      return layer;
  return std::nullopt;
}

/// The state of raising one onnx-level function: the abstract value of
/// every ONNX value, the parameters as they are named and oriented, and
/// the tp function being built. The driver (RaiseONNX.cpp) walks the nodes;
/// the recognisers (one file per building block) read and extend this
/// state.
class Raiser {
public:
  Raiser(func::FuncOp source, int64_t probeBatch, int64_t probeSeq, bool trace,
         std::optional<tprt::RopeScaling> configRope = std::nullopt,
         double configTheta = 0, StringRef configModelType = "")
      : source(source), ctx(source.getContext()), builder(ctx),
        probeBatch(probeBatch), probeSeq(probeSeq), trace(trace),
        configRope(configRope), configTheta(configTheta),
        architecture(describeArchitecture(source, configModelType)) {
    builder.setListener(&layerTagger);
  }
  Raiser(const Raiser &) = delete;

  LogicalResult run();

  // Diagnostics.
  InFlightDiagnostic nodeError(NodeOp node) {
    std::string scope = scopeOf(node);
    auto diag = node.emitError()
                << "cannot raise node '" << node.getName() << "' ("
                << node.getOpType() << ", scope '"
                << (scope.empty() ? std::string("<none>") : scope) << "'"
                << decoderBlockOf(scope) << "): ";
    diag.attachNote() << "while raising " << architecture;
    return diag;
  }
  /// What is being raised, for errors: the architecture --hf-config's
  /// model_type names, else the one the graph's parameter names suggest (the
  /// registry's traits, read off the names before any op is raised).
  static std::string describeArchitecture(func::FuncOp source,
                                          StringRef configModelType);
  /// Which decoder block a scope is in (", layer 3's block 'self_attn'"),
  /// with what tp-opt knows it cannot raise there.
  static std::string decoderBlockOf(StringRef scope) {
    SmallVector<StringRef> parts;
    scope.split(parts, '.');
    for (size_t i = 0; i + 2 < parts.size(); ++i) {
      if (parts[i] != "layers" && parts[i] != "h")
        continue;
      std::string block =
          (", layer " + parts[i + 1] + "'s block '" +
           llvm::join(ArrayRef(parts).drop_front(i + 2), ".") + "'")
              .str();
      if (llvm::any_of(ArrayRef(parts).drop_front(i + 2), [](StringRef p) {
            return p == "qkv_proj" || p == "gate_up_proj" ||
                   p == "query_key_value";
          }))
        block += ": a fused projection (Phi-3, Falcon, GPT-NeoX), whose "
                 "parts tp-opt raises when the export cuts its features "
                 "with Split or Slice";
      return block;
    }
    return "";
  }

  // Abstract value helpers.
  Abstract *lookup(Value v) {
    auto it = values.find(v.getAsOpaquePointer());
    return it == values.end() ? nullptr : &it->second;
  }
  Abstract &slot(Value v) { return values[v.getAsOpaquePointer()]; }
  /// Known at the probe: constants and side computations, and parameters
  /// small enough that the importer kept their value.
  static bool isConcrete(const Abstract *a) {
    return a && a->probe &&
           (a->kind == Abstract::Concrete || a->kind == Abstract::Param ||
            a->kind == Abstract::ParamPlus);
  }
  /// Reads the first `rows` rows of a stored f32 parameter that the importer
  /// did not inline into its probe (only for constants the raising needs,
  /// such as RoPE caches); anything else is left as it is.
  LogicalResult readLeadingRows(NodeOp node, Abstract *param, int64_t rows);
  static std::optional<double> scalarOf(const Abstract *a) {
    if (isConcrete(a) && a->probe->isScalarLike())
      return a->probe->scalar();
    return std::nullopt;
  }
  Abstract makeAct(Activation act, SmallVector<int64_t> shape) {
    Abstract a;
    a.kind = Abstract::Act;
    a.act = act;
    a.shape = std::move(shape);
    return a;
  }
  Abstract derived(Abstract::Kind kind, const Abstract &from) {
    Abstract a = from;
    a.kind = kind;
    return a;
  }

  RankedTensorType packedType(int64_t features) {
    return RankedTensorType::get(
        {ShapedType::kDynamic, ShapedType::kDynamic, features}, elementType);
  }
  int64_t featuresOf(Value v) {
    return cast<RankedTensorType>(v.getType()).getDimSize(2);
  }
  SmallVector<int64_t> logicalShape(const Activation &act) {
    int64_t f = featuresOf(act.value);
    if (act.layout == Layout::Packed)
      return {probeBatch, probeSeq, f};
    int64_t heads = f / act.headDim * act.repeat;
    switch (act.layout) {
    case Layout::Heads:
      return {probeBatch, probeSeq, heads, act.headDim};
    case Layout::HeadsT:
      return {probeBatch, heads, probeSeq, act.headDim};
    case Layout::KeyT:
      return {probeBatch, heads, act.headDim, probeSeq};
    case Layout::FlatHeadsT:
      return {probeBatch * heads, probeSeq, act.headDim};
    case Layout::FlatKeyT:
      return {probeBatch * heads, act.headDim, probeSeq};
    case Layout::Packed:
      break;
    }
    return {};
  }

  // Parameters.
  /// Names (from the node's scope plus `suffix`, or `fqn` when given),
  /// orients and types the parameter argument behind `p`.
  FailureOr<Value> useParam(NodeOp node, const Abstract &p,
                            ArrayRef<int64_t> canonicalShape, bool transposed,
                            StringRef suffix, StringRef fqn = "");

  // The driver.
  LogicalResult visit(NodeOp node);
  /// Side computations: a node whose inputs are all known is evaluated.
  LogicalResult evaluate(NodeOp node, ArrayRef<Abstract *> in);
  /// Asks the recognisers of the node's op type what it means.
  LogicalResult recognizeNode(NodeOp node, ArrayRef<Abstract *> in,
                              Abstract &out);
  /// Asks the multi-output recognisers of the node's op type; `read` lists
  /// the outputs something reads.
  LogicalResult recognizeMultiOutputNode(NodeOp node, ArrayRef<Abstract *> in,
                                         ArrayRef<unsigned> read);
  /// The reading of an ONNX `axes` attribute or (opset 13+) input.
  std::optional<SmallVector<int64_t>>
  axesOf(NodeOp node, ArrayRef<Abstract *> in, unsigned inputIndex);

  // What the recognisers emit.
  LogicalResult emitLinear(NodeOp node, Abstract &x, Abstract &w,
                           Abstract &out);
  LogicalResult emitRmsNorm(NodeOp node, Abstract &normed, Abstract &weight,
                            Abstract &out);
  LogicalResult emitRotary(NodeOp node, Abstract &cosPart, Abstract &sinPart,
                           Abstract &out);
  /// The cos or sin table entry of batch row b, position p, feature i;
  /// nullopt past the table's end.
  using TableEntry =
      llvm::function_ref<std::optional<double>(int64_t, int64_t, int64_t)>;
  /// The RoPE (theta and scaling: default, linear, llama3, or the
  /// config's) whose tables are `cosAt` / `sinAt` over `width` features
  /// (feature i at frequency i mod rot / 2) at every probed position; an
  /// error on `node` when none is. `data` are the tables' values (their
  /// rounding says a bf16 / f16 export's).
  FailureOr<RopeFit> fitRotaryTables(NodeOp node, int64_t rot, int64_t width,
                                     TableEntry cosAt, TableEntry sinAt,
                                     ArrayRef<const ProbeTensor *> data);
  /// tp.rotary of `x` with `fit`'s theta and scaling attributes.
  Value createRotary(Location loc, Value x, int64_t headDim, int64_t rotaryDim,
                     bool interleaved, const RopeFit &fit);
  LogicalResult emitAttention(NodeOp node, Abstract &probs, Abstract &v,
                              Abstract &out);
  LogicalResult emitFusedRotary(NodeOp node, ArrayRef<Abstract *> in,
                                Abstract &out);
  /// Fits RoPE to [max_pos, rot / 2] cos/sin caches and checks them at
  /// positions 0..probeSeq-1.
  FailureOr<RopeFit> fitRopeCaches(NodeOp node, const ProbeTensor &cos,
                                   const ProbeTensor &sin, int64_t rot);
  LogicalResult emitGroupQueryAttention(NodeOp node, ArrayRef<Abstract *> in);
  LogicalResult emitSkipSimplifiedLayerNorm(NodeOp node,
                                            ArrayRef<Abstract *> in);
  LogicalResult emitFusedAttention(NodeOp node, ArrayRef<Abstract *> in,
                                   Abstract &out);
  /// Reads what an attention mask (additive, or boolean with true = keep)
  /// allows at the probe: causal, a sliding window, the padding mask.
  LogicalResult classifyMask(NodeOp node, const ProbeTensor &mask,
                             Value maskSource, bool &causal, bool &usesPadding,
                             std::optional<int64_t> &window);
  /// A hash of how a side value is computed (ops, attributes, constant
  /// values): masks recomputed per layer hash alike, a sliding-window mask
  /// and a full one do not.
  llvm::hash_code structureOf(Value v);
  llvm::DenseMap<Value, llvm::hash_code> structureCache;
  FailureOr<SmallVector<int64_t>> resolveReshape(NodeOp node,
                                                 ArrayRef<int64_t> from,
                                                 const ProbeTensor &target);

  int addExpr(Expr e) {
    exprs.push_back(std::move(e));
    return exprs.size() - 1;
  }
  double evalExpr(int id, double x) const;
  /// The expression a value contributes to an elementwise expression of
  /// `source`, or -1 if it cannot (another activation, not a scalar).
  int exprOperand(Abstract *a, Value &source);
  FailureOr<bool> extendElementwise(NodeOp node, ArrayRef<Abstract *> in,
                                    Abstract &out);
  /// Emits the tp op an elementwise expression computes; replaces `a`.
  LogicalResult materialize(NodeOp node, Abstract &a);
  /// The known activation expression `id` computes, with its factor.
  std::optional<std::pair<StringRef, double>> recognizeFunction(int id);

  LogicalResult finish();
  LogicalResult recordConfig(ModuleOp module, func::FuncOp func);

  /// A module scope raised as one block (the Mamba2 mixer): its nodes are
  /// not interpreted one by one; at its last node the block is matched as a
  /// whole from its parameters, inputs and constants.
  struct ScopeBlock {
    std::string scope;
    SmallVector<NodeOp> nodes;
  };
  void findScopeBlocks();
  LogicalResult raiseMamba2(ScopeBlock &block);
  struct Mamba2Params;
  LogicalResult findMamba2Params(ScopeBlock &block, Mamba2Params &p);
  LogicalResult findMamba2Sizes(ScopeBlock &block, Mamba2Params &p);
  LogicalResult findMamba2Constants(ScopeBlock &block, Mamba2Params &p);
  std::vector<ScopeBlock> scopeBlocks;
  llvm::DenseMap<Operation *, unsigned> blockOf;

  func::FuncOp source;
  MLIRContext *ctx;
  OpBuilder builder;
  /// Tags the ops raising inserts with the decoder layer of the node being
  /// raised.
  DecoderLayerListener layerTagger;
  int64_t probeBatch, probeSeq;
  /// Remarks saying which recogniser took each node.
  bool trace;
  /// RoPE scaling a --hf-config states that tables alone cannot tell
  /// (YaRN), with its base.
  std::optional<tprt::RopeScaling> configRope;
  double configTheta;
  /// "a qwen3 graph (as its parameter names suggest)", for errors.
  std::string architecture;
  Type elementType;
  func::FuncOp target;
  /// Node-based so that pointers to abstract values survive insertions.
  std::unordered_map<const void *, Abstract> values;
  std::vector<ParamInfo> params;
  std::vector<Expr> exprs;
  std::map<size_t, std::string> maskMeaning;
  /// Probe values of the attention mask (1 = keep), or empty.
  std::vector<std::vector<int>> probeKeep;
  Value attentionMask;
};

//===----------------------------------------------------------------------===//
// Recognisers
//===----------------------------------------------------------------------===//

/// A recogniser says what one ONNX node means, given the abstract values of
/// its inputs: it sets `out` and returns true when its pattern matches,
/// returns false to let the next recogniser try, and fails (after a
/// diagnostic naming the node) when the node is its pattern but cannot be
/// raised.
using Recognizer = FailureOr<bool> (*)(Raiser &r, NodeOp node,
                                       ArrayRef<Abstract *> in, Abstract &out);

/// A recogniser of a node whose several outputs are read (or whose first
/// is not): fills `outs`, one abstract value per result read.
using MultiOutputRecognizer =
    FailureOr<bool> (*)(Raiser &r, NodeOp node, ArrayRef<Abstract *> in,
                        MutableArrayRef<Abstract> outs);

/// When a recogniser runs. Elementwise expressions (x * sigmoid(x), the
/// tanh expansion of GELU) are collected between the two stages, so a
/// recogniser that must see an expression's pieces (the square of an RMS
/// norm, a scale folded into attention) runs before them; all others see
/// their inputs as activations.
enum class Stage { BeforeExpressions, OnActivations };

/// The recognisers by ONNX op type, in registration order.
class RecognizerTable {
public:
  struct Entry {
    StringLiteral name;
    Stage stage;
    Recognizer fn;
  };
  void add(StringRef opType, StringLiteral name, Stage stage, Recognizer fn) {
    byOpType[opType].push_back({name, stage, fn});
  }
  ArrayRef<Entry> lookup(StringRef opType) const {
    auto it = byOpType.find(opType);
    return it == byOpType.end() ? ArrayRef<Entry>() : it->second;
  }
  /// Recognisers of nodes with several outputs read; they see their inputs
  /// as activations (after the expressions).
  struct MultiOutputEntry {
    StringLiteral name;
    MultiOutputRecognizer fn;
  };
  void addMultiOutput(StringRef opType, StringLiteral name,
                      MultiOutputRecognizer fn) {
    multiOutputByOpType[opType].push_back({name, fn});
  }
  ArrayRef<MultiOutputEntry> lookupMultiOutput(StringRef opType) const {
    auto it = multiOutputByOpType.find(opType);
    return it == multiOutputByOpType.end() ? ArrayRef<MultiOutputEntry>()
                                           : it->second;
  }

private:
  llvm::StringMap<SmallVector<Entry, 2>> byOpType;
  llvm::StringMap<SmallVector<MultiOutputEntry, 1>> multiOutputByOpType;
};

/// Each file of recognisers registers its own.
void registerLayoutRecognizers(RecognizerTable &table);
void registerLinearRecognizers(RecognizerTable &table);
void registerElementwiseRecognizers(RecognizerTable &table);
void registerNormRecognizers(RecognizerTable &table);
void registerRotaryRecognizers(RecognizerTable &table);
void registerAttentionRecognizers(RecognizerTable &table);
void registerFusedRecognizers(RecognizerTable &table);
void registerSliceRecognizers(RecognizerTable &table);

/// The integers of input `i` when it is known at compile time (a constant,
/// or a parameter whose value the importer kept), else nullopt.
inline std::optional<SmallVector<int64_t>> concreteInts(ArrayRef<Abstract *> in,
                                                        unsigned i) {
  if (i >= in.size() || !Raiser::isConcrete(in[i]))
    return std::nullopt;
  return probeInts(*in[i]->probe);
}

/// The success of an emit function as a recogniser's answer.
inline FailureOr<bool> matched(LogicalResult emitted) {
  if (failed(emitted))
    return failure();
  return true;
}

} // namespace mlir::tp::raise

#endif // TPOPT_PASSES_RAISE_RAISER_H
