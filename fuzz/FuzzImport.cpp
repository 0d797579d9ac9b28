//===- FuzzImport.cpp - the ONNX reader and importer, then raising --------===//
//
// FUZZ_RAISE builds the raising target: an input that imports is raised and
// its parameters verified, as `tp-opt model.onnx --tp-raise-onnx` does.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Import/ONNX/ONNXImporter.h"
#include "tpopt/Passes.h"
#include "tpopt/Registration/InitAll.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir;

static MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    tp::registerAllDialects(registry);
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    c->printOpOnDiagnostic(false);
    // Diagnostics are expected; only crashes and sanitizer reports count.
    c->getDiagEngine().registerHandler([](Diagnostic &) { return success(); });
    return c;
  }();
  return *ctx;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  auto buffer = llvm::MemoryBuffer::getMemBuffer(
      llvm::StringRef(reinterpret_cast<const char *>(data), size), "fuzz.onnx",
      /*RequiresNullTerminator=*/false);
  OwningOpRef<ModuleOp> module =
      tp::importONNXModel(*buffer, "fuzz.onnx", &context());
#ifdef FUZZ_RAISE
  if (module) {
    PassManager pm(&context());
    pm.addPass(tp::createTPRaiseONNX());
    pm.addPass(tp::createTPVerifyParams());
    (void)pm.run(*module);
  }
#endif
  return 0;
}
