//===- InitAll.cpp - register what the tp-opt tools use -------------------===//

#include "tpopt/Registration/InitAll.h"
#include "tpopt/Dialect/ONNX/ONNXOps.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPInterfaces.h"
#include "tpopt/Passes.h"
#include "tpopt/Pipeline/Pipeline.h"

#include "mlir/Conversion/ArithToEmitC/ArithToEmitC.h"
#include "mlir/Conversion/FuncToEmitC/FuncToEmitC.h"
#include "mlir/Conversion/MemRefToEmitC/MemRefToEmitC.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/SCFToEmitC/SCFToEmitC.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/ShardingInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/Extensions/ShardingExtensions.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/ShardingInterfaceImpl.h"
#include "mlir/Dialect/MLProgram/IR/MLProgram.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Shard/Transforms/Passes.h"
#include "mlir/Dialect/Tensor/Extensions/ShardingExtensions.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

void mlir::tp::registerAllDialects(DialectRegistry &registry) {
  registry.insert<tp::TPDialect, tp::onnx_ir::ONNXDialect, func::FuncDialect,
                  arith::ArithDialect, tensor::TensorDialect,
                  linalg::LinalgDialect, scf::SCFDialect, memref::MemRefDialect,
                  math::MathDialect, shard::ShardDialect, emitc::EmitCDialect,
                  ml_program::MLProgramDialect,
                  bufferization::BufferizationDialect>();

  linalg::registerShardingInterfaceExternalModels(registry);
  tensor::registerShardingInterfaceExternalModels(registry);
  func::registerShardingInterfaceExternalModels(registry);
  arith::registerShardingInterfaceExternalModels(registry);

  tp::registerShardRuntimeCallModels(registry);

  registerConvertArithToEmitCInterface(registry);
  registerConvertFuncToEmitCInterface(registry);
  registerConvertSCFToEmitCInterface(registry);
  registerConvertMemRefToEmitCInterface(registry);
}

void mlir::tp::registerAllPasses() {
  tp::registerTPOptPasses();
  tp::registerTPCompilePipeline();
  shard::registerShardPasses();
  registerConvertToEmitC();
  registerReconcileUnrealizedCastsPass();
  registerTransformsPasses();
}
