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
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/ONNX/ONNXOps.h"
#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Passes.h"
#include "tpopt/Plan/Architecture.h"
#include "tpopt/Probe/ProbeTensor.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

namespace mlir::tp {
#define GEN_PASS_DEF_TPRAISEONNX
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;
using onnx_ir::NodeOp;

namespace {

/// How the logical ONNX tensor of an activation maps onto its tp value, which
/// is always packed `[batch, seq, heads * head_dim]`.
enum class Layout {
  Packed, // [B, S, F]
  Heads,  // [B, S, H, D]
  HeadsT, // [B, H, S, D]
  KeyT,   // [B, H, D, S]
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
    KVCache,        // a present key/value output, which the program drops
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

StringRef kindName(Abstract::Kind kind) {
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
    return "partial-attention";
  case Abstract::KVCache:
    return "kv-cache";
  }
  return "unknown";
}

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
  bool used = false;
};

std::string scopeOf(NodeOp node) {
  if (auto scope = node.getScopeAttr())
    return scope.getValue().str();
  return "";
}

bool looksLikeFqn(StringRef name) {
  return !name.contains(':') && !name.starts_with("/") && name.contains('.') &&
         (name.ends_with(".weight") || name.ends_with(".bias"));
}

/// Rounds to 6 significant digits: exporters hold constants as f32.
double roundSignificant(double v) {
  if (v == 0 || !std::isfinite(v))
    return v;
  double scale = std::pow(10.0, 5 - std::floor(std::log10(std::fabs(v))));
  return std::round(v * scale) / scale;
}

/// RoPE's base from the angle of feature `i` (0 < i < rot / 2) at position
/// 1: angle = theta^(-2i / rot). The lowest frequency (largest i) keeps the
/// exponent near 1, so f32 rounding in the tables barely moves theta (from
/// feature 1 the error is raised to the power rot / 2).
static double ropeThetaFromAngle(double angle, int64_t i, int64_t rot) {
  return roundSignificant(
      std::pow(angle, -static_cast<double>(rot) / (2.0 * i)));
}

class Raiser {
public:
  Raiser(func::FuncOp source, int64_t probeBatch, int64_t probeSeq)
      : source(source), ctx(source.getContext()), builder(ctx),
        probeBatch(probeBatch), probeSeq(probeSeq) {}

  LogicalResult run();

private:
  // Diagnostics.
  InFlightDiagnostic nodeError(NodeOp node) {
    std::string scope = scopeOf(node);
    auto diag = node.emitError()
                << "cannot raise node '" << node.getName() << "' ("
                << node.getOpType() << ", scope '"
                << (scope.empty() ? std::string("<none>") : scope) << "'): ";
    return diag;
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

  // Handlers.
  LogicalResult visit(NodeOp node);
  LogicalResult visitPattern(NodeOp node, ArrayRef<Abstract *> in,
                             Abstract &out);
  LogicalResult emitLinear(NodeOp node, Abstract &x, Abstract &w,
                           Abstract &out);
  LogicalResult emitRmsNorm(NodeOp node, Abstract &normed, Abstract &weight,
                            Abstract &out);
  LogicalResult emitRotary(NodeOp node, Abstract &cosPart, Abstract &sinPart,
                           Abstract &out);
  LogicalResult emitAttention(NodeOp node, Abstract &probs, Abstract &v,
                              Abstract &out);
  LogicalResult emitFusedRotary(NodeOp node, ArrayRef<Abstract *> in,
                                Abstract &out);
  /// Fits theta to [max_pos, rot / 2] cos/sin caches and checks them at
  /// positions 0..probeSeq-1.
  FailureOr<double> fitRopeCaches(NodeOp node, const ProbeTensor &cos,
                                  const ProbeTensor &sin, int64_t rot);
  LogicalResult emitGroupQueryAttention(NodeOp node, ArrayRef<Abstract *> in);
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
  std::optional<std::pair<StringRef, double>> recognize(int id);

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
  std::vector<ScopeBlock> scopeBlocks;
  llvm::DenseMap<Operation *, unsigned> blockOf;

  func::FuncOp source;
  MLIRContext *ctx;
  OpBuilder builder;
  int64_t probeBatch, probeSeq;
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

double Raiser::evalExpr(int id, double x) const {
  const Expr &e = exprs[id];
  switch (e.op) {
  case Expr::X:
    return x;
  case Expr::Const:
    return e.value;
  case Expr::Unary: {
    double a = evalExpr(e.lhs, x);
    if (e.fn == "Tanh")
      return std::tanh(a);
    if (e.fn == "Sigmoid")
      return 1.0 / (1.0 + std::exp(-a));
    if (e.fn == "Erf")
      return std::erf(a);
    if (e.fn == "Relu")
      return std::max(a, 0.0);
    if (e.fn == "Neg")
      return -a;
    if (e.fn == "Exp")
      return std::exp(a);
    if (e.fn == "Abs")
      return std::fabs(a);
    if (e.fn == "Softplus")
      return std::log1p(std::exp(a));
    if (e.fn == "GeluTanh")
      return 0.5 * a *
             (1 + std::tanh(std::sqrt(2 / M_PI) * (a + 0.044715 * a * a * a)));
    if (e.fn == "Gelu")
      return 0.5 * a * (1 + std::erf(a / std::sqrt(2.0)));
    return NAN;
  }
  case Expr::Binary: {
    double a = evalExpr(e.lhs, x), b = evalExpr(e.rhs, x);
    if (e.fn == "Add")
      return a + b;
    if (e.fn == "Sub")
      return a - b;
    if (e.fn == "Mul")
      return a * b;
    if (e.fn == "Div")
      return a / b;
    if (e.fn == "Pow")
      return std::pow(a, b);
    return NAN;
  }
  }
  return NAN;
}

int Raiser::exprOperand(Abstract *a, Value &source) {
  if (!a)
    return -1;
  // Scalars may be Constant nodes or (dynamo) scalar initializers.
  if (auto scalar = scalarOf(a))
    return addExpr({Expr::Const, "", *scalar});
  Value v;
  int id = -1;
  if (a->kind == Abstract::Act) {
    v = a->act.value;
    id = addExpr({Expr::X});
  } else if (a->kind == Abstract::Elementwise) {
    v = a->act.value;
    id = a->group;
  } else {
    return -1;
  }
  if (source && source != v)
    return -1;
  source = v;
  return id;
}

FailureOr<bool> Raiser::extendElementwise(NodeOp node, ArrayRef<Abstract *> in,
                                          Abstract &out) {
  static const llvm::StringSet<> unary = {"Tanh", "Sigmoid",  "Erf",
                                          "Relu", "Neg",      "Exp",
                                          "Abs",  "Softplus", "Gelu"};
  static const llvm::StringSet<> binary = {"Add", "Sub", "Mul", "Div", "Pow"};
  StringRef op = node.getOpType();
  Value source;
  Abstract *base = nullptr;
  for (Abstract *a : in)
    if (a && (a->kind == Abstract::Act || a->kind == Abstract::Elementwise)) {
      base = a;
      break;
    }
  if (!base)
    return false;
  int id;
  if (unary.contains(op) && in.size() == 1) {
    int operand = exprOperand(in[0], source);
    if (operand < 0)
      return false;
    std::string fn = op.str();
    if (op == "Gelu") {
      auto approx = node.getOnnxAttrs().getAs<StringAttr>("approximate");
      fn = approx && approx.getValue() == "tanh" ? "GeluTanh" : "Gelu";
    }
    id = addExpr({Expr::Unary, fn, 0.0, operand});
  } else if (binary.contains(op) && in.size() == 2) {
    size_t mark = exprs.size();
    int lhs = exprOperand(in[0], source);
    int rhs = lhs < 0 ? -1 : exprOperand(in[1], source);
    if (lhs < 0 || rhs < 0) {
      exprs.resize(mark);
      return false;
    }
    id = addExpr({Expr::Binary, op.str(), 0.0, lhs, rhs});
  } else {
    return false;
  }
  out = *base;
  out.kind = Abstract::Elementwise;
  out.group = id;
  // A value with several users is an activation in its own right (the
  // scaled Gemma embedding feeds both a norm and the residual) when it is a
  // known function; otherwise (relu(x) in relu(x) * relu(x)) its users
  // extend it further.
  if (!node.getResult(0).hasOneUse() && recognize(out.group))
    return succeeded(materialize(node, out));
  return true;
}

std::optional<std::pair<StringRef, double>> Raiser::recognize(int id) {
  auto matches = [&](llvm::function_ref<double(double)> f) {
    for (int i = 0; i <= 96; ++i) {
      double x = -6.0 + i * 0.125;
      double got = evalExpr(id, x), want = f(x);
      if (!(std::fabs(got - want) <= 1e-5 * std::max(1.0, std::fabs(want))))
        return false;
    }
    return true;
  };
  // f = c * g for a known activation g (c = 1 mostly; exporters may fold a
  // following constant factor into the chain).
  using Fn = double (*)(double);
  static const std::pair<const char *, Fn> known[] = {
      {"identity", [](double x) { return x; }},
      {"silu", [](double x) { return x / (1.0 + std::exp(-x)); }},
      {"gelu_tanh",
       [](double x) {
         return 0.5 * x *
                (1 +
                 std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
       }},
      {"gelu",
       [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
      {"relu_squared", [](double x) { return x > 0 ? x * x : 0.0; }},
  };
  for (auto [name, g] : known) {
    double factor = evalExpr(id, 1.5) / g(1.5);
    if (std::isfinite(factor) && factor != 0.0 &&
        matches([&](double x) { return factor * g(x); }))
      return std::make_pair(StringRef(name), roundSignificant(factor));
  }
  return std::nullopt;
}

LogicalResult Raiser::materialize(NodeOp node, Abstract &a) {
  if (a.kind != Abstract::Elementwise)
    return success();
  int id = a.group;
  Activation result = a.act;
  Location loc = node.getLoc();
  Value x = a.act.value;
  std::optional<std::pair<StringRef, double>> known = recognize(id);
  if (!known)
    return nodeError(node) << "the elementwise function computed before this "
                              "node (f(1) = "
                           << evalExpr(id, 1.0)
                           << ", f(-1) = " << evalExpr(id, -1.0)
                           << ") is not SiLU, GELU, squared ReLU or a scale";
  auto [match, c] = *known;
  Value y = x;
  if (match == "silu")
    y = SiluOp::create(builder, loc, x);
  else if (match == "gelu_tanh" || match == "gelu")
    y = GeluOp::create(builder, loc, x,
                       GeluApproximationAttr::get(
                           ctx, match == "gelu" ? GeluApproximation::None
                                                : GeluApproximation::Tanh));
  else if (match == "relu_squared")
    y = ReluSquaredOp::create(builder, loc, x);
  if (c != 1.0)
    y = ScaleOp::create(builder, loc, y, builder.getF64FloatAttr(c));
  result.value = y;
  a.kind = Abstract::Act;
  a.act = result;
  a.group = 0;
  return success();
}

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
  IntegerAttr groupAttr;
  if (group != features)
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

/// Index of the table element broadcast to logical position (b, p, i) of an
/// activation in `layout` (head index 0).
static std::optional<double> tableAt(const ProbeTensor &table, Layout layout,
                                     int64_t b, int64_t p, int64_t i) {
  SmallVector<int64_t> idx;
  if (layout == Layout::Heads)
    idx = {b, p, 0, i};
  else
    idx = {b, 0, p, i};
  if (table.rank() > 4)
    return std::nullopt;
  return table.data[table.broadcastIndex(idx)];
}

LogicalResult Raiser::emitRotary(NodeOp node, Abstract &cosPart,
                                 Abstract &sinPart, Abstract &out) {
  const Activation &x = cosPart.act;
  if (x.value != sinPart.act.value || x.layout != sinPart.act.layout)
    return nodeError(node) << "the cos and sin halves of a rotary embedding "
                              "apply to different tensors";
  if (x.layout != Layout::Heads && x.layout != Layout::HeadsT)
    return nodeError(node) << "rotary embedding of an activation that is not "
                              "split into heads";
  int64_t d = x.headDim, half = d / 2;
  const ProbeTensor &cosT = *cosPart.table, &sinT = *sinPart.table;
  if (cosT.shape.empty() || cosT.shape.back() != d || sinT.shape.empty() ||
      sinT.shape.back() != d)
    return nodeError(node) << "the rotary tables are not [.., seq, head_dim]";
  // Fit the lowest frequency at position 1, then check every entry.
  double theta = 10000.0;
  if (half >= 2) {
    double f = std::atan2(*tableAt(sinT, x.layout, 0, 1, half - 1),
                          *tableAt(cosT, x.layout, 0, 1, half - 1));
    if (!(f > 0))
      return nodeError(node) << "cannot read a rotary frequency from the "
                                "cos/sin tables";
    theta = ropeThetaFromAngle(f, half - 1, d);
  }
  for (int64_t b = 0; b < probeBatch; ++b)
    for (int64_t p = 0; p < probeSeq; ++p)
      for (int64_t i = 0; i < d; ++i) {
        float freq = static_cast<float>(
            std::pow(theta, -2.0 * static_cast<double>(i % half) / d));
        float angle = static_cast<float>(p) * freq;
        double c = *tableAt(cosT, x.layout, b, p, i);
        double s = *tableAt(sinT, x.layout, b, p, i);
        if (std::fabs(c - std::cos(angle)) > 1e-4 ||
            std::fabs(s - std::sin(angle)) > 1e-4)
          return nodeError(node)
                 << "the rotary tables do not match RoPE with theta " << theta
                 << " at positions 0..seq-1 (batch " << b << ", position " << p
                 << ", feature " << i << ": cos " << c << ", sin " << s << ")";
      }
  Value y = RotaryOp::create(builder, node.getLoc(), x.value.getType(), x.value,
                             builder.getI64IntegerAttr(d),
                             builder.getF64FloatAttr(theta), IntegerAttr(),
                             UnitAttr());
  Activation result = x;
  result.value = y;
  out = makeAct(result, cosPart.shape);
  return success();
}

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
      if (m.rank() > 4)
        return std::nullopt;
      double value = m.data[m.broadcastIndex({b, 0, i, j})];
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
  Value y = AttentionOp::create(
      builder, node.getLoc(), q.value.getType(), q.value, k.value, v.act.value,
      mask, builder.getI64IntegerAttr(heads),
      builder.getI64IntegerAttr(kvHeads), builder.getI64IntegerAttr(d),
      builder.getF64FloatAttr(roundSignificant(scale)),
      causal ? builder.getUnitAttr() : UnitAttr(),
      window ? builder.getI64IntegerAttr(*window) : IntegerAttr(), FloatAttr());
  Activation result;
  result.value = y;
  result.layout = Layout::HeadsT;
  result.headDim = d;
  out = makeAct(result, logicalShape(result));
  return success();
}

FailureOr<SmallVector<int64_t>>
Raiser::resolveReshape(NodeOp node, ArrayRef<int64_t> from,
                       const ProbeTensor &targetT) {
  bool allowZero = false;
  if (auto attr = node.getOnnxAttrs().getAs<IntegerAttr>("allowzero"))
    allowZero = attr.getInt() != 0;
  SmallVector<int64_t> shape;
  int64_t inferred = -1, known = 1, total = 1;
  for (int64_t d : from)
    total *= d;
  for (double v : targetT.data) {
    int64_t d = probeInt(v);
    if (d == 0 && !allowZero) {
      if (shape.size() >= from.size())
        return nodeError(node) << "reshape copies a missing dimension";
      d = from[shape.size()];
    }
    if (d == -1)
      inferred = shape.size();
    else
      known *= d;
    shape.push_back(d);
  }
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return nodeError(node) << "reshape cannot infer its -1 dimension";
    shape[inferred] = total / known;
  }
  return shape;
}

LogicalResult Raiser::visitPattern(NodeOp node, ArrayRef<Abstract *> in,
                                   Abstract &out) {
  StringRef op = node.getOpType();
  auto is = [&](unsigned i, Abstract::Kind kind) {
    return i < in.size() && in[i] && in[i]->kind == kind;
  };
  auto isAct = [&](unsigned i) { return is(i, Abstract::Act); };
  auto intsAttr = [&](StringRef name) -> std::optional<SmallVector<int64_t>> {
    if (auto attr = node.getOnnxAttrs().getAs<DenseI64ArrayAttr>(name))
      return SmallVector<int64_t>(attr.asArrayRef());
    return std::nullopt;
  };
  auto axesOf =
      [&](unsigned inputIndex) -> std::optional<SmallVector<int64_t>> {
    if (auto attr = intsAttr("axes"))
      return attr;
    if (inputIndex < in.size() && isConcrete(in[inputIndex])) {
      SmallVector<int64_t> axes;
      for (double v : in[inputIndex]->probe->data)
        axes.push_back(probeInt(v));
      return axes;
    }
    return std::nullopt;
  };

  if (op == "Cast" || op == "Identity" || op == "Dropout") {
    out = *in[0];
    return success();
  }

  // A norm's mean of squares: the square may be x * x or x ^ 2.
  if (op == "ReduceMean" && is(0, Abstract::Elementwise)) {
    std::optional<SmallVector<int64_t>> axes = axesOf(1);
    int64_t rank = in[0]->shape.size();
    bool lastAxis = axes && axes->size() == 1 &&
                    ((*axes)[0] == -1 || (*axes)[0] == rank - 1);
    auto keep = node.getOnnxAttrs().getAs<IntegerAttr>("keepdims");
    bool square = true;
    for (double x : {-2.5, -1.0, 0.5, 3.0})
      square &= std::fabs(evalExpr(in[0]->group, x) - x * x) < 1e-9;
    if (lastAxis && square && (!keep || keep.getInt() == 1)) {
      out = derived(Abstract::MeanSquare, *in[0]);
      out.group = in[0]->shape.back();
      return success();
    }
  }

  // Scaling head-split q or k (SDPA applies sqrt(scale) to each): fold into
  // the attention's scale.
  if (op == "Mul")
    for (unsigned i = 0; i < 2; ++i)
      if (isAct(i) && in[i]->act.layout != Layout::Packed &&
          scalarOf(in[1 - i])) {
        out = *in[i];
        out.act.pendingScale *= *scalarOf(in[1 - i]);
        return success();
      }

  FailureOr<bool> extended = extendElementwise(node, in, out);
  if (failed(extended))
    return failure();
  if (*extended)
    return success();
  for (Abstract *a : in)
    if (a && failed(materialize(node, *a)))
      return failure();

  // ONNX opset-23 RMSNormalization and com.microsoft
  // SimplifiedLayerNormalization: one node for the whole norm.
  if ((op == "RMSNormalization" || op == "SimplifiedLayerNormalization") &&
      isAct(0) && is(1, Abstract::Param)) {
    auto axis = node.getOnnxAttrs().getAs<IntegerAttr>("axis");
    int64_t rank = in[0]->shape.size();
    if (axis && axis.getInt() != -1 && axis.getInt() != rank - 1)
      return nodeError(node) << "normalization over more than the last axis";
    auto eps = node.getOnnxAttrs().getAs<FloatAttr>("epsilon");
    Abstract normed = derived(Abstract::Normed, *in[0]);
    normed.group = in[0]->shape.back();
    normed.number = eps ? eps.getValueAsDouble() : 1e-5;
    return emitRmsNorm(node, normed, *in[1], out);
  }

  // ONNX opset-23 RotaryEmbedding (X, cos, sin, position_ids) and the
  // com.microsoft one (X, position_ids, cos, sin).
  if (op == "RotaryEmbedding" && isAct(0))
    return emitFusedRotary(node, in, out);

  // ONNX opset-23 Attention on packed (3-D) or head-split (4-D) q, k, v.
  if (op == "Attention" && isAct(0) && isAct(1) && isAct(2))
    return emitFusedAttention(node, in, out);

  // Scores masked by Where(keep, scores, very negative).
  if (op == "Where" && in.size() == 3 && isConcrete(in[0]) &&
      (is(1, Abstract::Scores)) && scalarOf(in[2]) &&
      *scalarOf(in[2]) <= -1e4) {
    out = derived(Abstract::MaskedScores, *in[1]);
    ProbeTensor keep = *in[0]->probe;
    keep.kind = ProbeTensor::Kind::Bool;
    out.table = std::make_shared<ProbeTensor>(keep);
    out.maskSource = node.getInputs()[0];
    return success();
  }

  if (op == "Gather" && is(0, Abstract::Param) && is(1, Abstract::Ids)) {
    auto table =
        cast<RankedTensorType>(source.getArgument(in[0]->argIndex).getType());
    if (table.getRank() != 2)
      return nodeError(node) << "embedding table is not 2-D: " << table;
    FailureOr<Value> w =
        useParam(node, *in[0], table.getShape(), false, "weight");
    if (failed(w))
      return failure();
    elementType = table.getElementType();
    Value y = EmbeddingOp::create(builder, node.getLoc(),
                                  packedType(table.getDimSize(1)),
                                  in[1]->runtime, *w);
    out = makeAct({y}, {probeBatch, probeSeq, table.getDimSize(1)});
    return success();
  }

  if (op == "Transpose") {
    std::optional<SmallVector<int64_t>> perm = intsAttr("perm");
    if (is(0, Abstract::Param)) {
      out = *in[0];
      out.viaTranspose = !out.viaTranspose;
      return success();
    }
    if (isAct(0) && perm) {
      Activation act = in[0]->act;
      ArrayRef<int64_t> p = *perm;
      bool swap12 = p == ArrayRef<int64_t>{0, 2, 1, 3};
      if (act.layout == Layout::Heads && swap12)
        act.layout = Layout::HeadsT;
      else if (act.layout == Layout::HeadsT && swap12)
        act.layout = Layout::Heads;
      else if (act.layout == Layout::HeadsT &&
               p == ArrayRef<int64_t>{0, 1, 3, 2})
        act.layout = Layout::KeyT;
      else if (act.layout == Layout::Heads &&
               p == ArrayRef<int64_t>{0, 2, 3, 1})
        act.layout = Layout::KeyT;
      else
        return nodeError(node) << "unsupported transpose of an activation";
      out = makeAct(act, logicalShape(act));
      return success();
    }
  }

  if (op == "Reshape" && isConcrete(in[1])) {
    if (isAct(0) || is(0, Abstract::KVExpanded)) {
      FailureOr<SmallVector<int64_t>> shape =
          resolveReshape(node, in[0]->shape, *in[1]->probe);
      if (failed(shape))
        return failure();
      const SmallVector<int64_t> &s = *shape;
      Activation act = in[0]->act;
      if (s == in[0]->shape) {
        out = *in[0];
        return success();
      }
      if (is(0, Abstract::KVExpanded) && s.size() == 4 &&
          s[1] == in[0]->shape[1] * in[0]->shape[2]) {
        act.repeat *= in[0]->group;
        out = makeAct(act, logicalShape(act));
        return success();
      }
      if (isAct(0) && act.layout == Layout::Packed && s.size() == 4 &&
          s[0] == probeBatch && s[1] == probeSeq &&
          s[2] * s[3] == in[0]->shape[2]) {
        act.layout = Layout::Heads;
        act.headDim = s[3];
        out = makeAct(act, logicalShape(act));
        return success();
      }
      if (isAct(0) && act.layout == Layout::Heads && act.repeat == 1 &&
          s.size() == 3 && s[0] == probeBatch && s[1] == probeSeq &&
          s[2] == featuresOf(act.value)) {
        act.layout = Layout::Packed;
        act.headDim = 0;
        out = makeAct(act, logicalShape(act));
        return success();
      }
      return nodeError(node) << "unsupported reshape of an activation to ["
                             << llvm::make_range(s.begin(), s.end()) << "]";
    }
  }

  if (op == "Unsqueeze" && isAct(0) && in[0]->act.layout == Layout::HeadsT) {
    std::optional<SmallVector<int64_t>> axes = axesOf(1);
    if (axes && axes->size() == 1 && ((*axes)[0] == 2 || (*axes)[0] == -3)) {
      out = derived(Abstract::KVUnsqueezed, *in[0]);
      out.shape.insert(out.shape.begin() + 2, 1);
      return success();
    }
  }

  if (op == "Expand" && is(0, Abstract::KVUnsqueezed) && isConcrete(in[1])) {
    const ProbeTensor &t = *in[1]->probe;
    const SmallVector<int64_t> &s = in[0]->shape;
    if (t.numElements() == 5 && t.data[0] == s[0] && t.data[1] == s[1] &&
        t.data[3] == s[3] && t.data[4] == s[4]) {
      out = derived(Abstract::KVExpanded, *in[0]);
      out.group = probeInt(t.data[2]);
      out.shape[2] = out.group;
      return success();
    }
  }

  if (op == "Add") {
    for (unsigned i = 0; i < 2; ++i) {
      Abstract *a = in[i], *b = in[1 - i];
      if (a->kind == Abstract::MeanSquare && scalarOf(b)) {
        out = derived(Abstract::MeanSquareEps, *a);
        out.number = *scalarOf(b);
        return success();
      }
      if (a->kind == Abstract::TableProduct &&
          b->kind == Abstract::RotatedProduct)
        return emitRotary(node, *a, *b, out);
      if ((a->kind == Abstract::Scores) && isConcrete(b)) {
        out = derived(Abstract::MaskedScores, *a);
        out.table = std::make_shared<ProbeTensor>(*b->probe);
        out.maskSource = node.getInputs()[1 - i];
        return success();
      }
      if (a->kind == Abstract::Param && scalarOf(b)) {
        out = derived(Abstract::ParamPlus, *a);
        out.number = *scalarOf(b);
        return success();
      }
      if (a->kind == Abstract::Param && b->kind == Abstract::Act &&
          b->act.layout == Layout::Packed) {
        auto linear = b->act.value.getDefiningOp<LinearOp>();
        auto biasType =
            cast<RankedTensorType>(source.getArgument(a->argIndex).getType());
        if (linear && !linear.getBias() && biasType.getRank() == 1 &&
            biasType.getDimSize(0) == featuresOf(b->act.value)) {
          FailureOr<Value> bias =
              useParam(node, *a, biasType.getShape(), false, "bias");
          if (failed(bias))
            return failure();
          linear.getBiasMutable().assign(*bias);
          out = *b;
          return success();
        }
      }
    }
    if (isAct(0) && isAct(1)) {
      const Activation &a = in[0]->act, &b = in[1]->act;
      if (a.layout != b.layout || a.headDim != b.headDim ||
          a.value.getType() != b.value.getType())
        return nodeError(node) << "adds activations of different layouts";
      Value y = AddOp::create(builder, node.getLoc(), a.value, b.value);
      Activation result = a;
      result.value = y;
      out = makeAct(result, in[0]->shape);
      return success();
    }
  }

  if (op == "Sqrt" && is(0, Abstract::MeanSquareEps)) {
    out = derived(Abstract::Rms, *in[0]);
    return success();
  }
  if (op == "Reciprocal" && is(0, Abstract::Rms)) {
    out = derived(Abstract::InvRms, *in[0]);
    return success();
  }

  if (op == "Div") {
    if (scalarOf(in[0]) == 1.0 && is(1, Abstract::Rms)) {
      out = derived(Abstract::InvRms, *in[1]);
      return success();
    }
    if (isAct(0) && is(1, Abstract::Rms) &&
        in[0]->act.value == in[1]->act.value) {
      out = derived(Abstract::Normed, *in[1]);
      return success();
    }
    if (is(0, Abstract::Scores) && scalarOf(in[1])) {
      out = *in[0];
      out.number /= *scalarOf(in[1]);
      return success();
    }
  }

  if (op == "Mul") {
    for (unsigned i = 0; i < 2; ++i) {
      Abstract *a = in[i], *b = in[1 - i];
      if (a->kind == Abstract::Act && b->kind == Abstract::InvRms &&
          a->act.value == b->act.value && a->act.layout == b->act.layout) {
        out = derived(Abstract::Normed, *b);
        return success();
      }
      if ((a->kind == Abstract::Param || a->kind == Abstract::ParamPlus) &&
          b->kind == Abstract::Normed)
        return emitRmsNorm(node, *b, *a, out);
      if (a->kind == Abstract::Scores && scalarOf(b)) {
        out = *a;
        out.number *= *scalarOf(b);
        return success();
      }
      if (a->kind == Abstract::Act && a->act.layout != Layout::Packed &&
          isConcrete(b) && b->kind == Abstract::Concrete) {
        out = derived(Abstract::TableProduct, *a);
        out.table = std::make_shared<ProbeTensor>(*b->probe);
        return success();
      }
      if (a->kind == Abstract::RopeRotated && isConcrete(b)) {
        out = derived(Abstract::RotatedProduct, *a);
        out.table = std::make_shared<ProbeTensor>(*b->probe);
        return success();
      }
    }
    if (isAct(0) && isAct(1)) {
      const Activation &a = in[0]->act, &b = in[1]->act;
      if (a.layout != b.layout || a.value.getType() != b.value.getType())
        return nodeError(node) << "multiplies activations of different layouts";
      Value y = MulOp::create(builder, node.getLoc(), a.value, b.value);
      Activation result = a;
      result.value = y;
      out = makeAct(result, in[0]->shape);
      return success();
    }
  }

  if (op == "Slice" && isAct(0) &&
      (in[0]->act.layout == Layout::Heads ||
       in[0]->act.layout == Layout::HeadsT)) {
    auto concreteInts = [&](unsigned i) -> std::optional<SmallVector<int64_t>> {
      if (!isConcrete(in.size() > i ? in[i] : nullptr))
        return std::nullopt;
      SmallVector<int64_t> v;
      for (double d : in[i]->probe->data)
        v.push_back(probeInt(d));
      return v;
    };
    auto starts = concreteInts(1), ends = concreteInts(2),
         axes = concreteInts(3);
    int64_t d = in[0]->act.headDim;
    bool lastAxis =
        !axes || (axes->size() == 1 && ((*axes)[0] == -1 || (*axes)[0] == 3));
    if (starts && ends && starts->size() == 1 && lastAxis) {
      int64_t s = (*starts)[0], e = std::min((*ends)[0], d);
      if (s == 0 && e == d / 2) {
        out = derived(Abstract::RopeHalf, *in[0]);
        out.group = 1;
        return success();
      }
      if (s == d / 2 && e == d) {
        out = derived(Abstract::RopeHalf, *in[0]);
        out.group = 2;
        return success();
      }
    }
  }

  if (op == "Neg" && is(0, Abstract::RopeHalf) && in[0]->group == 2) {
    out = derived(Abstract::RopeNegHalf, *in[0]);
    return success();
  }

  if (op == "Concat" && in.size() == 2 && is(0, Abstract::RopeNegHalf) &&
      is(1, Abstract::RopeHalf) && in[1]->group == 1 &&
      in[0]->act.value == in[1]->act.value) {
    out = derived(Abstract::RopeRotated, *in[1]);
    return success();
  }

  if (op == "MatMul") {
    if (isAct(0) && is(1, Abstract::Param))
      return emitLinear(node, *in[0], *in[1], out);
    if (isAct(0) && isAct(1) && in[0]->act.layout == Layout::HeadsT &&
        in[1]->act.layout == Layout::KeyT) {
      out = derived(Abstract::Scores, *in[0]);
      out.other = in[1]->act;
      out.number = 1.0;
      return success();
    }
    if (is(0, Abstract::Probs) && isAct(1))
      return emitAttention(node, *in[0], *in[1], out);
  }

  if (op == "Softmax" &&
      (is(0, Abstract::Scores) || is(0, Abstract::MaskedScores))) {
    auto axis = node.getOnnxAttrs().getAs<IntegerAttr>("axis");
    if (!axis || axis.getInt() == -1 || axis.getInt() == 3) {
      out = derived(Abstract::Probs, *in[0]);
      return success();
    }
  }

  auto diag = nodeError(node) << "no building block matches it (inputs:";
  for (Abstract *a : in)
    diag << " " << (a ? kindName(a->kind) : "none");
  return diag << ")";
}

void Raiser::findScopeBlocks() {
  // A Mamba2 mixer: the module scope of a depthwise Conv whose scope ends in
  // "mixer". Every node in that scope or below belongs to it.
  SmallVector<std::string> scopes;
  for (Operation &op : source.getBody().front())
    if (auto node = dyn_cast<NodeOp>(op))
      if (node.getOpType() == "Conv") {
        std::string scope = scopeOf(node);
        if (StringRef(scope).ends_with("mixer") &&
            !llvm::is_contained(scopes, scope))
          scopes.push_back(scope);
      }
  for (const std::string &scope : scopes) {
    ScopeBlock block;
    block.scope = scope;
    for (Operation &op : source.getBody().front())
      if (auto node = dyn_cast<NodeOp>(op)) {
        StringRef s = node.getScopeAttr() ? node.getScopeAttr().getValue() : "";
        if (s == scope || s.starts_with(scope + "."))
          block.nodes.push_back(node);
      }
    // Nodes an exporter's optimizer created without a scope (dynamo's
    // Split, Concat of constants) that read the block's values belong to it.
    llvm::SmallPtrSet<Operation *, 32> members;
    for (NodeOp node : block.nodes)
      members.insert(node);
    bool grew = true;
    while (grew) {
      grew = false;
      for (Operation &op : source.getBody().front()) {
        auto node = dyn_cast<NodeOp>(op);
        if (!node || node.getScopeAttr() || members.contains(node))
          continue;
        if (llvm::any_of(node.getInputs(), [&](Value v) {
              return v.getDefiningOp() && members.contains(v.getDefiningOp());
            })) {
          members.insert(node);
          grew = true;
        }
      }
    }
    block.nodes.clear();
    for (Operation &op : source.getBody().front())
      if (members.contains(&op))
        block.nodes.push_back(cast<NodeOp>(op));
    for (NodeOp node : block.nodes)
      blockOf[node] = scopeBlocks.size();
    scopeBlocks.push_back(std::move(block));
  }
}

LogicalResult Raiser::raiseMamba2(ScopeBlock &block) {
  NodeOp last = block.nodes.back();
  llvm::SmallPtrSet<Operation *, 32> inside;
  for (NodeOp node : block.nodes)
    inside.insert(node);
  auto err = [&]() {
    return nodeError(last) << "Mamba2 mixer '" << block.scope << "': ";
  };

  // The parameter behind an operand: a function argument, possibly through
  // casts, reshapes and a transpose inside the block.
  auto paramBehind = [&](Value v, bool &transposed) -> Abstract * {
    transposed = false;
    while (auto node = v.getDefiningOp<NodeOp>()) {
      if (!inside.contains(node) || node.getInputs().empty())
        break;
      StringRef op = node.getOpType();
      if (op == "Transpose")
        transposed = !transposed;
      else if (op != "Cast" && op != "Reshape" && op != "Unsqueeze" &&
               op != "Squeeze" && op != "Identity")
        return nullptr;
      v = node.getInputs()[0];
    }
    Abstract *a = lookup(v);
    return a && a->kind == Abstract::Param ? a : nullptr;
  };
  auto scalarIn = [&](NodeOp node) -> std::optional<double> {
    for (Value in : node.getInputs())
      if (Abstract *a = lookup(in);
          a && isConcrete(a) && a->probe->isScalarLike())
        return a->probe->scalar();
    // A Constant node inside the block.
    for (Value in : node.getInputs())
      if (auto c = in.getDefiningOp<NodeOp>())
        if (c.getOpType() == "Constant")
          if (auto v = c.getOnnxAttrs().getAs<DenseElementsAttr>("value"))
            if (v.getNumElements() == 1)
              return ProbeTensor::fromAttr(v).scalar();
    return std::nullopt;
  };

  // Inputs from outside: the activation, parameters, the mask.
  Value x;
  bool usesMask = false;
  struct Use {
    NodeOp node;
    unsigned operand;
    Abstract *param;
    bool transposed;
  };
  SmallVector<Use> paramUses;
  for (NodeOp node : block.nodes)
    for (auto [i, in] : llvm::enumerate(node.getInputs())) {
      bool transposed = false;
      if (Abstract *p = paramBehind(in, transposed)) {
        // Scalar initializers (dynamo's constants) are not parameters.
        if (cast<ShapedType>(source.getArgument(p->argIndex).getType())
                .getNumElements() > 1)
          paramUses.push_back({node, static_cast<unsigned>(i), p, transposed});
        continue;
      }
      Operation *def = in.getDefiningOp();
      if (def && inside.contains(def))
        continue;
      Abstract *a = lookup(in);
      if (!a)
        continue;
      if (a->kind == Abstract::Act) {
        if (x && x != in)
          return err() << "it reads two activations";
        x = in;
      }
      usesMask |= a->maskDerived;
    }
  Abstract *xa = x ? lookup(x) : nullptr;
  if (!xa || xa->act.layout != Layout::Packed)
    return err() << "no [batch, seq, hidden] input activation";

  // Parameters by what consumes them.
  Abstract *inProj = nullptr, *outProj = nullptr, *convW = nullptr,
           *convB = nullptr, *aLog = nullptr, *dtBias = nullptr,
           *dParam = nullptr, *normW = nullptr;
  bool inT = false, outT = false;
  SmallVector<Use> matmuls;
  for (Use &u : paramUses) {
    StringRef op = u.node.getOpType();
    if (op == "MatMul" || op == "Gemm")
      matmuls.push_back(u);
    else if (op == "Conv")
      (u.operand == 1 ? convW : convB) = u.param;
    else if (op == "Exp")
      aLog = u.param;
    else if (op == "Add")
      dtBias = u.param;
  }
  // Multiplied parameters: the norm weight ([I]), D ([H], often viewed
  // [H, 1]) and, when the exporter folded -exp(A_log), A itself ([H], all
  // negative).
  SmallVector<Abstract *> muls;
  for (Use &u : paramUses)
    if (u.node.getOpType() == "Mul" && !llvm::is_contained(muls, u.param))
      muls.push_back(u.param);
  auto numelOf = [&](Abstract *p) {
    return cast<ShapedType>(source.getArgument(p->argIndex).getType())
        .getNumElements();
  };
  llvm::sort(muls,
             [&](Abstract *a, Abstract *b) { return numelOf(a) < numelOf(b); });
  bool foldedA = false;
  if (!aLog && muls.size() == 3) {
    auto allNegative = [](Abstract *p) {
      return p->probe &&
             llvm::all_of(p->probe->data, [](double v) { return v < 0; });
    };
    unsigned a = allNegative(muls[0]) ? 0 : allNegative(muls[1]) ? 1 : 2;
    if (a < 2 && !allNegative(muls[1 - a])) {
      aLog = muls[a];
      foldedA = true;
      muls.erase(muls.begin() + a);
    }
  }
  if (muls.size() != 2)
    return err() << "expected D and the norm weight, found " << muls.size()
                 << " multiplied parameters";
  dParam = muls[0];
  normW = muls[1];
  if (matmuls.size() != 2)
    return err() << "expected in_proj and out_proj, found " << matmuls.size()
                 << " projections";
  inProj = matmuls[0].param, inT = matmuls[0].transposed;
  outProj = matmuls[1].param, outT = matmuls[1].transposed;
  if (!convW || !convB || !aLog || !dtBias)
    return err() << "missing "
                 << (!convW   ? "the conv1d weight"
                     : !convB ? "the conv1d bias"
                     : !aLog  ? "A_log"
                              : "dt_bias");

  // Sizes.
  auto shapeOf = [&](Abstract *p) {
    return cast<RankedTensorType>(source.getArgument(p->argIndex).getType())
        .getShape();
  };
  int64_t heads = numelOf(aLog), inner = numelOf(normW);
  ArrayRef<int64_t> cw = shapeOf(convW);
  if (cw.size() != 3 || cw[1] != 1 || heads <= 0 || inner % heads)
    return err() << "unexpected conv1d weight or head sizes";
  int64_t conv = cw[0], kernel = cw[2], gn2 = conv - inner;
  if (gn2 <= 0 || gn2 % 2)
    return err() << "conv1d channels " << conv << " do not fit " << inner
                 << " inner features";
  int64_t gn = gn2 / 2, groups = 0;
  // n_groups and state_size: a reshape in the block ends with the constant
  // pair [n_groups, state_size] (B and C viewed per group).
  for (NodeOp node : block.nodes) {
    if (node.getOpType() != "Reshape" || node.getInputs().size() < 2)
      continue;
    auto concat = node.getInputs()[1].getDefiningOp<NodeOp>();
    if (!concat || concat.getOpType() != "Concat")
      continue;
    SmallVector<int64_t> tail;
    for (Value part : concat.getInputs()) {
      Abstract *a = lookup(part);
      std::optional<ProbeTensor> value;
      if (a && isConcrete(a))
        value = a->probe;
      else if (auto c = part.getDefiningOp<NodeOp>();
               c && c.getOpType() == "Constant")
        if (auto v = c.getOnnxAttrs().getAs<DenseElementsAttr>("value"))
          value = ProbeTensor::fromAttr(v);
      if (!value) {
        tail.clear();
        continue;
      }
      for (double d : value->data)
        tail.push_back(probeInt(d));
    }
    if (tail.size() >= 2) {
      int64_t g = tail[tail.size() - 2], n = tail.back();
      if (g > 0 && n > 0 && g * n == gn && heads % g == 0) {
        groups = g;
        break;
      }
    }
  }
  if (!groups)
    return err() << "cannot find n_groups and state_size (a reshape to "
                    "[..., n_groups, state_size] with n_groups * state_size = "
                 << gn << ")";
  int64_t state = gn / groups, hidden = featuresOf(xa->act.value);

  // Constants: the gated norm's epsilon and the dt clamp.
  std::optional<double> eps;
  double dtMin = 0.0;
  for (NodeOp node : block.nodes) {
    StringRef scope = node.getScopeAttr() ? node.getScopeAttr().getValue() : "";
    if (node.getOpType() == "Add" && scope.ends_with(".norm") && !eps)
      eps = scalarIn(node);
    if (node.getOpType() == "Clip" && node.getInputs().size() >= 2) {
      Value lo = node.getInputs()[1];
      if (Abstract *a = lookup(lo); a && isConcrete(a))
        dtMin = a->probe->scalar();
      else if (auto c = lo.getDefiningOp<NodeOp>())
        if (auto v = c.getOnnxAttrs().getAs<DenseElementsAttr>("value"))
          dtMin = ProbeTensor::fromAttr(v).scalar();
    }
  }
  if (!eps)
    return err() << "cannot find the gated norm's epsilon";

  // The one value that leaves the block is its output.
  Value output;
  for (NodeOp node : block.nodes)
    for (Value result : node.getResults())
      for (Operation *user : result.getUsers())
        if (!inside.contains(user) && !isConcrete(lookup(result))) {
          if (output && output != result)
            return err() << "two values leave the block (from "
                         << output.getDefiningOp<NodeOp>().getName() << " and "
                         << node.getName() << ")";
          output = result;
        }
  if (!output)
    return err() << "no value leaves the block";

  auto linearWeight = [&](Abstract *p, bool transposed, int64_t outF,
                          int64_t inF, StringRef name) -> FailureOr<Value> {
    ArrayRef<int64_t> st = shapeOf(p);
    // MatMul reads [in, out]; an explicit Transpose means [out, in] stored.
    bool storedTransposed = !transposed;
    if (st.size() != 2 || (storedTransposed ? (st[0] != inF || st[1] != outF)
                                            : (st[0] != outF || st[1] != inF)))
      return err() << name << " weight [" << st[0] << ", "
                   << (st.size() > 1 ? st[1] : 0) << "] does not map " << inF
                   << " to " << outF << " features";
    return useParam(last, *p, {outF, inF}, storedTransposed, "",
                    block.scope + "." + name.str() + ".weight");
  };
  // FQNs come from the mixer's scope: the nodes that read D, A_log or the
  // conv weight are the mixer's own, not a submodule's.
  auto named = [&](Abstract *p, ArrayRef<int64_t> shape,
                   StringRef fqnSuffix) -> FailureOr<Value> {
    return useParam(last, *p, shape, false, "",
                    block.scope + "." + fqnSuffix.str());
  };
  int64_t projOut = inner + conv + heads;
  FailureOr<Value> wIn = linearWeight(inProj, inT, projOut, hidden, "in_proj");
  FailureOr<Value> wOut =
      linearWeight(outProj, outT, hidden, inner, "out_proj");
  if (failed(wIn) || failed(wOut))
    return failure();
  FailureOr<Value> wConv = named(convW, {conv, 1, kernel}, "conv1d.weight");
  FailureOr<Value> bConv = named(convB, {conv}, "conv1d.bias");
  FailureOr<Value> dtB = named(dtBias, {heads}, "dt_bias");
  FailureOr<Value> aL = named(aLog, {heads}, "A_log");
  FailureOr<Value> dP = named(dParam, {heads}, "D");
  FailureOr<Value> nW = named(normW, {inner}, "norm.weight");
  if (failed(wConv) || failed(bConv) || failed(dtB) || failed(aL) ||
      failed(dP) || failed(nW))
    return failure();
  if (usesMask && !attentionMask)
    return err() << "reads a padding mask but the graph has no "
                    "attention_mask input";
  Value y = Mamba2MixerOp::create(
      builder, last.getLoc(), xa->act.value.getType(), xa->act.value, *wIn,
      *wConv, *bConv, *dtB, *aL, *dP, *nW, *wOut,
      usesMask ? attentionMask : Value(), builder.getI64IntegerAttr(heads),
      builder.getI64IntegerAttr(inner / heads),
      builder.getI64IntegerAttr(groups), builder.getI64IntegerAttr(state),
      builder.getI64IntegerAttr(kernel),
      builder.getF64FloatAttr(roundSignificant(*eps)),
      builder.getF64FloatAttr(roundSignificant(dtMin)),
      foldedA ? builder.getUnitAttr() : UnitAttr());
  slot(output) = makeAct({y}, {probeBatch, probeSeq, hidden});
  return success();
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
  double theta = 10000.0;
  if (half >= 2) {
    auto c1 = at(c, 0, 1, half - 1), s1 = at(sn, 0, 1, half - 1);
    if (!c1 || !s1)
      return nodeError(node) << "rotary caches do not cover positions "
                                "0..seq-1";
    theta = ropeThetaFromAngle(std::atan2(*s1, *c1), half - 1, rot);
  }
  for (int64_t b = 0; b < probeBatch; ++b)
    for (int64_t p = 0; p < probeSeq; ++p)
      for (int64_t i = 0; i < half; ++i) {
        auto cv = at(c, b, p, i), sv = at(sn, b, p, i);
        float freq = static_cast<float>(std::pow(theta, -2.0 * i / rot));
        float angle = static_cast<float>(p) * freq;
        if (!cv || !sv || std::fabs(*cv - std::cos(angle)) > 1e-4 ||
            std::fabs(*sv - std::sin(angle)) > 1e-4)
          return nodeError(node)
                 << "the rotary caches do not match RoPE with theta " << theta
                 << " at positions 0..seq-1";
      }
  Value y = RotaryOp::create(
      builder, node.getLoc(), x.value.getType(), x.value,
      builder.getI64IntegerAttr(d), builder.getF64FloatAttr(theta),
      rot != d ? builder.getI64IntegerAttr(rot) : IntegerAttr(),
      interleaved ? builder.getUnitAttr() : UnitAttr());
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
  Value y = AttentionOp::create(
      builder, node.getLoc(), q.value.getType(), q.value, k.value, v.value,
      usesPadding ? attentionMask : Value(), builder.getI64IntegerAttr(heads),
      builder.getI64IntegerAttr(kvHeads), builder.getI64IntegerAttr(d),
      builder.getF64FloatAttr(roundSignificant(scale)),
      causal ? builder.getUnitAttr() : UnitAttr(),
      window ? builder.getI64IntegerAttr(*window) : IntegerAttr(),
      softcap && softcap.getValueAsDouble() > 0 ? softcap : FloatAttr());
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

FailureOr<double> Raiser::fitRopeCaches(NodeOp node, const ProbeTensor &c,
                                        const ProbeTensor &sn, int64_t rot) {
  int64_t half = rot / 2;
  if (c.rank() != 2 || sn.rank() != 2 || c.shape[1] < half ||
      sn.shape[1] < half || c.shape[0] < probeSeq || sn.shape[0] < probeSeq)
    return nodeError(node) << "rotary caches must be [max_position >= "
                           << probeSeq << ", " << half << "]";
  double theta = 10000.0;
  if (half >= 2)
    theta = ropeThetaFromAngle(std::atan2(sn.data[sn.shape[1] + half - 1],
                                          c.data[c.shape[1] + half - 1]),
                               half - 1, rot);
  for (int64_t p = 0; p < probeSeq; ++p)
    for (int64_t i = 0; i < half; ++i) {
      float freq = static_cast<float>(std::pow(theta, -2.0 * i / rot));
      float angle = static_cast<float>(p) * freq;
      if (std::fabs(c.data[p * c.shape[1] + i] - std::cos(angle)) > 1e-4 ||
          std::fabs(sn.data[p * sn.shape[1] + i] - std::sin(angle)) > 1e-4)
        return nodeError(node) << "the rotary caches do not match RoPE with "
                                  "theta "
                               << theta;
    }
  return theta;
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
    FailureOr<double> theta = fitRopeCaches(node, *c->probe, *sn->probe, d);
    if (failed(theta))
      return failure();
    UnitAttr interleaved =
        intAttr("rotary_interleaved", 0) ? builder.getUnitAttr() : UnitAttr();
    qv = RotaryOp::create(
        builder, node.getLoc(), qv.getType(), qv, builder.getI64IntegerAttr(d),
        builder.getF64FloatAttr(*theta), IntegerAttr(), interleaved);
    kv = RotaryOp::create(
        builder, node.getLoc(), kv.getType(), kv, builder.getI64IntegerAttr(d),
        builder.getF64FloatAttr(*theta), IntegerAttr(), interleaved);
  }
  double scale = 1.0 / std::sqrt(static_cast<double>(d));
  if (auto s = attrs.getAs<FloatAttr>("scale"); s && s.getValueAsDouble() != 0)
    scale = s.getValueAsDouble();
  auto softcap = attrs.getAs<FloatAttr>("softcap");
  if (usesPadding && !attentionMask)
    return nodeError(node) << "padding without an attention_mask input";
  Value y = AttentionOp::create(
      builder, node.getLoc(), qv.getType(), qv, kv, v->act.value,
      usesPadding ? attentionMask : Value(), builder.getI64IntegerAttr(heads),
      builder.getI64IntegerAttr(kvHeads), builder.getI64IntegerAttr(d),
      builder.getF64FloatAttr(roundSignificant(scale)), builder.getUnitAttr(),
      IntegerAttr(),
      softcap && softcap.getValueAsDouble() > 0 ? softcap : FloatAttr());
  slot(node.getResult(0)) = makeAct({y}, {probeBatch, probeSeq, featuresOf(y)});
  for (unsigned i = 1; i < node.getNumResults(); ++i) {
    Abstract cache;
    cache.kind = Abstract::KVCache;
    slot(node.getResult(i)) = cache;
  }
  return success();
}

LogicalResult Raiser::visit(NodeOp node) {
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
    std::string error;
    std::optional<std::vector<ProbeTensor>> result =
        evaluateOnnxOp("Shape", node.getOnnxAttrs(),
                       {std::optional<ProbeTensor>(shaped)}, error);
    if (!result)
      return nodeError(node) << error;
    Abstract a;
    a.kind = Abstract::Concrete;
    a.probe = (*result)[0];
    slot(node.getResult(0)) = a;
    return success();
  }

  if (allConcrete && node.getNumResults() >= 1) {
    SmallVector<std::optional<ProbeTensor>> inputs;
    for (Abstract *a : in)
      inputs.push_back(a ? a->probe : std::nullopt);
    std::string error;
    std::optional<std::vector<ProbeTensor>> results =
        evaluateOnnxOp(node.getOpType(), node.getOnnxAttrs(), inputs, error);
    if (!results)
      return nodeError(node) << error;
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

  if (node.getOpType() == "GroupQueryAttention")
    return emitGroupQueryAttention(node, in);
  if (node.getOpType() == "SkipSimplifiedLayerNormalization") {
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
  // Trailing outputs (a norm's inverse std, attention's present key/value)
  // are fine as long as nothing reads them.
  for (unsigned i = 1; i < node.getNumResults(); ++i)
    if (!node.getResult(i).use_empty() && node.getOpType() != "Dropout")
      return nodeError(node) << "multi-output nodes whose extra outputs are "
                                "used are not supported";
  for (Abstract *a : in)
    if (!a)
      return nodeError(node) << "a missing optional input on an activation "
                                "is not supported";
  Abstract out;
  if (failed(visitPattern(node, in, out)))
    return failure();
  slot(node.getResult(0)) = out;
  return success();
}

LogicalResult Raiser::run() {
  // The new function starts with the source's arguments; unused ones are
  // dropped at the end.
  builder.setInsertionPoint(source);
  target = func::FuncOp::create(builder, source.getLoc(), "forward",
                                source.getFunctionType());
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
  auto ret = cast<func::ReturnOp>(source.getBody().front().getTerminator());
  SmallVector<Value> results;
  for (Value v : ret.getOperands()) {
    Abstract *a = lookup(v);
    // The cache a step would hand to the next one: not part of a forward
    // pass over the whole sequence.
    if (a && a->kind == Abstract::KVCache)
      continue;
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
    target.setArgAttr(i, TPDialect::kSourceAttrName,
                      SourceAttr::get(ctx, sourceAttr.getInitializer(),
                                      sourceAttr.getFile(),
                                      sourceAttr.getOffset(),
                                      sourceAttr.getLength(), info.transposed));
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

LogicalResult Raiser::recordConfig(ModuleOp module, func::FuncOp func) {
  std::map<std::string, Attribute> config;
  auto setInt = [&](StringRef key, int64_t v) {
    config[key.str()] = builder.getI64IntegerAttr(v);
  };
  auto fqnOf = [&](Value v) -> StringRef {
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       TPDialect::kFqnAttrName))
        return fqn.getValue();
    return "";
  };
  std::set<int64_t> layers;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto fqn = func.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
    if (!fqn)
      continue;
    StringRef rest = fqn.getValue();
    size_t pos = rest.find("layers.");
    if (pos == StringRef::npos)
      continue;
    int64_t layer;
    if (!rest.drop_front(pos + 7).split('.').first.getAsInteger(10, layer))
      layers.insert(layer);
  }
  setInt("num_hidden_layers", layers.size());

  bool qkNorm = false, attentionBias = false, normOffset = false,
       embedScale = false, tied = false;
  Value embedTable;
  SmallVector<Attribute> layerTypes;
  func.walk([&](Operation *op) {
    if (auto emb = dyn_cast<EmbeddingOp>(op)) {
      auto table = emb.getTable().getType();
      setInt("vocab_size", table.getDimSize(0));
      setInt("hidden_size", table.getDimSize(1));
      embedTable = emb.getTable();
      embedScale |= llvm::any_of(emb->getUsers(),
                                 [](Operation *u) { return isa<ScaleOp>(u); });
    } else if (auto att = dyn_cast<AttentionOp>(op)) {
      if (!config.count("num_attention_heads")) {
        setInt("num_attention_heads", att.getNumHeadsAttr().getInt());
        setInt("num_key_value_heads", att.getNumKvHeadsAttr().getInt());
        setInt("head_dim", att.getHeadDimAttr().getInt());
      }
      bool sliding = static_cast<bool>(att.getSlidingWindowAttr());
      layerTypes.push_back(builder.getStringAttr(sliding ? "sliding_attention"
                                                         : "full_attention"));
      if (sliding)
        config["sliding_window"] = att.getSlidingWindowAttr();
      if (auto rot = att.getQ().getDefiningOp<RotaryOp>()) {
        StringRef key = sliding ? "rope_local_base_freq" : "rope_theta";
        if (!config.count(key.str()))
          config[key.str()] = rot.getThetaAttr();
      }
    } else if (auto norm = dyn_cast<RmsNormOp>(op)) {
      if (norm.getGroupSizeAttr())
        qkNorm = true;
      else if (!config.count("rms_norm_eps"))
        config["rms_norm_eps"] = norm.getEpsilonAttr();
      normOffset |= norm.getWeightOffsetAttr().getValueAsDouble() != 0.0;
    } else if (auto lin = dyn_cast<LinearOp>(op)) {
      StringRef fqn = fqnOf(lin.getWeight());
      if (fqn.ends_with("q_proj.weight") && lin.getBias())
        attentionBias = true;
      if ((fqn.ends_with(".gate_proj.weight") ||
           fqn.ends_with(".up_proj.weight")) &&
          !config.count("intermediate_size"))
        setInt("intermediate_size", lin.getWeight().getType().getDimSize(0));
      // The output projection reading the embedding table: tied.
      if (embedTable && lin.getWeight() == embedTable &&
          llvm::any_of(lin->getUsers(),
                       [](Operation *u) { return isa<func::ReturnOp>(u); }))
        tied = true;
    }
  });

  SmallVector<Attribute> blockTypes;
  func.walk([&](Operation *op) {
    if (auto m = dyn_cast<Mamba2MixerOp>(op)) {
      blockTypes.push_back(builder.getStringAttr("mamba"));
      setInt("mamba_num_heads", m.getNumHeadsAttr().getInt());
      setInt("mamba_head_dim", m.getHeadDimAttr().getInt());
      setInt("n_groups", m.getNGroupsAttr().getInt());
      setInt("ssm_state_size", m.getStateSizeAttr().getInt());
      setInt("conv_kernel", m.getConvKernelAttr().getInt());
    } else if (isa<AttentionOp>(op)) {
      blockTypes.push_back(builder.getStringAttr("attention"));
    } else if (isa<ReluSquaredOp>(op)) {
      blockTypes.push_back(builder.getStringAttr("mlp"));
    }
  });
  bool mamba = llvm::any_of(blockTypes, [](Attribute a) {
    return cast<StringAttr>(a).getValue() == "mamba";
  });

  ArchitectureTraits traits;
  traits.mamba = mamba;
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    if (auto fqn =
            func.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName))
      traits.backboneNames |= fqn.getValue().starts_with("backbone.");
  traits.normWeightOffset = normOffset;
  traits.embeddingScale = embedScale;
  traits.qkNorm = qkNorm;
  traits.attentionBias = attentionBias;
  const Architecture &arch = recognizeArchitecture(traits);
  if (tied && !arch.tiedEmbeddings)
    return func.emitError() << "the graph ties lm_head to the embedding, "
                               "which "
                            << arch.name << " does not";
  if (qkNorm && !arch.perHeadNorms)
    return func.emitError() << "the graph has per-head q/k norms, which "
                            << arch.name << " does not";
  config["architecture"] = builder.getStringAttr(arch.name);
  if (mamba)
    config["layers_block_type"] = builder.getArrayAttr(blockTypes);
  // One theta for all layers is rope_theta, whatever their kind.
  if (!config.count("rope_theta") && config.count("rope_local_base_freq")) {
    config["rope_theta"] = config["rope_local_base_freq"];
    config.erase("rope_local_base_freq");
  }
  if (config.count("sliding_window"))
    config["layer_types"] = builder.getArrayAttr(layerTypes);
  config["tie_word_embeddings"] = builder.getBoolAttr(tied);
  config["attention_bias"] = builder.getBoolAttr(attentionBias);
  config["qk_norm"] = builder.getBoolAttr(qkNorm);

  SmallVector<NamedAttribute> entries;
  for (auto &[key, value] : config)
    entries.push_back(builder.getNamedAttr(key, value));
  module->setAttr("tp.config", builder.getDictionaryAttr(entries));
  return success();
}

struct TPRaiseONNXPass : public tp::impl::TPRaiseONNXBase<TPRaiseONNXPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<func::FuncOp> graphs;
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.getBody().empty() &&
          llvm::any_of(func.getBody().front(),
                       [](Operation &op) { return isa<NodeOp>(op); }))
        graphs.push_back(func);
    if (probeSeq < 4 || probeBatch < 1) {
      getOperation().emitError("probe-seq must be >= 4 and probe-batch >= 1");
      return signalPassFailure();
    }
    for (func::FuncOp func : graphs) {
      Raiser raiser(func, probeBatch, probeSeq);
      if (failed(raiser.run()))
        return signalPassFailure();
    }
    // The module-level ONNX bookkeeping is no longer meaningful.
    getOperation()->removeAttr("onnx.opset_import");
  }
};

} // namespace
