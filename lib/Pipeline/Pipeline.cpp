//===- Pipeline.cpp - the tp-opt compilation pipeline ---------------------===//

#include "tpopt/Pipeline/Pipeline.h"
#include "tpopt/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::tp;

void TPCompileOptions::exposeAsToolOptions(llvm::cl::OptionCategory &category) {
  // Each option is registered with this PassOptions' own sub-command; adding
  // the top level makes the tool's command line parse into it as well.
  for (auto &entry : OptionsMap) {
    llvm::cl::Option *option = entry.second;
    option->removeArgument();
    option->addSubCommand(llvm::cl::SubCommand::getTopLevel());
    option->addCategory(category);
    option->addArgument();
  }
}

void mlir::tp::buildTPRaisePipeline(OpPassManager &pm,
                                    const TPCompileOptions &options) {
  TPRaiseONNXOptions raise;
  raise.probeSeq = options.probeSeq;
  raise.hfConfig = options.hfConfig;
  pm.addPass(createTPRaiseONNX(raise));
  pm.addPass(createTPVerifyParams());
  if (!options.hfConfig.empty()) {
    TPCheckHFConfigOptions check;
    check.path = options.hfConfig;
    pm.addPass(createTPCheckHFConfig(check));
  }
}

void mlir::tp::buildTPDistributePipeline(OpPassManager &pm,
                                         const TPCompileOptions &options) {
  // LoRA is added by the plan pass, so a tp=1 program with LoRA is a plan
  // on one rank. The linear forms read the plan's annotations.
  if (options.isDistributed()) {
    TPApplyPlanOptions plan;
    plan.plan = options.plan;
    plan.tp = options.tp;
    plan.sp = options.sp;
    plan.allowUneven = options.allowUneven;
    plan.loraRank = options.loraRank;
    plan.loraAlpha = options.loraAlpha;
    plan.loraTargets = options.loraTargets;
    plan.loraWeights = options.loraWeights;
    plan.loraAdapter = options.loraAdapter;
    pm.addPass(createTPApplyPlan(plan));
  }
  // After the plan, so that LoRA's parameters are held in the same type;
  // before the training step, which takes its types from the forward's.
  TPComputeTypeOptions compute;
  compute.type = options.dtype;
  pm.addPass(createTPComputeType(compute));
  TPLowerLinearOptions linear;
  linear.asyncTP = options.asyncTP;
  pm.addNestedPass<func::FuncOp>(createTPLowerLinear(linear));
  // On the global program: partition then derives the backward's
  // collectives from the same rules as the forward's.
  if (options.train) {
    TPBuildTrainStepOptions step;
    step.optimizer = options.optimizer;
    step.recompute = options.recompute;
    step.masterWeights = options.masterWeights;
    pm.addPass(createTPBuildTrainStep(step));
  }
  if (options.isDistributed())
    pm.addPass(createTPPartition());
  // After partition: the replica classes come from the partitioned
  // backward.
  if (options.train) {
    TPReplicaGradSyncOptions sync;
    sync.bucketMib = options.bucketMib;
    sync.dp = options.dp;
    // Stage 3 is stage 2's per-layer buckets with the parameters read
    // through gathers of them.
    sync.zero = std::min<int64_t>(options.zero, 2);
    pm.addPass(createTPReplicaGradSync(sync));
    TPBroadcastReplicasOptions broadcast;
    broadcast.dp = options.dp;
    pm.addPass(createTPBroadcastReplicas(broadcast));
    if (options.zero == 3)
      pm.addPass(createTPShardParams());
  }
  // On the rank's program, so that the plan report and model.mlir show it.
  if (options.fuseSiblings)
    pm.addNestedPass<func::FuncOp>(createTPFuseSiblingLinears());
}

void mlir::tp::buildTPFusePipeline(OpPassManager &pm,
                                   const TPCompileOptions &options) {
  if (options.saveAttentionStats)
    pm.addNestedPass<func::FuncOp>(createTPSaveAttentionStats());
  // On the rank's whole program: what the backward reads stays unfused.
  if (options.fuseLinearCrossEntropy)
    pm.addNestedPass<func::FuncOp>(createTPFuseLinearCrossEntropy());
  if (options.fuseSiluMulGrad)
    pm.addNestedPass<func::FuncOp>(createTPFuseSiluMulGrad());
  if (options.fuseEpilogues)
    pm.addNestedPass<func::FuncOp>(createTPFuseEpilogues());
  // After the epilogues: the adds a product takes need no pass of their own.
  if (options.fuseAddRmsNorm)
    pm.addNestedPass<func::FuncOp>(createTPFuseAddRmsNorm());
  if (options.fuseGradAccumulation)
    pm.addNestedPass<func::FuncOp>(createTPFuseGradAccumulation());
  // After the fusions, whose ops are the ones that stream a table.
  if (options.train && options.zero == 3) {
    TPStreamParamRunsOptions stream;
    stream.blockMib = options.streamBlockMib;
    pm.addPass(createTPStreamParamRuns(stream));
  }
  // After the fusions, which change what is independent of a sum.
  if (options.overlapAllReduces)
    pm.addNestedPass<func::FuncOp>(createTPOverlapAllReduces());
  // Last: the layout is of the program the emitter prints.
  if (options.planActivations)
    pm.addNestedPass<func::FuncOp>(createTPPlanActivations());
}

void mlir::tp::buildTPToEmitCPipeline(OpPassManager &pm,
                                      const TPCompileOptions &options) {
  TPToEmitCOptions emit;
  emit.modelPath = options.modelPath;
  emit.layerLoops = options.layerLoops;
  pm.addPass(createTPToEmitC(emit));
}

void mlir::tp::buildTPEmitPipeline(OpPassManager &pm,
                                   const TPCompileOptions &options) {
  buildTPFusePipeline(pm, options);
  buildTPToEmitCPipeline(pm, options);
}

void mlir::tp::buildTPCompilePipeline(OpPassManager &pm,
                                      const TPCompileOptions &options) {
  buildTPRaisePipeline(pm, options);
  buildTPDistributePipeline(pm, options);
  buildTPEmitPipeline(pm, options);
}

void mlir::tp::registerTPCompilePipeline() {
  registerPassPipeline(
      "tp-compile",
      "Compile raised ONNX to the EmitC program of one tensor-parallel rank "
      "(what tpc does up to C++)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        TPCompileOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (llvm::Error e = checkTPCompileOptions(options))
          return errorHandler("tp-compile: " + llvm::toString(std::move(e)));
        buildTPCompilePipeline(pm, options);
        return success();
      },
      [](function_ref<void(const detail::PassOptions &)> handler) {
        handler(TPCompileOptions());
      });
}
