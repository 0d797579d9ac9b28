//===- BuildTrainStep.cpp - forward, loss and backward of one step --------===//
//
// Reverse-mode autodiff on the global program: a copy of the forward gets
// the causal-LM loss, then each op, last to first, is asked for its VJP
// (AutodiffOpInterface) and the cotangents of a value read several times
// are summed. It runs before tp-partition, so the backward's collectives
// come from the same sharding rules as the forward's. The optimizer step is
// a function of its own: the runtime runs the training step once per
// micro-batch, the optimizer step once after them.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Dialect/ONNX/ONNXOps.h"
#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Dialect/TP/TPUtils.h"
#include "tpopt/Passes.h"
#include "tpopt/Plan/Architecture.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace mlir::tp {
#define GEN_PASS_DEF_TPBUILDTRAINSTEP
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

bool isLoRAFactor(StringRef fqn) {
  return fqn.ends_with(".lora_A.weight") || fqn.ends_with(".lora_B.weight");
}

/// The function argument that is graph input `name`, or null.
Value findInput(func::FuncOp func, StringRef name) {
  for (BlockArgument arg : func.getArguments())
    if (auto attr = func.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), onnx_ir::ONNXDialect::kNameAttrName))
      if (attr.getValue() == name)
        return arg;
  return Value();
}

struct TPBuildTrainStepPass
    : public tp::impl::TPBuildTrainStepBase<TPBuildTrainStepPass> {
  using Base::Base;

  /// The embedding's padding_idx, -1 when it has none.
  int64_t padTokenId = -1;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (optimizer != "adamw" && optimizer != "sgd") {
      module.emitError("tp-build-train-step: optimizer must be adamw or sgd, "
                       "got '")
          << optimizer << "'";
      return signalPassFailure();
    }
    if (masterWeights != "auto" && masterWeights != "f32" &&
        masterWeights != "none") {
      module.emitError("tp-build-train-step: master-weights must be auto, "
                       "f32 or none, got '")
          << masterWeights << "'";
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> forward = requireEntry<func::FuncOp>(
        module, kForwardEntry, "tp-build-train-step: no func.func @forward");
    if (failed(forward))
      return signalPassFailure();
    for (StringRef role : {kTrainStepEntry, kOptimizerStepEntry}) {
      FailureOr<FunctionOpInterface> existing = lookupEntry(module, role);
      if (failed(existing))
        return signalPassFailure();
      if (*existing) {
        existing->emitError("tp-build-train-step: the module already has a "
                            "training step");
        return signalPassFailure();
      }
    }
    if (failed(checkDifferentiable(*forward)))
      return signalPassFailure();
    // The padding token: the config's, else the architecture's default.
    FailureOr<ModelConfig> config = ModelConfig::read(module);
    if (failed(config))
      return signalPassFailure();
    const Architecture *arch = config->architecture
                                   ? lookupArchitecture(*config->architecture)
                                   : nullptr;
    // (NemotronH's modeling code gives its embedding no padding_idx.)
    padTokenId = arch && !arch->embeddingPaddingIdx ? -1
                 : config->padTokenId               ? *config->padTokenId
                 : arch                             ? arch->defaultPadTokenId
                                                    : -1;
    func::FuncOp step = cloneForward(*forward);
    if (failed(buildStep(step)))
      return signalPassFailure();
    buildOptimizerStep(step);
    if (failed(verify(module)))
      return signalPassFailure();
  }

  /// func.func @optimizer_step, after the training step: the boundary, the
  /// normalization by the label tokens, the norm, the clipping and the
  /// update. It returns the norm (before clipping) for the step line.
  void buildOptimizerStep(func::FuncOp step) {
    OpBuilder b(step);
    b.setInsertionPointAfter(step);
    Location loc = step.getLoc();
    auto scalar = RankedTensorType::get({}, b.getF32Type());
    auto func = func::FuncOp::create(b, loc, "optimizer_step",
                                     b.getFunctionType({}, {scalar}));
    func->setAttr(TPDialect::kEntryAttrName,
                  b.getStringAttr(kOptimizerStepEntry));
    b.setInsertionPointToStart(func.addEntryBlock());
    OptimizerBoundaryOp::create(b, loc);
    NormalizeGradsOp::create(b, loc);
    Value norm = GradNormOp::create(b, loc, scalar);
    ClipGradsOp::create(b, loc, norm);
    auto update = OptimizerUpdateOp::create(b, loc, optimizer);
    // auto: masters when a trainable parameter is narrower than f32.
    bool narrow = false;
    step.walk([&](AccumulateGradOp acc) {
      narrow |= !getElementTypeOrSelf(acc.getParam().getType()).isF32();
    });
    update.setMasterWeights(masterWeights == "f32" ||
                            (masterWeights == "auto" && narrow));
    func::ReturnOp::create(b, loc, norm);
  }

  /// Everything the backward must go through has a rule.
  LogicalResult checkDifferentiable(func::FuncOp func) {
    for (Operation &op : func.getBody().front()) {
      if (isa<AutodiffOpInterface, func::ReturnOp, shard::ShardingOp>(op))
        continue;
      if (isa<shard::ShardOp>(op))
        continue;
      return op.emitError("tp-build-train-step: ")
             << op.getName() << " has no backward yet";
    }
    for (BlockArgument arg : func.getArguments()) {
      auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   TPDialect::kFqnAttrName);
      auto type = cast<ShapedType>(arg.getType());
      if (fqn && !isa<FloatType>(type.getElementType()))
        return func.emitError()
               << "tp-build-train-step: parameter '" << fqn.getValue()
               << "' is " << type.getElementType()
               << "; only float parameters train";
    }
    return success();
  }

  func::FuncOp cloneForward(func::FuncOp forward) {
    OpBuilder builder(forward);
    builder.setInsertionPointAfter(forward);
    // Both entry points marked: lookupEntry then finds each by its role.
    forward->setAttr(TPDialect::kEntryAttrName,
                     builder.getStringAttr(kForwardEntry));
    auto step = cast<func::FuncOp>(builder.clone(*forward));
    step.setSymName("train_step");
    step->setAttr(TPDialect::kEntryAttrName,
                  builder.getStringAttr(kTrainStepEntry));
    return step;
  }

  /// The parameters that get a gradient: all, or the LoRA factors only.
  SmallVector<BlockArgument> trainable(func::FuncOp func) {
    SmallVector<BlockArgument> params, lora;
    for (BlockArgument arg : func.getArguments()) {
      auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   TPDialect::kFqnAttrName);
      if (!fqn)
        continue;
      params.push_back(arg);
      if (isLoRAFactor(fqn.getValue()))
        lora.push_back(arg);
    }
    return lora.empty() ? params : lora;
  }

  LogicalResult buildStep(func::FuncOp step) {
    Block &body = step.getBody().front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    Value ids = findInput(step, "input_ids");
    Value mask = findInput(step, "attention_mask");
    // An exporter drops an input the graph never reads: a model none of
    // whose layers reads the padding mask has no attention_mask.
    if (!ids || !mask)
      return step.emitError("tp-build-train-step: the forward has no ")
             << (ids ? "attention_mask" : "input_ids")
             << " input, which the loss reads (the labels are the ids, the "
                "mask leaves padding out); an exporter drops an input that "
                "no layer of the model reads";
    if (ret.getNumOperands() != 1)
      return step.emitError("tp-build-train-step: the forward must return the "
                            "logits alone, not ")
             << ret.getNumOperands() << " results";
    Value logits = ret.getOperand(0);
    auto logitsType = cast<RankedTensorType>(logits.getType());
    if (logitsType.getRank() != 3)
      return ret.emitError("tp-build-train-step: the logits must be [batch, "
                           "seq, vocab], got ")
             << logitsType;

    OpBuilder b(ret);
    Location loc = ret.getLoc();
    auto lseType = RankedTensorType::get(logitsType.getShape().drop_back(),
                                         b.getF32Type());
    auto loss = CrossEntropyOp::create(
        b, loc, RankedTensorType::get({}, b.getF32Type()), lseType, logits, ids,
        mask, /*vocab_parallel=*/UnitAttr(), /*vocab_starts=*/nullptr,
        /*vocab_sizes=*/nullptr);

    // Which values depend on a trainable parameter: only their ops need a
    // backward.
    SmallVector<BlockArgument> params = trainable(step);
    llvm::DenseSet<Value> needsGrad(params.begin(), params.end());
    SmallVector<Operation *> forwardOps;
    for (Operation &op : body.without_terminator()) {
      forwardOps.push_back(&op);
      if (llvm::any_of(op.getOperands(),
                       [&](Value v) { return needsGrad.contains(v); }))
        needsGrad.insert(op.result_begin(), op.result_end());
    }

    llvm::DenseMap<Value, Value> cotangents;
    SmallVector<Value> saved;
    auto addCotangent = [&](Value v, Value grad) {
      auto [it, inserted] = cotangents.try_emplace(v, grad);
      if (!inserted)
        it->second = AddOp::create(b, grad.getLoc(), it->second, grad);
    };
    // An op's backward is in its decoder layer.
    DecoderLayerListener backwardLayer;
    b.setListener(&backwardLayer);
    for (Operation *op : llvm::reverse(forwardOps)) {
      if (!llvm::any_of(op->getOperands(),
                        [&](Value v) { return needsGrad.contains(v); }))
        continue;
      backwardLayer.layer = decoderLayerOf(op);
      SmallVector<Value> resultGrads;
      for (Value r : op->getResults())
        resultGrads.push_back(cotangents.lookup(r));
      bool isRoot = op == loss.getOperation();
      if (!isRoot && llvm::all_of(resultGrads, [](Value v) { return !v; }))
        continue;
      if (auto annotated = dyn_cast<shard::ShardOp>(op)) {
        // A parameter's placement: its gradient is the annotated value's.
        // An activation's layout: tp-partition holds the cotangent as the
        // source is held (the annotation's transpose).
        Value grad = resultGrads[0];
        Value src = annotated.getSrc();
        if (!isa<BlockArgument>(src))
          grad = HoldLikeOp::create(b, annotated.getLoc(), grad, src);
        addCotangent(src, grad);
        continue;
      }
      auto differentiable = dyn_cast<AutodiffOpInterface>(op);
      if (!differentiable)
        return op->emitError("tp-build-train-step: no backward for ")
               << op->getName();
      SmallVector<Value> operandGrads;
      if (failed(differentiable.buildVJP(b, resultGrads, operandGrads)))
        return failure();
      differentiable.getSavedForBackward(saved);
      if (operandGrads.size() != op->getNumOperands())
        return op->emitError("tp-build-train-step: the VJP gave ")
               << operandGrads.size() << " cotangents for "
               << op->getNumOperands() << " operands";
      for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads))
        if (grad && needsGrad.contains(operand))
          addCotangent(operand, grad);
    }

    b.setListener(nullptr);
    // nn.Embedding(padding_idx=pad_token_id) never trains that row.
    if (padTokenId >= 0)
      step.walk([&](EmbeddingGradOp grad) {
        grad.setPaddingIdxAttr(b.getI64IntegerAttr(padTokenId));
      });
    // Each gradient is accumulated as soon as it is complete, not at the
    // end of the step: the micro-batch's weight gradients are then never
    // all held at once, and each is added while it is still in cache.
    for (BlockArgument param : params) {
      Value grad = cotangents.lookup(param);
      if (!grad)
        continue;
      OpBuilder::InsertionGuard afterGrad(b);
      b.setInsertionPointAfterValue(grad);
      auto accumulate = AccumulateGradOp::create(
          b, loc, grad, param,
          step.getArgAttrOfType<StringAttr>(param.getArgNumber(),
                                            TPDialect::kFqnAttrName),
          /*split_dim=*/-1, /*reduction=*/nullptr,
          /*derived_reduction=*/nullptr);
      if (Operation *def = grad.getDefiningOp())
        inheritDecoderLayer(def, accumulate);
    }
    func::ReturnOp::create(b, loc, loss.getLoss());
    ret.erase();
    step.setType(
        b.getFunctionType(step.getArgumentTypes(), {loss.getLoss().getType()}));
    eraseDeadCode(body);
    if (recompute) {
      recomputeLayers(body, forwardOps, loss.getOperation());
      // What the forward keeps: what the backward (clones included) reads.
      saved.clear();
      for (Operation *op = loss->getNextNode(); op; op = op->getNextNode())
        for (Value v : op->getOperands())
          if (Operation *def = v.getDefiningOp())
            if (def->getBlock() == &body &&
                (def == loss || def->isBeforeInBlock(loss)) &&
                !isa<shard::ShardingOp>(def))
              saved.push_back(v);
    }
    // What the forward keeps for the backward, marked where it is computed.
    for (Value v : saved)
      if (Operation *def = v.getDefiningOp())
        if (def->getBlock() == &body)
          def->setAttr(TPDialect::kSavedAttrName, b.getUnitAttr());
    return success();
  }

  /// The decoder layer of an op (tp.layer), or -1. A layout annotation
  /// is in the layer of what it annotates: a value's producer, or the ops
  /// reading an annotated parameter (its sharding, with its annotation).
  static int64_t layerOf(Operation *op) {
    if (auto sharding = dyn_cast<shard::ShardingOp>(op)) {
      auto users = sharding->getUsers();
      if (users.empty())
        return -1;
      op = *users.begin();
    }
    if (auto annotated = dyn_cast<shard::ShardOp>(op)) {
      Value src = annotated.getSrc();
      return (src.getDefiningOp() ? decoderLayerOf(src.getDefiningOp())
                                  : decoderLayerOfUsers(annotated.getResult()))
          .value_or(-1);
    }
    return decoderLayerOf(op).value_or(-1);
  }

  /// Per decoder layer: the forward ops whose results the backward reads
  /// are cloned (with the layer's ops they need) right before the first
  /// backward op that reads one, and the backward reads the clones. What
  /// leaves the layer (read by a forward op outside it: the residual
  /// stream into the next layer) is kept, not recomputed: it is where the
  /// recomputation starts from.
  void recomputeLayers(Block &body, ArrayRef<Operation *> forwardOps,
                       Operation *loss) {
    llvm::MapVector<int64_t, SmallVector<Operation *>> layers;
    for (Operation *op : forwardOps) {
      if (op->getBlock() != &body) // erased as dead code
        continue;
      // A parameter's placement is not a computation: it stays one.
      auto annotated = dyn_cast<shard::ShardOp>(op);
      if (annotated && isa<BlockArgument>(annotated.getSrc()))
        continue;
      if (int64_t layer = layerOf(op); layer >= 0)
        layers[layer].push_back(op);
    }
    auto inBackward = [&](Operation *op) {
      return loss->isBeforeInBlock(op) &&
             !op->hasAttr(TPDialect::kRecomputedAttrName);
    };
    OpBuilder b(body.getParentOp()->getContext());
    for (auto &[layer, ops] : layers) {
      llvm::SmallPtrSet<Operation *, 32> inLayer(ops.begin(), ops.end());
      auto isKept = [&](Operation *op) {
        return llvm::any_of(op->getUsers(), [&](Operation *user) {
          return user->isBeforeInBlock(loss) && !inLayer.contains(user);
        });
      };
      Operation *first = nullptr;
      llvm::SmallPtrSet<Operation *, 32> needed;
      for (Operation *op : ops) {
        if (isKept(op))
          continue;
        for (Operation *user : op->getUsers())
          if (inBackward(user)) {
            needed.insert(op);
            if (!first || user->isBeforeInBlock(first))
              first = user;
          }
      }
      if (!first)
        continue;
      // The layer's ops the needed ones depend on, back to what is kept.
      for (Operation *op : llvm::reverse(ops))
        if (needed.contains(op))
          for (Value v : op->getOperands())
            if (Operation *def = v.getDefiningOp();
                def && inLayer.contains(def) && !isKept(def))
              needed.insert(def);
      IRMapping clones;
      b.setInsertionPoint(first);
      for (Operation *op : ops) {
        if (!needed.contains(op))
          continue;
        Operation *clone = b.clone(*op, clones);
        clone->removeAttr(TPDialect::kSavedAttrName);
        clone->setAttr(TPDialect::kRecomputedAttrName, b.getUnitAttr());
      }
      // The backward reads the clones.
      for (Operation *op : ops)
        if (needed.contains(op))
          for (Value v : op->getResults())
            v.replaceUsesWithIf(clones.lookup(v), [&](OpOperand &use) {
              return inBackward(use.getOwner());
            });
    }
  }

  /// Gradients of frozen parameters and inputs that nothing reads.
  static void eraseDeadCode(Block &body) {
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (op.use_empty() && isPure(&op) &&
          !op.hasTrait<OpTrait::IsTerminator>())
        op.erase();
  }
};

} // namespace
