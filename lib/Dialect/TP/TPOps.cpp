//===- TPOps.cpp - tp dialect operations ----------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/StringSet.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace mlir::tp;

namespace {

/// Two dimensions agree unless both are static and differ.
bool dimsAgree(int64_t a, int64_t b) {
  return ShapedType::isDynamic(a) || ShapedType::isDynamic(b) || a == b;
}

std::string dimStr(int64_t d) {
  return ShapedType::isDynamic(d) ? std::string("?") : std::to_string(d);
}

/// All float operands and results of a tp op share one element type.
LogicalResult verifySameElementType(Operation *op, ArrayRef<Value> values) {
  Type expected;
  for (Value value : values) {
    Type elem = cast<ShapedType>(value.getType()).getElementType();
    if (!expected)
      expected = elem;
    else if (elem != expected)
      return op->emitOpError("element types differ: ")
             << expected << " vs " << elem;
  }
  return success();
}

LogicalResult verifyPositive(Operation *op, StringRef name, int64_t value) {
  if (value <= 0)
    return op->emitOpError()
           << "'" << name << "' must be positive, got " << value;
  return success();
}

LogicalResult verifyPositive(Operation *op, StringRef name, double value) {
  if (!(value > 0.0) || !std::isfinite(value))
    return op->emitOpError()
           << "'" << name << "' must be positive and finite, got " << value;
  return success();
}

/// Leading dimensions [0, count) of `a` and `b` agree.
LogicalResult verifyLeadingDims(Operation *op, RankedTensorType a,
                                RankedTensorType b, int64_t count,
                                StringRef aName, StringRef bName) {
  for (int64_t i = 0; i < count; ++i)
    if (!dimsAgree(a.getDimSize(i), b.getDimSize(i)))
      return op->emitOpError() << "dimension " << i << " of " << aName << " ("
                               << dimStr(a.getDimSize(i)) << ") and " << bName
                               << " (" << dimStr(b.getDimSize(i)) << ") differ";
  return success();
}

} // namespace

/// Prints the approximation of tp.gelu as a bare keyword (`tanh`, `none`).
static void printGeluApproximation(OpAsmPrinter &printer, Operation *,
                                   GeluApproximationAttr attr) {
  printer << stringifyGeluApproximation(attr.getValue());
}

static ParseResult parseGeluApproximation(OpAsmParser &parser,
                                          GeluApproximationAttr &attr) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<GeluApproximation> value = symbolizeGeluApproximation(keyword);
  if (!value)
    return parser.emitError(loc, "expected 'none' or 'tanh', got '")
           << keyword << "'";
  attr = GeluApproximationAttr::get(parser.getContext(), *value);
  return success();
}

/// Prints the epilogue of tp.linear_epilogue as a bare keyword (`add`,
/// `silu_mul`).
static void printEpilogue(OpAsmPrinter &printer, Operation *,
                          EpilogueAttr attr) {
  printer << stringifyEpilogue(attr.getValue());
}

static ParseResult parseEpilogue(OpAsmParser &parser, EpilogueAttr &attr) {
  SMLoc loc = parser.getCurrentLocation();
  StringRef keyword;
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<Epilogue> value = symbolizeEpilogue(keyword);
  if (!value)
    return parser.emitError(loc, "expected 'add' or 'silu_mul', got '")
           << keyword << "'";
  attr = EpilogueAttr::get(parser.getContext(), *value);
  return success();
}

//===----------------------------------------------------------------------===//
// EmbeddingOp
//===----------------------------------------------------------------------===//

/// An op's uneven vocabulary (`vocab_starts`, `vocab_sizes`): both or
/// neither, one entry per rank, on a vocab_parallel op, whose block of
/// the vocabulary (`held`, `what`) is the largest range.
template <typename VocabOp>
static LogicalResult verifyVocabRanges(VocabOp op, int64_t held,
                                       StringRef what) {
  std::optional<ArrayRef<int64_t>> starts = op.getVocabStarts(),
                                   sizes = op.getVocabSizes();
  if (starts.has_value() != sizes.has_value() ||
      (starts && (!op.getVocabParallel() || starts->size() != sizes->size() ||
                  starts->empty())))
    return op.emitOpError("vocab_starts and vocab_sizes come together, one "
                          "entry per rank, on a vocab_parallel op");
  if (!sizes)
    return success();
  for (auto [start, size] : llvm::zip_equal(*starts, *sizes))
    if (start < 0 || size < 1)
      return op.emitOpError("a rank's vocabulary rows need a start of at "
                            "least 0 and a size of at least 1");
  if (!dimsAgree(*llvm::max_element(*sizes), held))
    return op.emitOpError("the ") << what << " (" << dimStr(held)
                                  << ") are not the largest of vocab_sizes ("
                                  << *llvm::max_element(*sizes) << ")";
  return success();
}

/// `runs_bucket` and `block_rows` (tp-stream-param-runs): both or neither;
/// with them the parameter is the training step's own argument (held as
/// data-parallel runs, never a gathered value) and the rows per block are
/// at least one.
template <typename StreamedOp>
static LogicalResult verifyStreamedParam(StreamedOp op, Value param) {
  std::optional<int64_t> bucket = op.getRunsBucket(), rows = op.getBlockRows();
  if (!bucket && !rows)
    return success();
  if (!bucket || !rows || *bucket < 0 || *rows < 1)
    return op.emitOpError("runs_bucket (at least 0) and block_rows (at "
                          "least 1) go together");
  auto arg = dyn_cast<BlockArgument>(param);
  auto func = op->template getParentOfType<FunctionOpInterface>();
  if (!arg || !func || arg.getOwner() != &func.getFunctionBody().front())
    return op.emitOpError("with runs_bucket reads the parameter as the "
                          "function's argument, which the runtime holds as "
                          "runs; got a value computed in the function");
  return success();
}

LogicalResult EmbeddingOp::verify() {
  auto ids = getIds().getType();
  auto table = getTable().getType();
  auto result = getResult().getType();
  if (table.getRank() != 2)
    return emitOpError("table must be [vocab, hidden], got rank ")
           << table.getRank();
  if (result.getRank() != ids.getRank() + 1)
    return emitOpError("result rank must be the ids rank plus one (")
           << ids.getRank() + 1 << "), got " << result.getRank();
  if (failed(verifyLeadingDims(*this, ids, result, ids.getRank(), "ids",
                               "result")))
    return failure();
  if (!dimsAgree(result.getDimSize(ids.getRank()), table.getDimSize(1)))
    return emitOpError("result hidden size ")
           << dimStr(result.getDimSize(ids.getRank()))
           << " differs from the table's " << dimStr(table.getDimSize(1));
  if (failed(verifyVocabRanges(*this, table.getDimSize(0), "table's rows")) ||
      failed(verifyStreamedParam(*this, getTable())))
    return failure();
  return verifySameElementType(*this, {getTable(), getResult()});
}

//===----------------------------------------------------------------------===//
// LinearOp
//===----------------------------------------------------------------------===//

LogicalResult BiasAddOp::verify() {
  auto x = getX().getType();
  auto bias = getBias().getType();
  if (x.getRank() < 1 || bias.getRank() != 1 ||
      !dimsAgree(bias.getDimSize(0), x.getDimSize(x.getRank() - 1)))
    return emitOpError("bias ")
           << bias << " must be 1-D with the features of " << x;
  return success();
}

/// The product x W^T of tp.linear and tp.linear_epilogue: a [out, in]
/// weight, the form's input rank, the features and leading dimensions.
static LogicalResult verifyLinearProduct(Operation *op, RankedTensorType x,
                                         RankedTensorType weight,
                                         RankedTensorType result,
                                         std::optional<LinearForm> form) {
  if (weight.getRank() != 2)
    return op->emitOpError("weight must be [out, in], got rank ")
           << weight.getRank();
  if (form) {
    int64_t rank = *form == LinearForm::Bmm  ? 3
                   : *form == LinearForm::Mm ? 2
                                             : 0;
    if (rank && x.getRank() != rank)
      return op->emitOpError("the ")
             << stringifyLinearForm(*form) << " form needs a " << rank
             << "-D input, got rank " << x.getRank();
  }
  if (x.getRank() < 1 || result.getRank() != x.getRank())
    return op->emitOpError(
               "input and result must have the same rank >= 1, got ")
           << x.getRank() << " and " << result.getRank();
  int64_t last = x.getRank() - 1;
  if (!dimsAgree(x.getDimSize(last), weight.getDimSize(1)))
    return op->emitOpError("input features ")
           << dimStr(x.getDimSize(last)) << " differ from the weight's in "
           << dimStr(weight.getDimSize(1));
  if (!dimsAgree(result.getDimSize(last), weight.getDimSize(0)))
    return op->emitOpError("result features ")
           << dimStr(result.getDimSize(last))
           << " differ from the weight's out " << dimStr(weight.getDimSize(0));
  return verifyLeadingDims(op, x, result, last, "input", "result");
}

LogicalResult LinearOp::verify() {
  auto weight = getWeight().getType();
  if (failed(verifyLinearProduct(*this, getX().getType(), weight,
                                 getResult().getType(), getForm())))
    return failure();
  if (Value bias = getBias()) {
    auto biasType = cast<RankedTensorType>(bias.getType());
    if (biasType.getRank() != 1 ||
        !dimsAgree(biasType.getDimSize(0), weight.getDimSize(0)))
      return emitOpError("bias must be [out] = [")
             << dimStr(weight.getDimSize(0)) << "], got " << biasType;
  }
  // The weight and bias keep their storage types (a float32 LoRA adapter
  // on a bf16 checkpoint); the product is computed in f32.
  return verifySameElementType(*this, {getX(), getResult()});
}

LogicalResult LinearEpilogueOp::verify() {
  if (failed(verifyLinearProduct(*this, getX().getType(), getWeight().getType(),
                                 getResult().getType(), getForm())))
    return failure();
  return verifySameElementType(*this, {getX(), getResult()});
}

LogicalResult LinearSiblingsOp::verify() {
  OperandRange weights = getWeights();
  if (weights.size() < 2 || weights.size() > 3)
    return emitOpError("expects two or three weights, got ") << weights.size();
  if (getResults().size() != weights.size())
    return emitOpError("expects one result per weight, got ")
           << getResults().size() << " results for " << weights.size()
           << " weights";
  Type weightElement = getElementTypeOrSelf(weights.front().getType());
  for (auto [weight, result] : llvm::zip(weights, getResults())) {
    auto weightType = cast<RankedTensorType>(weight.getType());
    if (weightType.getElementType() != weightElement)
      return emitOpError("weights must share one element type, got ")
             << weightElement << " and " << weightType.getElementType();
    if (failed(verifyLinearProduct(*this, getX().getType(), weightType,
                                   cast<RankedTensorType>(result.getType()),
                                   getForm())) ||
        failed(verifySameElementType(*this, {getX(), result})))
      return failure();
  }
  return success();
}

LogicalResult LinearSwigluOp::verify() {
  auto result = getResult().getType();
  if (getGate().getType() != getUp().getType())
    return emitOpError("gate and up weights differ: ")
           << getGate().getType() << " and " << getUp().getType();
  if (failed(verifyLinearProduct(*this, getX().getType(), getGate().getType(),
                                 result, getForm())))
    return failure();
  return verifySameElementType(*this, {getX(), getResult()});
}

//===----------------------------------------------------------------------===//
// RmsNormOp
//===----------------------------------------------------------------------===//

/// What tp.rms_norm and tp.add_rms_norm require of the normalized input
/// `x`, the weight and the attributes (`group` 0: the whole last
/// dimension).
static LogicalResult verifyRmsNorm(Operation *op, RankedTensorType x,
                                   RankedTensorType weight, double epsilon,
                                   double offset, int64_t group) {
  if (x.getRank() < 1)
    return op->emitOpError("input must have rank >= 1");
  if (failed(verifyPositive(op, "epsilon", epsilon)))
    return failure();
  if (!std::isfinite(offset))
    return op->emitOpError("'weight_offset' must be finite");
  if (weight.getRank() != 1)
    return op->emitOpError("weight must be 1-D, got rank ") << weight.getRank();
  int64_t features = x.getDimSize(x.getRank() - 1);
  int64_t normalized = features;
  if (group) {
    if (failed(verifyPositive(op, "group_size", group)))
      return failure();
    if (!ShapedType::isDynamic(features) && features % group != 0)
      return op->emitOpError("last dimension ")
             << features << " is not a multiple of group_size " << group;
    normalized = group;
  }
  if (!dimsAgree(weight.getDimSize(0), normalized))
    return op->emitOpError("weight has ")
           << dimStr(weight.getDimSize(0))
           << " elements but normalizes groups of " << dimStr(normalized);
  // The weight may keep its storage type (a bf16 checkpoint's norm scales
  // a row its export computes in f32).
  return success();
}

LogicalResult RmsNormOp::verify() {
  auto x = getX().getType();
  if (getResult().getType() != x)
    return emitOpError("result type ")
           << getResult().getType() << " differs from the input's " << x;
  IntegerAttr group = getGroupSizeAttr();
  if (group && group.getInt() == 0)
    return verifyPositive(*this, "group_size", int64_t{0});
  return verifyRmsNorm(
      *this, x, getWeight().getType(), getEpsilonAttr().getValueAsDouble(),
      getWeightOffsetAttr().getValueAsDouble(), group ? group.getInt() : 0);
}

//===----------------------------------------------------------------------===//
// AddRmsNormOp
//===----------------------------------------------------------------------===//

LogicalResult AddRmsNormOp::verify() {
  auto x = cast<RankedTensorType>(getLhs().getType());
  for (Value v : {getRhs(), getSum(), getNormed()})
    if (v.getType() != x)
      return emitOpError("expects the addends and both results of one type, "
                         "got ")
             << x << " and " << v.getType();
  return verifyRmsNorm(*this, x, cast<RankedTensorType>(getWeight().getType()),
                       getEpsilonAttr().getValueAsDouble(),
                       getWeightOffsetAttr().getValueAsDouble(), 0);
}

//===----------------------------------------------------------------------===//
// RotaryOp
//===----------------------------------------------------------------------===//

LogicalResult RotaryOp::verify() {
  auto x = getX().getType();
  if (x.getRank() != 3)
    return emitOpError(
               "input must be [batch, seq, heads * head_dim], got rank ")
           << x.getRank();
  int64_t headDim = getHeadDimAttr().getInt();
  if (failed(verifyPositive(*this, "head_dim", headDim)))
    return failure();
  int64_t features = x.getDimSize(2);
  if (!ShapedType::isDynamic(features) && features % headDim != 0)
    return emitOpError("features ")
           << features << " are not a multiple of head_dim " << headDim;
  int64_t rotaryDim = headDim;
  if (auto rotaryAttr = getRotaryDimAttr()) {
    rotaryDim = rotaryAttr.getInt();
    if (failed(verifyPositive(*this, "rotary_dim", rotaryDim)))
      return failure();
    if (rotaryDim > headDim)
      return emitOpError("rotary_dim ")
             << rotaryDim << " exceeds head_dim " << headDim;
  }
  if (rotaryDim % 2 != 0)
    return emitOpError("the rotated width must be even, got ") << rotaryDim;
  if (failed(verifyPositive(*this, "theta", getThetaAttr().getValueAsDouble())))
    return failure();
  // Each rope_type takes exactly its parameters.
  std::optional<StringRef> type = getRopeType();
  bool linear = type == "linear", llama3 = type == "llama3",
       yarn = type == "yarn", dynamic = type == "dynamic",
       longrope = type == "longrope";
  if (type && !linear && !llama3 && !yarn && !dynamic && !longrope)
    return emitOpError("rope_type '")
           << *type
           << "' is not one tp-opt implements (linear, llama3, yarn, "
              "dynamic, longrope)";
  // LongRoPE's factors: one per rotated pair, positive.
  for (auto [name, factors] : {std::pair{"short_factor", getShortFactorAttr()},
                               std::pair{"long_factor", getLongFactorAttr()}}) {
    if (!factors && longrope)
      return emitOpError("rope_type 'longrope' needs ") << name;
    if (factors && !longrope)
      return emitOpError(name) << " without a rope_type that takes it";
    if (factors && static_cast<int64_t>(factors.size()) != rotaryDim / 2)
      return emitOpError(name) << " has " << factors.size() << " factors for "
                               << rotaryDim / 2 << " rotated pairs";
    if (factors && llvm::any_of(factors.asArrayRef(), [](double f) {
          return !(f > 0) || !std::isfinite(f);
        }))
      return emitOpError(name) << " must be positive and finite";
  }
  auto check = [&](StringRef name, Attribute attr, bool wanted,
                   double value) -> LogicalResult {
    if (!attr && wanted)
      return emitOpError("rope_type '") << *type << "' needs " << name;
    if (attr && !wanted)
      return emitOpError(name) << " without a rope_type that takes it";
    if (attr && (!(value > 0) || !std::isfinite(value)))
      return emitOpError(name) << " must be positive and finite, got " << value;
    return success();
  };
  auto value = [](std::optional<APFloat> v) {
    return v ? v->convertToDouble() : 0.0;
  };
  if (failed(check("factor", getFactorAttr(),
                   linear || llama3 || yarn || dynamic, value(getFactor()))) ||
      failed(
          check("beta_fast", getBetaFastAttr(), yarn, value(getBetaFast()))) ||
      failed(
          check("beta_slow", getBetaSlowAttr(), yarn, value(getBetaSlow()))) ||
      failed(check("attention_factor", getAttentionFactorAttr(),
                   yarn || longrope, value(getAttentionFactor()))) ||
      failed(check("low_freq_factor", getLowFreqFactorAttr(), llama3,
                   value(getLowFreqFactor()))) ||
      failed(check("high_freq_factor", getHighFreqFactorAttr(), llama3,
                   value(getHighFreqFactor()))) ||
      failed(check("original_max_position_embeddings",
                   getOriginalMaxPositionEmbeddingsAttr(),
                   llama3 || yarn || dynamic || longrope,
                   getOriginalMaxPositionEmbeddings().value_or(0))))
    return failure();
  if (getTruncateAttr() && !yarn)
    return emitOpError("truncate without a rope_type that takes it");
  if (llama3 && !(*getLowFreqFactor() < *getHighFreqFactor()))
    return emitOpError("low_freq_factor must be below high_freq_factor");
  return success();
}

//===----------------------------------------------------------------------===//
// AttentionOp
//===----------------------------------------------------------------------===//

/// q, k, v, the mask and the attributes of tp.attention and its backward.
template <typename AttentionLikeOp>
static LogicalResult verifyAttentionOperands(AttentionLikeOp op) {
  auto q = op.getQ().getType();
  auto k = op.getK().getType();
  auto v = op.getV().getType();
  if (q.getRank() != 3 || k.getRank() != 3 || v.getRank() != 3)
    return op.emitOpError("q, k and v must be [batch, seq, heads * head_dim]");
  int64_t heads = op.getNumHeadsAttr().getInt();
  int64_t kvHeads = op.getNumKvHeadsAttr().getInt();
  int64_t headDim = op.getHeadDimAttr().getInt();
  if (failed(verifyPositive(op.getOperation(), "num_heads", heads)) ||
      failed(verifyPositive(op.getOperation(), "num_kv_heads", kvHeads)) ||
      failed(verifyPositive(op.getOperation(), "head_dim", headDim)) ||
      failed(verifyPositive(op.getOperation(), "scale",
                            op.getScaleAttr().getValueAsDouble())))
    return failure();
  if (heads % kvHeads != 0)
    return op.emitOpError("num_heads ")
           << heads << " is not a multiple of num_kv_heads " << kvHeads;
  if (!dimsAgree(q.getDimSize(2), heads * headDim))
    return op.emitOpError("q has ")
           << dimStr(q.getDimSize(2))
           << " features, expected num_heads * head_dim = " << heads * headDim;
  for (auto [name, type] : {std::make_pair("k", k), std::make_pair("v", v)})
    if (!dimsAgree(type.getDimSize(2), kvHeads * headDim))
      return op.emitOpError()
             << name << " has " << dimStr(type.getDimSize(2))
             << " features, expected num_kv_heads * head_dim = "
             << kvHeads * headDim;
  if (!dimsAgree(q.getDimSize(0), k.getDimSize(0)) ||
      !dimsAgree(k.getDimSize(0), v.getDimSize(0)))
    return op.emitOpError("q, k and v have different batch sizes");
  if (!dimsAgree(k.getDimSize(1), v.getDimSize(1)))
    return op.emitOpError("k and v have different sequence lengths");
  if (Value mask = op.getKeyMask()) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    if (maskType.getRank() != 2 ||
        !dimsAgree(maskType.getDimSize(0), k.getDimSize(0)) ||
        !dimsAgree(maskType.getDimSize(1), k.getDimSize(1)))
      return op.emitOpError("key mask must be [batch, seq_kv], got ")
             << maskType;
  }
  if (auto window = op.getSlidingWindowAttr())
    if (failed(verifyPositive(op.getOperation(), "sliding_window",
                              window.getInt())))
      return failure();
  if (auto softcap = op.getSoftcapAttr())
    if (failed(verifyPositive(op.getOperation(), "softcap",
                              softcap.getValueAsDouble())))
      return failure();
  return verifySameElementType(op.getOperation(),
                               {op.getQ(), op.getK(), op.getV()});
}

/// `lse` is [batch, seq_q, num_heads] of q (f32 by the op's constraint).
template <typename AttentionLikeOp>
static LogicalResult verifyLogSumExp(AttentionLikeOp op, Value lse) {
  auto type = cast<RankedTensorType>(lse.getType());
  auto q = op.getQ().getType();
  if (type.getRank() != 3 || q.getRank() != 3 ||
      !dimsAgree(type.getDimSize(0), q.getDimSize(0)) ||
      !dimsAgree(type.getDimSize(1), q.getDimSize(1)) ||
      !dimsAgree(type.getDimSize(2), op.getNumHeadsAttr().getInt()))
    return op.emitOpError("lse must be [batch, seq_q, num_heads] of q ")
           << q << ", got " << type;
  return success();
}

LogicalResult AttentionOp::verify() {
  if (getResult().getType() != getQ().getType())
    return emitOpError("result type ")
           << getResult().getType() << " differs from q's " << getQ().getType();
  if (failed(verifyAttentionOperands(*this)))
    return failure();
  if (Value lse = getLse())
    return verifyLogSumExp(*this, lse);
  return success();
}

//===----------------------------------------------------------------------===//
// Mamba2MixerOp
//===----------------------------------------------------------------------===//

LogicalResult Mamba2MixerOp::verify() {
  auto x = getX().getType();
  if (x.getRank() != 3 || getResult().getType() != x)
    return emitOpError("x and the result must be the same [batch, seq, "
                       "hidden] type");
  int64_t heads = getNumHeadsAttr().getInt(),
          headDim = getHeadDimAttr().getInt(),
          groups = getNGroupsAttr().getInt(),
          state = getStateSizeAttr().getInt(),
          kernel = getConvKernelAttr().getInt();
  for (auto [name, v] :
       {std::make_pair("num_heads", heads), std::make_pair("head_dim", headDim),
        std::make_pair("n_groups", groups), std::make_pair("state_size", state),
        std::make_pair("conv_kernel", kernel)})
    if (failed(verifyPositive(*this, name, v)))
      return failure();
  if (heads % groups != 0)
    return emitOpError("num_heads ")
           << heads << " is not a multiple of n_groups " << groups;
  if (failed(verifyPositive(*this, "norm_eps",
                            getNormEpsAttr().getValueAsDouble())))
    return failure();
  // The dt clamp's lower bound: a number, or -inf for none.
  double dtMin = getDtMinAttr().getValueAsDouble();
  if (std::isnan(dtMin) || dtMin == std::numeric_limits<double>::infinity())
    return emitOpError("'dt_min' must be a number or -inf, got ") << dtMin;
  int64_t hidden = x.getDimSize(2), inner = heads * headDim,
          conv = inner + 2 * groups * state;
  auto expect = [&](Value v, ArrayRef<int64_t> shape,
                    StringRef name) -> LogicalResult {
    auto type = cast<RankedTensorType>(v.getType());
    bool ok = type.getRank() == static_cast<int64_t>(shape.size());
    for (size_t i = 0; ok && i < shape.size(); ++i)
      ok = dimsAgree(type.getDimSize(i), shape[i]);
    if (!ok) {
      std::string want = "[";
      for (size_t i = 0; i < shape.size(); ++i)
        want += (i ? ", " : "") + dimStr(shape[i]);
      return emitOpError() << name << " must be " << want << "], got " << type;
    }
    return success();
  };
  if (failed(expect(getInProjWeight(), {inner + conv + heads, hidden},
                    "in_proj_weight")) ||
      failed(expect(getConvWeight(), {conv, 1, kernel}, "conv_weight")) ||
      failed(expect(getConvBias(), {conv}, "conv_bias")) ||
      failed(expect(getDtBias(), {heads}, "dt_bias")) ||
      failed(expect(getALog(), {heads}, "a_log")) ||
      failed(expect(getD(), {heads}, "d")) ||
      failed(expect(getNormWeight(), {inner}, "norm_weight")) ||
      failed(expect(getOutProjWeight(), {hidden, inner}, "out_proj_weight")))
    return failure();
  if (Value mask = getKeyMask()) {
    auto maskType = cast<RankedTensorType>(mask.getType());
    if (maskType.getRank() != 2 ||
        !dimsAgree(maskType.getDimSize(0), x.getDimSize(0)) ||
        !dimsAgree(maskType.getDimSize(1), x.getDimSize(1)))
      return emitOpError("key mask must be [batch, seq], got ") << maskType;
  }
  // The parameters keep their storage types, which may differ (a bf16
  // checkpoint keeps A_log and D in f32); the mixer computes in f32.
  return success();
}

//===----------------------------------------------------------------------===//
// ScaleOp
//===----------------------------------------------------------------------===//

LogicalResult ScaleOp::verify() {
  if (!std::isfinite(getFactorAttr().getValueAsDouble()))
    return emitOpError("'factor' must be finite");
  return success();
}

LogicalResult SoftcapOp::verify() {
  return verifyPositive(*this, "cap", getCap().convertToDouble());
}

//===----------------------------------------------------------------------===//
// Feature slices
//===----------------------------------------------------------------------===//

/// `part` is features [offset, offset + size) of every token of `whole`.
static LogicalResult verifyFeatureSlice(Operation *op, Value wholeValue,
                                        Value partValue, int64_t offset,
                                        int64_t size) {
  auto whole = cast<RankedTensorType>(wholeValue.getType());
  auto part = cast<RankedTensorType>(partValue.getType());
  if (failed(verifySameElementType(op, {wholeValue, partValue})))
    return failure();
  if (whole.getRank() < 1 || whole.getRank() != part.getRank())
    return op->emitOpError("the whole ") << whole << " and the part " << part
                                         << " must have one rank, at least 1";
  if (failed(verifyLeadingDims(op, whole, part, whole.getRank() - 1, "whole",
                               "part")))
    return failure();
  int64_t width = whole.getShape().back();
  if (ShapedType::isDynamic(width))
    return op->emitOpError("the last dimension of ")
           << whole << " must be static";
  if (offset < 0 || size < 0 || offset > width - size)
    return op->emitOpError("features [")
           << offset << ", " << offset + size << ") are not within the "
           << width << " of " << whole;
  if (part.getShape().back() != size)
    return op->emitOpError("the part's last dimension (")
           << dimStr(part.getShape().back()) << ") is not the size " << size;
  return success();
}

LogicalResult FeatureSliceOp::verify() {
  return verifyFeatureSlice(*this, getX(), getResult(), getOffset(), getSize());
}

LogicalResult FeatureSliceGradOp::verify() {
  auto dy = getDy().getType();
  int64_t size = dy.getRank() ? dy.getShape().back() : 0;
  if (ShapedType::isDynamic(size))
    return emitOpError("the last dimension of ") << dy << " must be static";
  int64_t width = getWidth();
  if (getResult().getType().getRank() &&
      getResult().getType().getShape().back() != width)
    return emitOpError("the result's last dimension is not the width ")
           << width;
  return verifyFeatureSlice(*this, getResult(), getDy(), getOffset(), size);
}

#define GET_OP_CLASSES
//===----------------------------------------------------------------------===//
// An all-reduce in flight
//===----------------------------------------------------------------------===//

LogicalResult AllReduceStartOp::verify() {
  if (getGridAxes().empty())
    return emitOpError("sums over no grid axis");
  if (!getPending().hasOneUse() ||
      !isa<AllReduceWaitOp>(*getPending().getUsers().begin()) ||
      getPending().getUsers().begin()->getBlock() != (*this)->getBlock())
    return emitOpError(
        "result must be read once, by a tp.all_reduce_wait in its block");
  return success();
}

LogicalResult AllReduceWaitOp::verify() {
  auto start = getPending().getDefiningOp<AllReduceStartOp>();
  if (!start || start->getBlock() != (*this)->getBlock())
    return emitOpError(
        "operand must be a tp.all_reduce_start's result in this block");
  for (Operation *op = start->getNextNode(); op && op != *this;
       op = op->getNextNode())
    if (isa<AllReduceStartOp>(op))
      return emitOpError("another all-reduce starts before this one ends")
                 .attachNote(op->getLoc())
             << "started here";
  return success();
}

#include "tpopt/Dialect/TP/TPOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Training step ops
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::verify() {
  auto logits = getLogits().getType();
  auto ids = getIds().getType();
  auto mask = cast<RankedTensorType>(getMask().getType());
  auto lse = getLse().getType();
  if (logits.getRank() != 3 || ids.getRank() != 2 || mask.getRank() != 2 ||
      lse.getRank() != 2)
    return emitOpError("expected logits [batch, seq, vocab], ids, mask and "
                       "lse [batch, seq]");
  for (int64_t d = 0; d < 2; ++d)
    if (!dimsAgree(logits.getDimSize(d), ids.getDimSize(d)) ||
        !dimsAgree(ids.getDimSize(d), mask.getDimSize(d)) ||
        !dimsAgree(ids.getDimSize(d), lse.getDimSize(d)))
      return emitOpError("dimension ")
             << d << " of logits, ids, mask and lse differ";
  if (!lse.getElementType().isF32())
    return emitOpError("lse must be f32, got ") << lse;
  return verifyVocabRanges(*this, logits.getDimSize(2),
                           "logits' vocabulary entries");
}

LogicalResult CrossEntropyGradOp::verify() {
  return verifyVocabRanges(*this, getLogits().getType().getDimSize(2),
                           "logits' vocabulary entries");
}

/// x [batch, seq, hidden], ids and mask [batch, seq], weight [vocab, hidden].
static LogicalResult verifyLinearCrossEntropy(Operation *op, Value xValue,
                                              Value idsValue, Value maskValue,
                                              Value weightValue) {
  auto x = cast<RankedTensorType>(xValue.getType());
  auto ids = cast<RankedTensorType>(idsValue.getType());
  auto mask = cast<RankedTensorType>(maskValue.getType());
  if (x.getRank() != 3 || ids.getRank() != 2 || mask.getRank() != 2)
    return op->emitOpError("expected x [batch, seq, hidden], ids and mask "
                           "[batch, seq]");
  for (int64_t d = 0; d < 2; ++d)
    if (!dimsAgree(x.getDimSize(d), ids.getDimSize(d)) ||
        !dimsAgree(ids.getDimSize(d), mask.getDimSize(d)))
      return op->emitOpError("dimension ") << d << " of x, ids and mask differ";
  auto weight = cast<RankedTensorType>(weightValue.getType());
  if (weight.getRank() != 2 ||
      !dimsAgree(weight.getDimSize(1), x.getDimSize(2)))
    return op->emitOpError("weight must be [vocab, ")
           << dimStr(x.getDimSize(2)) << "], got " << weight;
  return success();
}

LogicalResult LinearCrossEntropyOp::verify() {
  if (failed(verifyLinearCrossEntropy(*this, getX(), getIds(), getMask(),
                                      getWeight())))
    return failure();
  return verifyVocabRanges(*this, getWeight().getType().getDimSize(0),
                           "weight's rows");
}

LogicalResult LinearGradInputOp::verify() {
  auto dy = getDy().getType();
  auto w = getWeight().getType();
  auto dx = getResult().getType();
  if (w.getRank() != 2 || dy.getRank() < 1 || dx.getRank() != dy.getRank())
    return emitOpError("expected dy [..., out], weight [out, in] and a "
                       "result of dy's rank");
  if (failed(verifyLeadingDims(*this, dy, dx, dy.getRank() - 1, "dy",
                               "the result")))
    return failure();
  if (!dimsAgree(dy.getShape().back(), w.getDimSize(0)) ||
      !dimsAgree(dx.getShape().back(), w.getDimSize(1)))
    return emitOpError("dy ")
           << dy << " and result " << dx << " do not match weight " << w;
  return success();
}

/// dy [..., out] and x [..., in] with the same leading dimensions give the
/// weight gradient `dw` [out, in] (`what`: the result or the parameter).
static LogicalResult verifyWeightGradShapes(Operation *op, RankedTensorType dy,
                                            RankedTensorType x,
                                            RankedTensorType dw,
                                            StringRef what) {
  if (dw.getRank() != 2 || dy.getRank() != x.getRank() || dy.getRank() < 1)
    return op->emitOpError("expected dy [..., out], x [..., in] and a ")
           << what << " [out, in]";
  if (failed(verifyLeadingDims(op, dy, x, dy.getRank() - 1, "dy", "x")))
    return failure();
  if (!dimsAgree(dy.getShape().back(), dw.getDimSize(0)) ||
      !dimsAgree(x.getShape().back(), dw.getDimSize(1)))
    return op->emitOpError()
           << what << " " << dw << " is not [dy's last, x's last] of " << dy
           << ", " << x;
  return success();
}

LogicalResult LinearGradWeightOp::verify() {
  return verifyWeightGradShapes(*this, getDy().getType(), getX().getType(),
                                getResult().getType(), "result");
}

LogicalResult SumLeadingOp::verify() {
  auto x = getX().getType();
  auto r = getResult().getType();
  if (x.getRank() < 1 || r.getRank() != 1 ||
      !dimsAgree(x.getShape().back(), r.getDimSize(0)))
    return emitOpError("result ") << r << " is not the last dimension of " << x;
  return success();
}

LogicalResult RmsNormGradOp::verify() {
  if (getDx().getType() != getX().getType() ||
      getDy().getType() != getX().getType())
    return emitOpError("x, dy and dx must have one type");
  if (getDweight().getType() != getWeight().getType())
    return emitOpError("dweight must have the weight's type");
  if (auto group = getGroupSizeAttr())
    return verifyPositive(*this, "group_size", group.getInt());
  return success();
}

LogicalResult AttentionGradOp::verify() {
  if (getDout().getType() != getQ().getType() ||
      getDq().getType() != getQ().getType() ||
      getDk().getType() != getK().getType() ||
      getDv().getType() != getV().getType())
    return emitOpError("dout and dq must have q's type, dk k's and dv v's");
  if (failed(verifyAttentionOperands(*this)))
    return failure();
  if (!getOut() != !getLse())
    return emitOpError("takes the forward's out and lse together");
  if (Value out = getOut()) {
    if (out.getType() != getQ().getType())
      return emitOpError("the forward's out must have q's type ")
             << getQ().getType() << ", got " << out.getType();
    return verifyLogSumExp(*this, getLse());
  }
  return success();
}

/// `param` is the argument of the enclosing function named `fqn`, or (ZeRO
/// stage 3) the result of a tp.param_bucket_gather that gathers it.
static LogicalResult verifyParamFqn(Operation *op, Value param,
                                    StringRef expected) {
  if (auto result = dyn_cast<OpResult>(param))
    if (auto gather = dyn_cast<ParamBucketGatherOp>(result.getOwner())) {
      auto fqn = cast<StringAttr>(gather.getFqns()[result.getResultNumber()]);
      if (fqn.getValue() == expected)
        return success();
      return op->emitOpError("the parameter is gathered as '")
             << fqn.getValue() << "', not '" << expected << "'";
    }
  auto arg = dyn_cast<BlockArgument>(param);
  auto func = arg ? dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp())
                  : FunctionOpInterface();
  auto fqn = func ? func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                      TPDialect::kFqnAttrName)
                  : StringAttr();
  if (!fqn || fqn.getValue() != expected)
    return op->emitOpError("the parameter must be the argument of the "
                           "function whose tp.fqn is '")
           << expected << "'";
  return success();
}

/// "tp" or "dp": the grid axis a collective of the training step runs on.
static LogicalResult verifyGroup(Operation *op, StringRef group) {
  if (group != "tp" && group != "dp")
    return op->emitOpError("group must be \"tp\" or \"dp\", got '")
           << group << "'";
  return success();
}

LogicalResult BroadcastReplicaOp::verify() {
  if (failed(verifyGroup(*this, getGroup())))
    return failure();
  return verifyParamFqn(*this, getParam(), getFqn());
}

/// The checks of a gradient accumulation's parameter and attributes.
template <typename AccumulateOp>
static LogicalResult verifyAccumulation(AccumulateOp op) {
  if (failed(verifyParamFqn(op, op.getParam(), op.getFqn())))
    return failure();
  if (op.getSplitDimAttr().getInt() >= 0 &&
      (op.getReduction() || op.getDerivedReduction() || op.getOwned()))
    return op.emitOpError("a split parameter's gradient has no replica class");
  if (op.getOwned() && op.getReduction())
    return op.emitOpError("an owned (excluded) parameter's gradient has no "
                          "replica class");
  return success();
}

LogicalResult ReplicaSumOp::verify() {
  // Numbered in order of first appearance: each block is the next number
  // or one seen before.
  int64_t next = 0;
  for (int64_t block : getBlocks()) {
    if (block < 0 || block > next)
      return emitOpError("blocks must number the ranks' blocks from 0 in "
                         "the order they first appear, got ")
             << getBlocksAttr();
    next = std::max(next, block + 1);
  }
  if (next == static_cast<int64_t>(getBlocks().size()))
    return emitOpError("no block is held by more than one rank: nothing to "
                       "sum");
  return success();
}

LogicalResult AccumulateGradOp::verify() { return verifyAccumulation(*this); }

LogicalResult AccumulateLinearGradWeightOp::verify() {
  auto dy = getDy().getType();
  auto x = getX().getType();
  auto w = getParam().getType();
  if (dy.getElementType() != w.getElementType() ||
      x.getElementType() != w.getElementType())
    return emitOpError("dy, x and the parameter must have one element type");
  if (failed(verifyWeightGradShapes(*this, dy, x, w, "parameter")))
    return failure();
  return verifyAccumulation(*this);
}

LogicalResult AccumulateLinearCrossEntropyOp::verify() {
  if (getX().getType().getElementType() !=
      getParam().getType().getElementType())
    return emitOpError("x and the parameter must have one element type");
  if (failed(verifyLinearCrossEntropy(*this, getX(), getIds(), getMask(),
                                      getParam())) ||
      failed(verifyVocabRanges(*this, getParam().getType().getDimSize(0),
                               "parameter's rows")) ||
      failed(verifyStreamedParam(*this, getParam())))
    return failure();
  return verifyAccumulation(*this);
}

LogicalResult EmbeddingGradOp::verify() {
  return verifyVocabRanges(*this, getTable().getType().getDimSize(0),
                           "table's rows");
}

LogicalResult AccumulateEmbeddingGradOp::verify() {
  auto dy = getDy().getType();
  auto table = getParam().getType();
  if (table.getRank() != 2)
    return emitOpError("the parameter must be a [vocab, hidden] table");
  if (dy.getElementType() != table.getElementType())
    return emitOpError("dy and the parameter must have one element type");
  if (failed(verifyCompatibleShape(dy.getShape().drop_back(),
                                   getIds().getType().getShape())) ||
      failed(verifyCompatibleShape(dy.getShape().take_back(),
                                   table.getShape().take_back())))
    return emitOpError("dy must be [ids..., hidden] for ")
           << getIds().getType() << " and a table of " << table;
  if (failed(verifyVocabRanges(*this, table.getDimSize(0), "table's rows")) ||
      failed(verifyStreamedParam(*this, getParam())))
    return failure();
  return verifyAccumulation(*this);
}

/// A bucket's FQNs: at least one, none twice.
template <typename BucketOp>
static LogicalResult verifyBucketFqns(BucketOp op) {
  if (op.getFqns().empty())
    return op.emitOpError("a bucket holds at least one gradient");
  llvm::StringSet<> seen;
  for (Attribute fqn : op.getFqns())
    if (!seen.insert(cast<StringAttr>(fqn).getValue()).second)
      return op.emitOpError("gradient '")
             << cast<StringAttr>(fqn).getValue() << "' is in the bucket twice";
  return success();
}

/// The size of the data-parallel grid a sharded bucket is split over.
static FailureOr<int64_t> dataParallelRanks(Operation *op) {
  auto grid = SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(
      op, StringAttr::get(op->getContext(), "dp"));
  if (!grid || grid.getRank() != 1 || grid.getShape()[0] < 2)
    return op->emitOpError("needs a one-dimensional shard.grid @dp of at "
                           "least 2 ranks");
  return grid.getShape()[0];
}

LogicalResult GradBucketAllReduceOp::verify() {
  if (failed(verifyGroup(*this, getGroup())))
    return failure();
  if (getFqns().empty())
    return emitOpError("a bucket holds at least one gradient");
  int64_t bucket = getBucketAttr().getInt(), bytes = getBytesAttr().getInt();
  if (bucket < 0 || bytes <= 0)
    return emitOpError("bucket must be at least 0 and bytes positive, got ")
           << bucket << " and " << bytes;
  return verifyBucketFqns(*this);
}

LogicalResult GradBucketReduceScatterOp::verify() {
  if (failed(verifyBucketFqns(*this)))
    return failure();
  int64_t bytes = getBytesAttr().getInt(),
          padded = getPaddedBytesAttr().getInt();
  if (getBucketAttr().getInt() < 0 || bytes <= 0 || bytes % 4 ||
      padded < bytes || padded % 4)
    return emitOpError("bucket must be at least 0, bytes (FP32) positive and "
                       "padded_bytes at least as many, both multiples of 4; "
                       "got ")
           << getBucketAttr().getInt() << ", " << bytes << " and " << padded;
  FailureOr<int64_t> ranks = dataParallelRanks(*this);
  if (failed(ranks))
    return failure();
  if ((padded / 4) % *ranks)
    return emitOpError("padded_bytes must split into ")
           << *ranks << " equal runs of FP32 elements, got " << padded;
  if (getStreamed() && (!getMicroBatch() || getFqns().size() != 1))
    return emitOpError("streamed needs micro_batch and one parameter, got ")
           << getFqns().size();
  // Per micro-batch in the training step, or once in the optimizer step.
  StringRef expected = getMicroBatch() ? kTrainStepEntry : kOptimizerStepEntry;
  auto func = (*this)->getParentOfType<FunctionOpInterface>();
  auto role = func ? func->getAttrOfType<StringAttr>(TPDialect::kEntryAttrName)
                   : StringAttr();
  if (role && role.getValue() != expected)
    return emitOpError(getMicroBatch() ? "with micro_batch must be in the "
                                         "training step"
                                       : "without micro_batch must be in the "
                                         "optimizer step")
           << " (tp.entry = \"" << expected << "\"), not in \""
           << role.getValue() << "\"";
  return success();
}

/// A bucket of parameters in their `dtype` gathered over `@dp`: `bytes`
/// split into equal runs of whole elements.
template <typename GatherOp> static LogicalResult verifyParamRuns(GatherOp op) {
  if (failed(verifyBucketFqns(op)))
    return failure();
  FailureOr<int64_t> ranks = dataParallelRanks(op);
  if (failed(ranks))
    return failure();
  int64_t bytes = op.getBytesAttr().getInt();
  int64_t element = op.getDtype().getIntOrFloatBitWidth() / 8;
  if (op.getBucketAttr().getInt() < 0)
    return op.emitOpError("bucket must be at least 0, got ")
           << op.getBucketAttr().getInt();
  if (bytes <= 0 || bytes % (element * *ranks))
    return op.emitOpError("bytes must split into ")
           << *ranks << " equal runs of " << op.getDtype() << " elements, got "
           << bytes;
  return success();
}

LogicalResult ParamBucketAllGatherOp::verify() {
  return verifyParamRuns(*this);
}

LogicalResult ParamBucketGatherOp::verify() {
  if (getNumResults() != getFqns().size())
    return emitOpError("has one result per parameter: ")
           << getFqns().size() << " parameters, " << getNumResults()
           << " results";
  for (auto [fqn, result] : llvm::zip(getFqns(), getResults()))
    if (cast<RankedTensorType>(result.getType()).getElementType() != getDtype())
      return emitOpError("parameter '")
             << cast<StringAttr>(fqn).getValue() << "' is " << result.getType()
             << ", the bucket holds " << getDtype();
  return verifyParamRuns(*this);
}

LogicalResult ParamBucketShardOp::verify() {
  auto func = (*this)->getParentOfType<FunctionOpInterface>();
  auto role = func ? func->getAttrOfType<StringAttr>(TPDialect::kEntryAttrName)
                   : StringAttr();
  if (role && role.getValue() != kInitEntry)
    return emitOpError("must be in the init (tp.entry = \"")
           << kInitEntry << "\"), not in \"" << role.getValue() << "\"";
  return verifyParamRuns(*this);
}

LogicalResult OptimizerUpdateOp::verify() {
  if (getOptimizer() != "adamw" && getOptimizer() != "sgd")
    return emitOpError("optimizer must be adamw or sgd, got '")
           << getOptimizer() << "'";
  return success();
}

//===----------------------------------------------------------------------===//
// AllGatherUnevenOp
//===----------------------------------------------------------------------===//

/// `blocks` and `whole` of an uneven collective agree but on `axis`, where
/// `blocks` (each rank's padded block, named `blocksName`) is the largest
/// of `sizes` (one of at least 1 per rank).
static LogicalResult verifyUnevenBlocks(Operation *op, Value blocks,
                                        StringRef blocksName, Value whole,
                                        int64_t axis, ArrayRef<int64_t> sizes) {
  auto part = cast<RankedTensorType>(blocks.getType());
  auto all = cast<RankedTensorType>(whole.getType());
  if (axis < 0 || axis >= part.getRank() || part.getRank() != all.getRank())
    return op->emitOpError("axis ")
           << axis << " does not relate " << part << " and " << all;
  if (sizes.empty() || llvm::any_of(sizes, [](int64_t s) { return s < 1; }))
    return op->emitOpError("needs a size of at least 1 for each rank");
  if (!dimsAgree(part.getDimSize(axis), *llvm::max_element(sizes)))
    return op->emitOpError()
           << blocksName << " axis " << dimStr(part.getDimSize(axis))
           << " is not the largest size (" << *llvm::max_element(sizes) << ")";
  for (int64_t d = 0; d < part.getRank(); ++d)
    if (d != axis && !dimsAgree(part.getDimSize(d), all.getDimSize(d)))
      return op->emitOpError("input and result differ on dimension ") << d;
  return verifySameElementType(op, {blocks, whole});
}

/// An uneven collective between `blocks` and `whole` (the ranks' elements
/// one after the other along `axis`); the names say which is the input.
static LogicalResult verifyUnevenCollective(Operation *op, Value blocks,
                                            StringRef blocksName, Value whole,
                                            StringRef wholeName, int64_t axis,
                                            ArrayRef<int64_t> sizes) {
  if (failed(verifyUnevenBlocks(op, blocks, blocksName, whole, axis, sizes)))
    return failure();
  int64_t total = 0;
  for (int64_t s : sizes)
    total += s;
  int64_t wholeAxis = cast<RankedTensorType>(whole.getType()).getDimSize(axis);
  if (!dimsAgree(wholeAxis, total))
    return op->emitOpError() << wholeName << " axis " << dimStr(wholeAxis)
                             << " is not the sizes' sum (" << total << ")";
  return success();
}

LogicalResult AllGatherUnevenOp::verify() {
  return verifyUnevenCollective(*this, getInput(), "input", getResult(),
                                "result", getGatherAxis(), getSizes());
}

LogicalResult ReduceScatterUnevenOp::verify() {
  return verifyUnevenCollective(*this, getResult(), "result", getInput(),
                                "input", getScatterAxis(), getSizes());
}

LogicalResult AllSliceUnevenOp::verify() {
  int64_t axis = getSliceAxis();
  ArrayRef<int64_t> starts = getStarts(), sizes = getSizes();
  if (starts.size() != sizes.size())
    return emitOpError("needs a start and a size for each rank");
  if (failed(verifyUnevenBlocks(*this, getResult(), "result", getInput(), axis,
                                sizes)))
    return failure();
  int64_t inAxis = getInput().getType().getDimSize(axis);
  for (auto [start, size] : llvm::zip_equal(starts, sizes))
    if (start < 0 || (!ShapedType::isDynamic(inAxis) && start + size > inAxis))
      return emitOpError("range [")
             << start << ", " << start + size << ") is not in input axis "
             << dimStr(inAxis);
  return success();
}
