//===- TPRuntimeCalls.cpp - the runtime function of each op ---------------===//
//
// RuntimeCallOpInterface of every tp op and, as external models, of the
// shard collectives a partitioned program holds: which tprt function
// computes the op and in which order it takes operands and attributes.
// The signatures are the runtime's call table's (RuntimeCalls.h);
// tp-to-emitc asks each op.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/TP/RuntimeCalls.h"
#include "tpopt/Dialect/TP/TPOps.h"

#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/DialectRegistry.h"

using namespace mlir;
using namespace mlir::tp;

//===----------------------------------------------------------------------===//
// Parameterized blocks
//===----------------------------------------------------------------------===//

static constexpr RuntimeSignature kEmbedding[] = {
    calls::embedding, calls::embedding_vocab_parallel,
    calls::param_runs_embedding};

ArrayRef<RuntimeSignature> EmbeddingOp::getRuntimeSignatures() {
  return kEmbedding;
}

LogicalResult EmbeddingOp::buildRuntimeCall(RuntimeCall &call) {
  // From the runs (ZeRO stage 3): the table is not an operand.
  if (std::optional<int64_t> runs = getRunsBucket()) {
    call.callee(kEmbedding[2])
        .tensor(getIds())
        .i64(*runs)
        .flag(getVocabParallel())
        .shape(getVocabStarts().value_or(ArrayRef<int64_t>()))
        .shape(getVocabSizes().value_or(ArrayRef<int64_t>()))
        .i64(*getBlockRows());
    return success();
  }
  call.callee(kEmbedding[getVocabParallel() ? 1 : 0])
      .tensor(getIds())
      .tensor(getTable());
  if (getVocabParallel())
    call.shape(getVocabStarts().value_or(ArrayRef<int64_t>()))
        .shape(getVocabSizes().value_or(ArrayRef<int64_t>()));
  return success();
}

// The linear family's runtime form: the linear and mm forms are one
// flattened product; bmm multiplies each [seq, in] slice.
static StringRef runtimeForm(std::optional<LinearForm> form) {
  return form == LinearForm::Bmm ? "tprt::LinearForm::Bmm"
                                 : "tprt::LinearForm::Flat";
}

// Without a bias, then with it (the product's epilogue).
static constexpr RuntimeSignature kLinear[] = {calls::linear,
                                               calls::linear_epilogue};

ArrayRef<RuntimeSignature> LinearOp::getRuntimeSignatures() { return kLinear; }

LogicalResult LinearOp::buildRuntimeCall(RuntimeCall &call) {
  Value bias = getBias();
  call.callee(kLinear[bias ? 1 : 0]).tensor(getX()).tensor(getWeight());
  if (bias)
    call.tensor(bias);
  call.enumerator(runtimeForm(getForm()));
  if (bias)
    call.enumerator("tprt::LinearEpilogue::Bias");
  return success();
}

// The adds (add, add_once), whose consuming form takes the residual: the
// product may be added into its storage; then silu_mul.
static constexpr RuntimeSignature kLinearEpilogue[] = {
    calls::withConsuming(calls::linear_add, calls::linear_add_consuming),
    calls::linear_epilogue};

ArrayRef<RuntimeSignature> LinearEpilogueOp::getRuntimeSignatures() {
  return kLinearEpilogue;
}

LogicalResult LinearEpilogueOp::buildRuntimeCall(RuntimeCall &call) {
  bool siluMul = getEpilogue() == Epilogue::SiluMul;
  call.callee(kLinearEpilogue[siluMul ? 1 : 0])
      .tensor(getX())
      .tensor(getWeight())
      .tensor(getOther())
      .enumerator(runtimeForm(getForm()));
  if (siluMul)
    call.enumerator("tprt::LinearEpilogue::SiluMul");
  else
    call.flag(getEpilogue() == Epilogue::AddOnce);
  return success();
}

static constexpr RuntimeSignature kLinearSwiglu[] = {calls::linear_swiglu};

ArrayRef<RuntimeSignature> LinearSwigluOp::getRuntimeSignatures() {
  return kLinearSwiglu;
}

LogicalResult LinearSwigluOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kLinearSwiglu[0])
      .tensor(getX())
      .tensor(getGate())
      .tensor(getUp())
      .enumerator(runtimeForm(getForm()));
  return success();
}

// Overloads by the number of weights.
static constexpr RuntimeSignature kLinearSiblings[] = {calls::linear_siblings2,
                                                       calls::linear_siblings3};

ArrayRef<RuntimeSignature> LinearSiblingsOp::getRuntimeSignatures() {
  return kLinearSiblings;
}

LogicalResult LinearSiblingsOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kLinearSiblings[getWeights().size() - 2]).tensor(getX());
  for (Value weight : getWeights())
    call.tensor(weight);
  call.enumerator(runtimeForm(getForm()));
  return success();
}

static constexpr RuntimeSignature kBiasAdd[] = {calls::bias_add};

ArrayRef<RuntimeSignature> BiasAddOp::getRuntimeSignatures() {
  return kBiasAdd;
}

LogicalResult BiasAddOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kBiasAdd[0]).tensor(getX()).tensor(getBias());
  return success();
}

static constexpr RuntimeSignature kRmsNorm[] = {calls::rms_norm};

ArrayRef<RuntimeSignature> RmsNormOp::getRuntimeSignatures() {
  return kRmsNorm;
}

LogicalResult RmsNormOp::buildRuntimeCall(RuntimeCall &call) {
  IntegerAttr group = getGroupSizeAttr();
  call.callee(kRmsNorm[0])
      .tensor(getX())
      .tensor(getWeight())
      .f64(getEpsilon().convertToDouble())
      .f64(getWeightOffset().convertToDouble())
      .i64(group ? group.getInt() : 0);
  return success();
}

static constexpr RuntimeSignature kAddRmsNorm[] = {calls::add_rms_norm};

ArrayRef<RuntimeSignature> AddRmsNormOp::getRuntimeSignatures() {
  return kAddRmsNorm;
}

LogicalResult AddRmsNormOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAddRmsNorm[0])
      .tensor(getLhs())
      .tensor(getRhs())
      .tensor(getWeight())
      .f64(getEpsilon().convertToDouble())
      .f64(getWeightOffset().convertToDouble());
  return success();
}

static constexpr RuntimeSignature kRotary[] = {calls::rotary};

ArrayRef<RuntimeSignature> RotaryOp::getRuntimeSignatures() { return kRotary; }

LogicalResult RotaryOp::buildRuntimeCall(RuntimeCall &call) {
  IntegerAttr rotaryDim = getRotaryDimAttr();
  call.callee(kRotary[0])
      .tensor(getX())
      .i64(getHeadDim())
      .i64(rotaryDim ? rotaryDim.getInt() : 0)
      .f64(getTheta().convertToDouble())
      .flag(getInterleaved());
  // tprt::RopeType: 0 default, 1 linear, 2 llama3, 3 yarn, 4 dynamic,
  // 5 longrope.
  std::optional<StringRef> type = getRopeType();
  auto value = [](std::optional<APFloat> v, double fallback) {
    return v ? v->convertToDouble() : fallback;
  };
  call.i64(!type                ? 0
           : *type == "linear"  ? 1
           : *type == "llama3"  ? 2
           : *type == "yarn"    ? 3
           : *type == "dynamic" ? 4
                                : 5)
      .f64(value(getFactor(), 1.0))
      .f64(value(getLowFreqFactor(), 1.0))
      .f64(value(getHighFreqFactor(), 4.0))
      .i64(getOriginalMaxPositionEmbeddings().value_or(8192))
      .f64(value(getBetaFast(), 32.0))
      .f64(value(getBetaSlow(), 1.0))
      .flag(getTruncate().value_or(true))
      .f64(value(getAttentionFactor(), 1.0))
      .flag(getTranspose());
  auto factors = [](DenseF64ArrayAttr attr) {
    return attr ? attr.asArrayRef() : ArrayRef<double>();
  };
  call.reals(factors(getShortFactorAttr())).reals(factors(getLongFactorAttr()));
  return success();
}

static constexpr RuntimeSignature kAttention[] = {calls::attention,
                                                  calls::attention_lse};

ArrayRef<RuntimeSignature> AttentionOp::getRuntimeSignatures() {
  return kAttention;
}

/// The attributes tp.attention and its backward pass after their tensors.
template <typename AttentionLikeOp>
static void addAttentionAttrs(RuntimeCall &call, AttentionLikeOp op) {
  IntegerAttr window = op.getSlidingWindowAttr();
  FloatAttr softcap = op.getSoftcapAttr();
  call.i64(op.getNumHeads())
      .i64(op.getNumKvHeads())
      .i64(op.getHeadDim())
      .f64(op.getScale().convertToDouble())
      .flag(op.getCausal())
      .i64(window ? window.getInt() : 0)
      .f64(softcap ? softcap.getValueAsDouble() : 0.0);
}

LogicalResult AttentionOp::buildRuntimeCall(RuntimeCall &call) {
  // With its log-sum-exp: attention_lse's {out, lse}.
  call.callee(kAttention[getLse() ? 1 : 0])
      .tensor(getQ())
      .tensor(getK())
      .tensor(getV())
      .tensor(getKeyMask());
  addAttentionAttrs(call, *this);
  return success();
}

/// The operands tp.mamba2_mixer and its backward pass first: the input,
/// the parameters, the mask.
template <typename Mamba2LikeOp>
static void addMamba2Operands(RuntimeCall &call, Mamba2LikeOp op) {
  call.tensor(op.getX())
      .tensor(op.getInProjWeight())
      .tensor(op.getConvWeight())
      .tensor(op.getConvBias())
      .tensor(op.getDtBias())
      .tensor(op.getALog())
      .tensor(op.getD())
      .tensor(op.getNormWeight())
      .tensor(op.getOutProjWeight())
      .tensor(op.getKeyMask());
}

/// The attributes tp.mamba2_mixer and its backward pass after their
/// tensors.
template <typename Mamba2LikeOp>
static void addMamba2Attrs(RuntimeCall &call, Mamba2LikeOp op) {
  call.i64(op.getNumHeads())
      .i64(op.getHeadDim())
      .i64(op.getNGroups())
      .i64(op.getStateSize())
      .i64(op.getConvKernel())
      .f64(op.getNormEps().convertToDouble())
      .f64(op.getDtMin().convertToDouble())
      .flag(op.getFoldedA());
}

static constexpr RuntimeSignature kMamba2[] = {calls::mamba2_mixer};

ArrayRef<RuntimeSignature> Mamba2MixerOp::getRuntimeSignatures() {
  return kMamba2;
}

LogicalResult Mamba2MixerOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kMamba2[0]);
  addMamba2Operands(call, *this);
  addMamba2Attrs(call, *this);
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

static constexpr RuntimeSignature kSilu[] = {calls::silu};

ArrayRef<RuntimeSignature> SiluOp::getRuntimeSignatures() { return kSilu; }

LogicalResult SiluOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kSilu[0]).tensor(getX());
  return success();
}

static constexpr RuntimeSignature kGelu[] = {calls::gelu};

ArrayRef<RuntimeSignature> GeluOp::getRuntimeSignatures() { return kGelu; }

LogicalResult GeluOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kGelu[0]).tensor(getX()).flag(getApproximate() ==
                                            GeluApproximation::Tanh);
  return success();
}

static constexpr RuntimeSignature kReluSquared[] = {calls::relu_squared};

ArrayRef<RuntimeSignature> ReluSquaredOp::getRuntimeSignatures() {
  return kReluSquared;
}

LogicalResult ReluSquaredOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kReluSquared[0]).tensor(getX());
  return success();
}

static constexpr RuntimeSignature kAdd[] = {calls::add};

ArrayRef<RuntimeSignature> AddOp::getRuntimeSignatures() { return kAdd; }

LogicalResult AddOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAdd[0]).tensor(getLhs()).tensor(getRhs());
  return success();
}

static constexpr RuntimeSignature kMul[] = {calls::mul};

ArrayRef<RuntimeSignature> MulOp::getRuntimeSignatures() { return kMul; }

LogicalResult MulOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kMul[0]).tensor(getLhs()).tensor(getRhs());
  return success();
}

static constexpr RuntimeSignature kSoftcap[] = {calls::softcap};

ArrayRef<RuntimeSignature> SoftcapOp::getRuntimeSignatures() {
  return kSoftcap;
}

LogicalResult SoftcapOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kSoftcap[0]).tensor(getX()).f64(getCap().convertToDouble());
  return success();
}

static constexpr RuntimeSignature kFeatureSlice[] = {calls::feature_slice};

ArrayRef<RuntimeSignature> FeatureSliceOp::getRuntimeSignatures() {
  return kFeatureSlice;
}

LogicalResult FeatureSliceOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kFeatureSlice[0]).tensor(getX()).i64(getOffset()).i64(getSize());
  return success();
}

static constexpr RuntimeSignature kFeatureSliceGrad[] = {
    calls::feature_slice_grad};

ArrayRef<RuntimeSignature> FeatureSliceGradOp::getRuntimeSignatures() {
  return kFeatureSliceGrad;
}

LogicalResult FeatureSliceGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kFeatureSliceGrad[0])
      .tensor(getDy())
      .i64(getOffset())
      .i64(getWidth());
  return success();
}

static constexpr RuntimeSignature kScale[] = {calls::scale};

ArrayRef<RuntimeSignature> ScaleOp::getRuntimeSignatures() { return kScale; }

LogicalResult ScaleOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kScale[0]).tensor(getX()).f64(getFactor().convertToDouble());
  return success();
}

//===----------------------------------------------------------------------===//
// Training step
//===----------------------------------------------------------------------===//

/// The vocabulary ranges of an uneven split (empty: an even one).
template <typename VocabOp>
static RuntimeCall &vocabRanges(RuntimeCall &call, VocabOp op) {
  return call.shape(op.getVocabStarts().value_or(ArrayRef<int64_t>()))
      .shape(op.getVocabSizes().value_or(ArrayRef<int64_t>()));
}

static constexpr RuntimeSignature kCrossEntropy[] = {
    calls::cross_entropy, calls::cross_entropy_vocab_parallel};

ArrayRef<RuntimeSignature> CrossEntropyOp::getRuntimeSignatures() {
  return kCrossEntropy;
}

LogicalResult CrossEntropyOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kCrossEntropy[getVocabParallel() ? 1 : 0])
      .tensor(getLogits())
      .tensor(getIds())
      .tensor(getMask());
  if (getVocabParallel())
    vocabRanges(call, *this);
  return success();
}

static constexpr RuntimeSignature kLinearCrossEntropy[] = {
    calls::linear_cross_entropy, calls::linear_cross_entropy_vocab_parallel};

ArrayRef<RuntimeSignature> LinearCrossEntropyOp::getRuntimeSignatures() {
  return kLinearCrossEntropy;
}

LogicalResult LinearCrossEntropyOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kLinearCrossEntropy[getVocabParallel() ? 1 : 0])
      .tensor(getX())
      .tensor(getWeight())
      .tensor(getIds())
      .tensor(getMask());
  if (getVocabParallel())
    vocabRanges(call, *this);
  return success();
}

static constexpr RuntimeSignature kCrossEntropyGrad[] = {
    calls::cross_entropy_grad};

ArrayRef<RuntimeSignature> CrossEntropyGradOp::getRuntimeSignatures() {
  return kCrossEntropyGrad;
}

LogicalResult CrossEntropyGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kCrossEntropyGrad[0])
      .tensor(getLogits())
      .tensor(getIds())
      .tensor(getMask())
      .tensor(getLse())
      .flag(getVocabParallel());
  vocabRanges(call, *this);
  return success();
}

static constexpr RuntimeSignature kLinearGradInput[] = {
    calls::linear_grad_input};

ArrayRef<RuntimeSignature> LinearGradInputOp::getRuntimeSignatures() {
  return kLinearGradInput;
}

LogicalResult LinearGradInputOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kLinearGradInput[0]).tensor(getDy()).tensor(getWeight());
  return success();
}

static constexpr RuntimeSignature kLinearGradWeight[] = {
    calls::linear_grad_weight};

ArrayRef<RuntimeSignature> LinearGradWeightOp::getRuntimeSignatures() {
  return kLinearGradWeight;
}

LogicalResult LinearGradWeightOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kLinearGradWeight[0]).tensor(getDy()).tensor(getX());
  return success();
}

static constexpr RuntimeSignature kSumLeading[] = {calls::sum_leading};

ArrayRef<RuntimeSignature> SumLeadingOp::getRuntimeSignatures() {
  return kSumLeading;
}

LogicalResult SumLeadingOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kSumLeading[0]).tensor(getX());
  return success();
}

static constexpr RuntimeSignature kEmbeddingGrad[] = {calls::embedding_grad};

ArrayRef<RuntimeSignature> EmbeddingGradOp::getRuntimeSignatures() {
  return kEmbeddingGrad;
}

LogicalResult EmbeddingGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kEmbeddingGrad[0])
      .tensor(getIds())
      .tensor(getDy())
      .tensor(getTable())
      .flag(getVocabParallel())
      .i64(getPaddingIdx().value_or(-1));
  vocabRanges(call, *this);
  return success();
}

static constexpr RuntimeSignature kRmsNormGrad[] = {calls::rms_norm_grad};

ArrayRef<RuntimeSignature> RmsNormGradOp::getRuntimeSignatures() {
  return kRmsNormGrad;
}

LogicalResult RmsNormGradOp::buildRuntimeCall(RuntimeCall &call) {
  IntegerAttr group = getGroupSizeAttr();
  call.callee(kRmsNormGrad[0])
      .tensor(getX())
      .tensor(getWeight())
      .tensor(getDy())
      .f64(getEpsilon().convertToDouble())
      .f64(getWeightOffset().convertToDouble())
      .i64(group ? group.getInt() : 0);
  return success();
}

static constexpr RuntimeSignature kAttentionGrad[] = {calls::attention_grad};

ArrayRef<RuntimeSignature> AttentionGradOp::getRuntimeSignatures() {
  return kAttentionGrad;
}

LogicalResult AttentionGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAttentionGrad[0])
      .tensor(getQ())
      .tensor(getK())
      .tensor(getV())
      .tensor(getDout())
      .tensor(getKeyMask());
  addAttentionAttrs(call, *this);
  call.tensor(getOut()).tensor(getLse());
  return success();
}

static constexpr RuntimeSignature kMamba2Grad[] = {calls::mamba2_mixer_grad};

ArrayRef<RuntimeSignature> Mamba2MixerGradOp::getRuntimeSignatures() {
  return kMamba2Grad;
}

LogicalResult Mamba2MixerGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kMamba2Grad[0]);
  addMamba2Operands(call, *this);
  call.tensor(getDout());
  addMamba2Attrs(call, *this);
  return success();
}

static constexpr RuntimeSignature kSiluGrad[] = {calls::silu_grad};

ArrayRef<RuntimeSignature> SiluGradOp::getRuntimeSignatures() {
  return kSiluGrad;
}

LogicalResult SiluGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kSiluGrad[0]).tensor(getX()).tensor(getDy());
  return success();
}

static constexpr RuntimeSignature kSiluMulGrad[] = {calls::silu_mul_grad};

ArrayRef<RuntimeSignature> SiluMulGradOp::getRuntimeSignatures() {
  return kSiluMulGrad;
}

LogicalResult SiluMulGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kSiluMulGrad[0])
      .tensor(getGate())
      .tensor(getUp())
      .tensor(getDy());
  return success();
}

static constexpr RuntimeSignature kReluSquaredGrad[] = {
    calls::relu_squared_grad};

ArrayRef<RuntimeSignature> ReluSquaredGradOp::getRuntimeSignatures() {
  return kReluSquaredGrad;
}

LogicalResult ReluSquaredGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kReluSquaredGrad[0]).tensor(getX()).tensor(getDy());
  return success();
}

static constexpr RuntimeSignature kGeluGrad[] = {calls::gelu_grad};

ArrayRef<RuntimeSignature> GeluGradOp::getRuntimeSignatures() {
  return kGeluGrad;
}

LogicalResult GeluGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kGeluGrad[0])
      .tensor(getX())
      .tensor(getDy())
      .flag(getApproximate() == GeluApproximation::Tanh);
  return success();
}

static constexpr RuntimeSignature kSoftcapGrad[] = {calls::softcap_grad};

ArrayRef<RuntimeSignature> SoftcapGradOp::getRuntimeSignatures() {
  return kSoftcapGrad;
}

LogicalResult SoftcapGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kSoftcapGrad[0])
      .tensor(getX())
      .tensor(getDy())
      .f64(getCap().convertToDouble());
  return success();
}

static constexpr RuntimeSignature kReplicaSum[] = {calls::replica_sum};

ArrayRef<RuntimeSignature> ReplicaSumOp::getRuntimeSignatures() {
  return kReplicaSum;
}

LogicalResult ReplicaSumOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kReplicaSum[0]).tensor(getX()).shape(getBlocks());
  return success();
}

static constexpr RuntimeSignature kAccumulateGrad[] = {calls::accumulate_grad};

ArrayRef<RuntimeSignature> AccumulateGradOp::getRuntimeSignatures() {
  return kAccumulateGrad;
}

LogicalResult AccumulateGradOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAccumulateGrad[0])
      .tensor(getGrad())
      .tensor(getParam())
      .str(getFqn())
      .i64(getSplitDim())
      .flag(getOwned());
  return success();
}

static constexpr RuntimeSignature kAccumulateLinearGradWeight[] = {
    calls::accumulate_linear_grad_weight};

ArrayRef<RuntimeSignature>
AccumulateLinearGradWeightOp::getRuntimeSignatures() {
  return kAccumulateLinearGradWeight;
}

LogicalResult
AccumulateLinearGradWeightOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAccumulateLinearGradWeight[0])
      .tensor(getDy())
      .tensor(getX())
      .tensor(getParam())
      .str(getFqn())
      .i64(getSplitDim())
      .flag(getOwned());
  return success();
}

// With runs_bucket (ZeRO stage 3) the parameter is not an operand: the
// runtime reads the bucket's runs.
static constexpr RuntimeSignature kAccumulateLinearCrossEntropy[] = {
    calls::accumulate_linear_cross_entropy,
    calls::param_runs_linear_cross_entropy};

ArrayRef<RuntimeSignature>
AccumulateLinearCrossEntropyOp::getRuntimeSignatures() {
  return kAccumulateLinearCrossEntropy;
}

LogicalResult
AccumulateLinearCrossEntropyOp::buildRuntimeCall(RuntimeCall &call) {
  std::optional<int64_t> runs = getRunsBucket();
  call.callee(kAccumulateLinearCrossEntropy[runs ? 1 : 0]).tensor(getX());
  if (!runs)
    call.tensor(getParam());
  call.tensor(getIds()).tensor(getMask());
  if (runs)
    call.i64(*runs);
  call.str(getFqn())
      .i64(getSplitDim())
      .flag(getOwned())
      .flag(getVocabParallel());
  vocabRanges(call, *this);
  if (runs)
    call.i64(*getBlockRows());
  return success();
}

static constexpr RuntimeSignature kAccumulateEmbeddingGrad[] = {
    calls::accumulate_embedding_grad, calls::param_runs_embedding_grad};

ArrayRef<RuntimeSignature> AccumulateEmbeddingGradOp::getRuntimeSignatures() {
  return kAccumulateEmbeddingGrad;
}

LogicalResult AccumulateEmbeddingGradOp::buildRuntimeCall(RuntimeCall &call) {
  std::optional<int64_t> runs = getRunsBucket();
  call.callee(kAccumulateEmbeddingGrad[runs ? 1 : 0])
      .tensor(getIds())
      .tensor(getDy());
  if (runs)
    call.i64(*runs);
  else
    call.tensor(getParam());
  call.str(getFqn())
      .i64(getSplitDim())
      .flag(getOwned())
      .flag(getVocabParallel())
      .i64(getPaddingIdx().value_or(-1));
  vocabRanges(call, *this);
  if (runs)
    call.i64(*getBlockRows());
  return success();
}

//===----------------------------------------------------------------------===//
// Program start and optimizer boundary
//===----------------------------------------------------------------------===//

static constexpr RuntimeSignature kBroadcastReplica[] = {
    calls::broadcast_replica};

ArrayRef<RuntimeSignature> BroadcastReplicaOp::getRuntimeSignatures() {
  return kBroadcastReplica;
}

LogicalResult BroadcastReplicaOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kBroadcastReplica[0])
      .tensor(getParam())
      .str(getFqn())
      .str(getGroup());
  return success();
}

static constexpr RuntimeSignature kOptimizerBoundary[] = {
    calls::optimizer_boundary};

ArrayRef<RuntimeSignature> OptimizerBoundaryOp::getRuntimeSignatures() {
  return kOptimizerBoundary;
}

LogicalResult OptimizerBoundaryOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kOptimizerBoundary[0]);
  return success();
}

static constexpr RuntimeSignature kGradBucketAllReduce[] = {
    calls::grad_bucket_all_reduce};

ArrayRef<RuntimeSignature> GradBucketAllReduceOp::getRuntimeSignatures() {
  return kGradBucketAllReduce;
}

/// A bucket's parameter type as the runtime's DType (empty: none).
static StringRef bucketDType(Type type) {
  return type.isF32()    ? "tprt::DType::F32"
         : type.isF16()  ? "tprt::DType::F16"
         : type.isBF16() ? "tprt::DType::BF16"
                         : "";
}

/// A bucket's FQNs, a table the runtime reads by name.
static SmallVector<std::string> bucketFqns(ArrayAttr fqns) {
  SmallVector<std::string> names;
  for (Attribute fqn : fqns)
    names.push_back(cast<StringAttr>(fqn).getValue().str());
  return names;
}

LogicalResult GradBucketAllReduceOp::buildRuntimeCall(RuntimeCall &call) {
  StringRef dtype = bucketDType(getDtype());
  if (dtype.empty())
    return emitOpError("no runtime dtype for ") << getDtype();
  call.callee(kGradBucketAllReduce[0])
      .i64(getBucket())
      .flag(getReduction() == GradReduction::Mean)
      .str(dtype)
      .strings(bucketFqns(getFqns()))
      .i64(getBytes())
      .str(getGroup());
  return success();
}

static constexpr RuntimeSignature kGradBucketReduceScatter[] = {
    calls::grad_bucket_reduce_scatter};

ArrayRef<RuntimeSignature> GradBucketReduceScatterOp::getRuntimeSignatures() {
  return kGradBucketReduceScatter;
}

LogicalResult GradBucketReduceScatterOp::buildRuntimeCall(RuntimeCall &call) {
  StringRef dtype = bucketDType(getDtype());
  if (dtype.empty())
    return emitOpError("no runtime dtype for ") << getDtype();
  call.callee(kGradBucketReduceScatter[0])
      .i64(getBucket())
      .str(dtype)
      .strings(bucketFqns(getFqns()))
      .i64(getBytes())
      .i64(getPaddedBytes())
      .flag(getMicroBatch())
      .flag(getStreamed());
  return success();
}

static constexpr RuntimeSignature kParamBucketAllGather[] = {
    calls::param_bucket_all_gather};

ArrayRef<RuntimeSignature> ParamBucketAllGatherOp::getRuntimeSignatures() {
  return kParamBucketAllGather;
}

/// The call of an op on a bucket of parameters: its number, dtype, FQNs and
/// padded bytes in that dtype.
template <typename ParamBucketOp>
static LogicalResult buildParamBucketCall(ParamBucketOp op, RuntimeCall &call,
                                          const RuntimeSignature &signature) {
  StringRef dtype = bucketDType(op.getDtype());
  if (dtype.empty())
    return op.emitOpError("no runtime dtype for ") << op.getDtype();
  call.callee(signature)
      .i64(op.getBucket())
      .str(dtype)
      .strings(bucketFqns(op.getFqns()))
      .i64(op.getBytes());
  return success();
}

LogicalResult ParamBucketAllGatherOp::buildRuntimeCall(RuntimeCall &call) {
  return buildParamBucketCall(*this, call, kParamBucketAllGather[0]);
}

// One result per parameter of the bucket: views of the gathered buffer.
static constexpr RuntimeSignature kParamBucketGather[] = {
    calls::param_bucket_gather};

ArrayRef<RuntimeSignature> ParamBucketGatherOp::getRuntimeSignatures() {
  return kParamBucketGather;
}

LogicalResult ParamBucketGatherOp::buildRuntimeCall(RuntimeCall &call) {
  return buildParamBucketCall(*this, call, kParamBucketGather[0]);
}

static constexpr RuntimeSignature kParamBucketShard[] = {
    calls::param_bucket_shard};

ArrayRef<RuntimeSignature> ParamBucketShardOp::getRuntimeSignatures() {
  return kParamBucketShard;
}

LogicalResult ParamBucketShardOp::buildRuntimeCall(RuntimeCall &call) {
  return buildParamBucketCall(*this, call, kParamBucketShard[0]);
}

static constexpr RuntimeSignature kNormalizeGrads[] = {calls::normalize_grads};

ArrayRef<RuntimeSignature> NormalizeGradsOp::getRuntimeSignatures() {
  return kNormalizeGrads;
}

LogicalResult NormalizeGradsOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kNormalizeGrads[0]);
  return success();
}

static constexpr RuntimeSignature kGradNorm[] = {calls::grad_norm};

ArrayRef<RuntimeSignature> GradNormOp::getRuntimeSignatures() {
  return kGradNorm;
}

LogicalResult GradNormOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kGradNorm[0]).flag(getDpSharded());
  return success();
}

static constexpr RuntimeSignature kClipGrads[] = {calls::clip_grads};

ArrayRef<RuntimeSignature> ClipGradsOp::getRuntimeSignatures() {
  return kClipGrads;
}

LogicalResult ClipGradsOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kClipGrads[0]).tensor(getNorm());
  return success();
}

static constexpr RuntimeSignature kOptimizerUpdate[] = {
    calls::optimizer_update};

ArrayRef<RuntimeSignature> OptimizerUpdateOp::getRuntimeSignatures() {
  return kOptimizerUpdate;
}

LogicalResult OptimizerUpdateOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kOptimizerUpdate[0])
      .str(getOptimizer())
      .flag(getDpSharded())
      .flag(getMasterWeights());
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives (external models on the shard dialect)
//===----------------------------------------------------------------------===//

namespace {

/// Sum reductions only: the runtime has no other.
LogicalResult checkSum(Operation *op, shard::ReductionKind kind) {
  if (kind == shard::ReductionKind::Sum)
    return success();
  return op->emitError("only sum reductions have a runtime call");
}

constexpr RuntimeSignature kAllReduceConsuming =
    calls::all_reduce_sum_consuming;
constexpr RuntimeSignature kAllReduce[] = {
    calls::withConsuming(calls::all_reduce_sum, kAllReduceConsuming)};
constexpr RuntimeSignature kAllGather[] = {calls::all_gather};
constexpr RuntimeSignature kReduceScatter[] = {calls::reduce_scatter_sum};

struct AllReduceRuntimeCall
    : public RuntimeCallOpInterface::ExternalModel<AllReduceRuntimeCall,
                                                   shard::AllReduceOp> {
  static ArrayRef<RuntimeSignature> getRuntimeSignatures() {
    return kAllReduce;
  }
  LogicalResult buildRuntimeCall(Operation *op, RuntimeCall &call) const {
    auto reduce = cast<shard::AllReduceOp>(op);
    call.callee(kAllReduce[0]).tensor(reduce.getInput());
    return checkSum(op, reduce.getReduction());
  }
};

} // namespace

static constexpr RuntimeSignature kAllGatherUneven[] = {
    calls::all_gather_uneven};

ArrayRef<RuntimeSignature> AllGatherUnevenOp::getRuntimeSignatures() {
  return kAllGatherUneven;
}

LogicalResult AllGatherUnevenOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAllGatherUneven[0])
      .tensor(getInput())
      .i64(getGatherAxis())
      .shape(getSizes());
  return success();
}

static constexpr RuntimeSignature kReduceScatterUneven[] = {
    calls::reduce_scatter_sum_uneven};

ArrayRef<RuntimeSignature> ReduceScatterUnevenOp::getRuntimeSignatures() {
  return kReduceScatterUneven;
}

LogicalResult ReduceScatterUnevenOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kReduceScatterUneven[0])
      .tensor(getInput())
      .i64(getScatterAxis())
      .shape(getSizes());
  return success();
}

static constexpr RuntimeSignature kAllSliceUneven[] = {calls::all_slice_uneven};

ArrayRef<RuntimeSignature> AllSliceUnevenOp::getRuntimeSignatures() {
  return kAllSliceUneven;
}

LogicalResult AllSliceUnevenOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAllSliceUneven[0])
      .tensor(getInput())
      .i64(getSliceAxis())
      .shape(getStarts())
      .shape(getSizes());
  return success();
}

static constexpr RuntimeSignature kAllReduceStartConsuming =
    calls::all_reduce_sum_start_consuming;
static constexpr RuntimeSignature kAllReduceStart[] = {calls::withConsuming(
    calls::all_reduce_sum_start, kAllReduceStartConsuming)};

ArrayRef<RuntimeSignature> AllReduceStartOp::getRuntimeSignatures() {
  return kAllReduceStart;
}

LogicalResult AllReduceStartOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAllReduceStart[0]).tensor(getInput());
  return success();
}

// The start's result has one reader, the wait, which therefore always takes
// it (the consuming form).
static constexpr RuntimeSignature kAllReduceWaitConsuming =
    calls::all_reduce_sum_wait_consuming;
static constexpr RuntimeSignature kAllReduceWait[] = {
    calls::withConsuming(calls::all_reduce_sum_wait, kAllReduceWaitConsuming)};

ArrayRef<RuntimeSignature> AllReduceWaitOp::getRuntimeSignatures() {
  return kAllReduceWait;
}

LogicalResult AllReduceWaitOp::buildRuntimeCall(RuntimeCall &call) {
  call.callee(kAllReduceWait[0]).tensor(getPending());
  return success();
}

namespace {

struct AllGatherRuntimeCall
    : public RuntimeCallOpInterface::ExternalModel<AllGatherRuntimeCall,
                                                   shard::AllGatherOp> {
  static ArrayRef<RuntimeSignature> getRuntimeSignatures() {
    return kAllGather;
  }
  LogicalResult buildRuntimeCall(Operation *op, RuntimeCall &call) const {
    auto gather = cast<shard::AllGatherOp>(op);
    call.callee(kAllGather[0])
        .tensor(gather.getInput())
        .i64(gather.getGatherAxis().getSExtValue());
    return success();
  }
};

struct ReduceScatterRuntimeCall
    : public RuntimeCallOpInterface::ExternalModel<ReduceScatterRuntimeCall,
                                                   shard::ReduceScatterOp> {
  static ArrayRef<RuntimeSignature> getRuntimeSignatures() {
    return kReduceScatter;
  }
  LogicalResult buildRuntimeCall(Operation *op, RuntimeCall &call) const {
    auto scatter = cast<shard::ReduceScatterOp>(op);
    call.callee(kReduceScatter[0])
        .tensor(scatter.getInput())
        .i64(scatter.getScatterAxis().getSExtValue());
    return checkSum(op, scatter.getReduction());
  }
};

constexpr RuntimeSignature kAllSlice[] = {calls::all_slice};

struct AllSliceRuntimeCall
    : public RuntimeCallOpInterface::ExternalModel<AllSliceRuntimeCall,
                                                   shard::AllSliceOp> {
  static ArrayRef<RuntimeSignature> getRuntimeSignatures() { return kAllSlice; }
  LogicalResult buildRuntimeCall(Operation *op, RuntimeCall &call) const {
    auto slice = cast<shard::AllSliceOp>(op);
    call.callee(kAllSlice[0])
        .tensor(slice.getInput())
        .i64(slice.getSliceAxis().getSExtValue());
    return success();
  }
};

} // namespace

void mlir::tp::registerShardRuntimeCallModels(DialectRegistry &registry) {
  registry.addExtension(+[](MLIRContext *ctx, shard::ShardDialect *) {
    shard::AllReduceOp::attachInterface<AllReduceRuntimeCall>(*ctx);
    shard::AllGatherOp::attachInterface<AllGatherRuntimeCall>(*ctx);
    shard::ReduceScatterOp::attachInterface<ReduceScatterRuntimeCall>(*ctx);
    shard::AllSliceOp::attachInterface<AllSliceRuntimeCall>(*ctx);
  });
}
