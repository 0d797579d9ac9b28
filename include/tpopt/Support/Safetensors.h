//===- Safetensors.h - the index of a safetensors file ----------*- C++ -*-===//
//
// A safetensors file is an 8-byte header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the data. Parameters point into
// the file (#tp.source), so only the header is read. An HF sharded
// checkpoint is a model.safetensors.index.json whose weight_map names the
// shard file of each tensor.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_SUPPORT_SAFETENSORS_H
#define TPOPT_SUPPORT_SAFETENSORS_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::tp {

struct SafetensorsTensor {
  std::string dtype; // safetensors' name: "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t offset = 0; // from the start of the file
  uint64_t length = 0;
  std::string file; // the file that holds it, as the reader was given it
};

/// The tensors of a safetensors file by name; an error naming the file (and
/// the tensor or byte offset) when the header is malformed or a range lies
/// outside the file.
llvm::Expected<llvm::StringMap<SafetensorsTensor>>
readSafetensorsIndex(llvm::StringRef path);

/// The tensors of a checkpoint by name: `path` is a safetensors file, an HF
/// sharded checkpoint's model.safetensors.index.json (each shard's header
/// read once), or a model directory holding either. Errors name the index,
/// the tensor and the shard.
llvm::Expected<llvm::StringMap<SafetensorsTensor>>
readCheckpointIndex(llvm::StringRef path);

} // namespace mlir::tp

#endif // TPOPT_SUPPORT_SAFETENSORS_H
