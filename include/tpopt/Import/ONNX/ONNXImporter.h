//===- ONNXImporter.h - ONNX model to onnx-level IR -------------*- C++ -*-===//

#ifndef TPOPT_IMPORT_ONNX_ONNXIMPORTER_H
#define TPOPT_IMPORT_ONNX_ONNXIMPORTER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "tpopt/Support/Safetensors.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

namespace mlir::tp {

struct ImportOptions {
  /// Initializers of at most this many bytes also get their value in the IR
  /// (`onnx.value`): raising reads epsilons, shape vectors and RoPE
  /// frequencies from them. Larger ones are only located, never read.
  uint64_t inlineValueLimit = 4096;
  /// Where the parameters of a graph-only export (tools/tp-export: each
  /// parameter a graph input of static shape named by its FQN, no
  /// initializer) are: the checkpoint's tensors by name (tpc --weights).
  /// Each such input becomes a parameter located in its shard file.
  const llvm::StringMap<SafetensorsTensor> *checkpoint = nullptr;
  /// The checkpoint as the user named it, for diagnostics.
  std::string checkpointPath;
};

/// The metadata key tools/tp-export sets on a graph-only export.
inline constexpr llvm::StringLiteral kGraphOnlyExportKey = "tp.graph_only";

/// Builds the onnx-level module (`onnx.node` ops in a `func.func
/// @main_graph`) of the ONNX model in `buffer`, whose file is `path` (used to
/// resolve external data). Weight bytes are located, not read. Errors are
/// emitted as diagnostics naming the tensor, node or file offset; returns
/// null on failure.
OwningOpRef<ModuleOp> importONNXModel(const llvm::MemoryBuffer &buffer,
                                      llvm::StringRef path, MLIRContext *ctx,
                                      const ImportOptions &options = {});

/// Maps the file at `path` (without reading it) and imports it.
OwningOpRef<ModuleOp> importONNXFile(llvm::StringRef path, MLIRContext *ctx,
                                     const ImportOptions &options = {});

/// Registers `--import-onnx` with mlir-translate style tools.
void registerImportONNXTranslation();

} // namespace mlir::tp

#endif // TPOPT_IMPORT_ONNX_ONNXIMPORTER_H
