//===- TPAutodiffRules.cpp - the backward of each tp op -------------------===//
//
// AutodiffOpInterface of every differentiable tp op (see TPInterfaces.td):
// the cotangents of its operands from those of its results, built at global
// shapes from the backward ops of TPTrainOps.td and the forward ops
// themselves (a sum's cotangent is the operand's, a scale's is scaled).
// tp-build-train-step walks the forward in reverse and asks each op.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/TPOps.h"

using namespace mlir;
using namespace mlir::tp;

/// The cotangent `dy` of a result, or a failure on `op` when a rule that
/// needs one is asked without it.
static FailureOr<Value> required(Operation *op, ValueRange resultGrads) {
  if (resultGrads.empty() || !resultGrads[0]) {
    op->emitError("autodiff: no cotangent for the result");
    return failure();
  }
  return resultGrads[0];
}

//===----------------------------------------------------------------------===//
// Parameterized blocks
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  operandGrads.push_back(Value());
  // tp-build-train-step sets the padding row, which the graph cannot show.
  operandGrads.push_back(EmbeddingGradOp::create(
      b, getLoc(), getTable().getType(), getIds(), *dy, getTable(),
      /*vocab_parallel=*/UnitAttr(), /*padding_idx=*/IntegerAttr(),
      /*vocab_starts=*/DenseI64ArrayAttr(),
      /*vocab_sizes=*/DenseI64ArrayAttr()));
  return success();
}

void EmbeddingOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getIds());
}

LogicalResult LinearOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  operandGrads.push_back(LinearGradInputOp::create(
      b, getLoc(), getX().getType(), *dy, getWeight()));
  operandGrads.push_back(LinearGradWeightOp::create(
      b, getLoc(), getWeight().getType(), *dy, getX()));
  if (Value bias = getBias())
    operandGrads.push_back(
        SumLeadingOp::create(b, getLoc(), bias.getType(), *dy));
  return success();
}

void LinearOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getX());
  saved.push_back(getWeight());
}

LogicalResult BiasAddOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  operandGrads.push_back(*dy);
  operandGrads.push_back(
      SumLeadingOp::create(b, getLoc(), getBias().getType(), *dy));
  return success();
}

void BiasAddOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

LogicalResult RmsNormOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  auto grad = RmsNormGradOp::create(
      b, getLoc(), getX().getType(), getWeight().getType(), getX(), getWeight(),
      *dy, getEpsilonAttr(), getWeightOffsetAttr(), getGroupSizeAttr());
  operandGrads.push_back(grad.getDx());
  operandGrads.push_back(grad.getDweight());
  return success();
}

void RmsNormOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getX());
  saved.push_back(getWeight());
}

LogicalResult RotaryOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                 SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  // A rotation's transpose is the rotation by the opposite angle.
  auto back = cast<RotaryOp>(b.clone(*getOperation()));
  back->setOperand(0, *dy);
  back.setTranspose(!getTranspose());
  operandGrads.push_back(back.getResult());
  return success();
}

void RotaryOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  auto grad = AttentionGradOp::create(
      b, getLoc(), getQ().getType(), getK().getType(), getV().getType(), getQ(),
      getK(), getV(), *dy, getKeyMask(), /*out=*/Value(), /*lse=*/Value(),
      getNumHeadsAttr(), getNumKvHeadsAttr(), getHeadDimAttr(), getScaleAttr(),
      getCausalAttr(), getSlidingWindowAttr(), getSoftcapAttr());
  operandGrads.append({grad.getDq(), grad.getDk(), grad.getDv()});
  if (getKeyMask())
    operandGrads.push_back(Value());
  return success();
}

void AttentionOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.append({getQ(), getK(), getV()});
}

LogicalResult Mamba2MixerOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  SmallVector<Type> types;
  for (Value v : getOperands().take_front(9))
    types.push_back(v.getType());
  auto grad = Mamba2MixerGradOp::create(
      b, getLoc(), types, getX(), getInProjWeight(), getConvWeight(),
      getConvBias(), getDtBias(), getALog(), getD(), getNormWeight(),
      getOutProjWeight(), *dy, getKeyMask(), getNumHeadsAttr(),
      getHeadDimAttr(), getNGroupsAttr(), getStateSizeAttr(),
      getConvKernelAttr(), getNormEpsAttr(), getDtMinAttr(), getFoldedAAttr());
  operandGrads.append(grad->result_begin(), grad->result_end());
  if (getKeyMask())
    operandGrads.push_back(Value());
  return success();
}

void Mamba2MixerOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.append(getOperands().begin(), getOperands().end());
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// dx = dy * f'(x) by the gradient op GradOpT (with the forward's extra
/// attributes `args`).
template <typename GradOpT, typename... Args>
static LogicalResult
unaryVJP(Operation *op, OpBuilder &b, ValueRange resultGrads,
         SmallVectorImpl<Value> &operandGrads, Args... args) {
  FailureOr<Value> dy = required(op, resultGrads);
  if (failed(dy))
    return failure();
  Value x = op->getOperand(0);
  operandGrads.push_back(
      GradOpT::create(b, op->getLoc(), x.getType(), x, *dy, args...));
  return success();
}

LogicalResult SiluOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP<SiluGradOp>(*this, b, resultGrads, operandGrads);
}

LogicalResult ReluSquaredOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP<ReluSquaredGradOp>(*this, b, resultGrads, operandGrads);
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP<GeluGradOp>(*this, b, resultGrads, operandGrads,
                              getApproximateAttr());
}

LogicalResult SoftcapOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                  SmallVectorImpl<Value> &operandGrads) {
  return unaryVJP<SoftcapGradOp>(*this, b, resultGrads, operandGrads,
                                 getCapAttr());
}

void SiluOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getX());
}
void ReluSquaredOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getX());
}
void GeluOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getX());
}
void SoftcapOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.push_back(getX());
}

LogicalResult ScaleOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  operandGrads.push_back(ScaleOp::create(b, getLoc(), *dy, getFactorAttr()));
  return success();
}

void ScaleOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

LogicalResult AddOp::buildVJP(OpBuilder &, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  operandGrads.append({*dy, *dy});
  return success();
}

void AddOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

LogicalResult MulOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  operandGrads.push_back(MulOp::create(b, getLoc(), *dy, getRhs()));
  operandGrads.push_back(MulOp::create(b, getLoc(), *dy, getLhs()));
  return success();
}

void MulOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.append({getLhs(), getRhs()});
}

//===----------------------------------------------------------------------===//
// Feature slices
//===----------------------------------------------------------------------===//

LogicalResult FeatureSliceOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  FailureOr<Value> dy = required(*this, resultGrads);
  if (failed(dy))
    return failure();
  operandGrads.push_back(FeatureSliceGradOp::create(
      b, getLoc(), getX().getType(), *dy, getOffsetAttr(),
      b.getI64IntegerAttr(getX().getType().getShape().back())));
  return success();
}

void FeatureSliceOp::getSavedForBackward(SmallVectorImpl<Value> &) {}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

LogicalResult CrossEntropyOp::buildVJP(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (llvm::any_of(resultGrads, [](Value v) { return v; }))
    return emitError("autodiff: the loss is a root of the backward; nothing "
                     "may be computed from it");
  operandGrads.push_back(CrossEntropyGradOp::create(
      b, getLoc(), getLogits().getType(), getLogits(), getIds(), getMask(),
      getLse(), getVocabParallelAttr(), getVocabStartsAttr(),
      getVocabSizesAttr()));
  operandGrads.append({Value(), Value()});
  return success();
}

void CrossEntropyOp::getSavedForBackward(SmallVectorImpl<Value> &saved) {
  saved.append({getLogits(), getLse()});
}
