//===- ModelFile.h - ONNX protobuf without its weight bytes -----*- C++ -*-===//
//
// Reads a ModelProto from a mapped file while leaving initializer payloads in
// place: the graph is parsed by protobuf, each initializer's `raw_data` (or
// packed `float_data`) is only located by its byte range in the file.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_LIB_IMPORT_MODELFILE_H
#define TPOPT_LIB_IMPORT_MODELFILE_H

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::tp::detail {

/// An initializer whose payload stayed in the model file.
struct InlineInitializer {
  /// The TensorProto with its payload field cleared.
  onnx::TensorProto tensor;
  /// Byte range of the payload in the model file; valid when `hasPayload`.
  uint64_t offset = 0;
  uint64_t length = 0;
  bool hasPayload = false;
  /// True when the payload is packed `float_data` (same bytes as raw_data).
  bool packedFloats = false;
};

struct ModelFile {
  /// The model with `graph.initializer` removed (see `initializers`).
  onnx::ModelProto model;
  std::vector<InlineInitializer> initializers;
};

/// Splits `bytes` (the whole .onnx file) into a ModelFile. Malformed
/// protobuf is an error that names the byte offset where parsing failed.
llvm::Expected<ModelFile> readModelFile(llvm::StringRef bytes);

} // namespace mlir::tp::detail

#endif // TPOPT_LIB_IMPORT_MODELFILE_H
