//===- tp-translate.cpp - file-format translations of tp-opt --------------===//
//
// `--import-onnx` reads an ONNX model into onnx-level IR; `--mlir-to-cpp`
// runs the upstream EmitC C++ emitter with every dialect of the pipeline
// registered, so modules that still carry tp attributes parse.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Import/ONNX/ONNXImporter.h"
#include "tpopt/Registration/InitAll.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/Cpp/CppEmitter.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"

using namespace mlir;

static llvm::cl::opt<bool> declareVariablesAtTop(
    "declare-variables-at-top",
    llvm::cl::desc("--mlir-to-cpp: declare variables at the top of functions"),
    llvm::cl::init(false));

static llvm::cl::opt<std::string>
    fileId("file-id", llvm::cl::desc("--mlir-to-cpp: emit only emitc.file ops "
                                     "with this id"),
           llvm::cl::init(""));

static void registerTranslations() {
  static TranslateFromMLIRRegistration toCpp(
      "mlir-to-cpp", "translate EmitC (with tp attributes) to C++",
      [](Operation *op, raw_ostream &output) {
        return emitc::translateToCpp(op, output, declareVariablesAtTop,
                                     fileId);
      },
      [](DialectRegistry &registry) { tp::registerAllDialects(registry); });
}

int main(int argc, char **argv) {
  registerTranslations();
  tp::registerImportONNXTranslation();
  return failed(mlirTranslateMain(argc, argv, "tp-opt translations\n")) ? 1
                                                                         : 0;
}
