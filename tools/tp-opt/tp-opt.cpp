//===- tp-opt.cpp - the tp-opt driver (mlir-opt conventions) --------------===//
//
// mlir-opt with the tp pipeline registered. An input named *.onnx is
// imported first (as `tp-translate --import-onnx` would), so
// `tp-opt model.onnx --tp-raise-onnx` works directly on exporter output.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Import/ONNX/ONNXImporter.h"
#include "tpopt/Registration/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// Imports the model and runs the MlirOptMain pipeline on it.
static LogicalResult runOnONNX(StringRef input, StringRef output,
                               DialectRegistry &registry) {
  std::string text;
  {
    MLIRContext context(registry);
    llvm::SourceMgr sourceMgr;
    SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
    OwningOpRef<ModuleOp> module = tp::importONNXFile(input, &context);
    if (!module)
      return failure();
    llvm::raw_string_ostream os(text);
    // Keep node-name locations so later diagnostics can name ONNX nodes.
    module->print(os, OpPrintingFlags().enableDebugInfo());
  }
  std::string errorMessage;
  std::unique_ptr<llvm::ToolOutputFile> file =
      openOutputFile(output, &errorMessage);
  if (!file) {
    llvm::errs() << errorMessage << "\n";
    return failure();
  }
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (failed(MlirOptMain(file->os(),
                         llvm::MemoryBuffer::getMemBufferCopy(text, input),
                         registry, config)))
    return failure();
  file->keep();
  return success();
}

int main(int argc, char **argv) {
  DialectRegistry registry;
  tp::registerAllDialects(registry);
  tp::registerAllPasses();
  auto [input, output] = registerAndParseCLIOptions(
      argc, argv, "tp-opt: tensor-parallel transformer compiler\n", registry);
  if (StringRef(input).ends_with(".onnx"))
    return asMainReturnCode(runOnONNX(input, output, registry));
  return asMainReturnCode(MlirOptMain(argc, argv, input, output, registry));
}
