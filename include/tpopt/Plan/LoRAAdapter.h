//===- LoRAAdapter.h - LoRA adapter weights in safetensors ------*- C++ -*-===//
//
// PEFT saves a LoRA adapter as adapter_model.safetensors: an 8-byte header
// length, a JSON header naming each tensor's dtype, shape and byte range,
// then the data. Parameters point into the file (#tp.source), so only the
// header is read here.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PLAN_LORAADAPTER_H
#define TPOPT_PLAN_LORAADAPTER_H

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::tp {

struct AdapterTensor {
  std::string dtype; // safetensors' name: "F32", "BF16", ...
  std::vector<int64_t> shape;
  uint64_t offset = 0; // from the start of the file
  uint64_t length = 0;
};

/// The tensors of a safetensors file by name; nullopt with `error` naming
/// the file (and the tensor or byte offset) when the header is malformed or
/// a range lies outside the file.
std::optional<llvm::StringMap<AdapterTensor>>
readSafetensorsIndex(llvm::StringRef path, std::string &error);

/// The LoRA factor of linear `module` ("lora_A" or "lora_B") in an
/// adapter: PEFT's "base_model.model.<module>.<factor>.weight", or the bare
/// "<module>.<factor>.weight". Returns the key found, or nullptr.
const llvm::StringMapEntry<AdapterTensor> *
findLoRAFactor(const llvm::StringMap<AdapterTensor> &adapter,
               llvm::StringRef module, llvm::StringRef factor);

/// What a PEFT adapter directory's adapter_config.json says of the LoRA.
struct LoRAConfig {
  int64_t rank = 0;
  double alpha = 0;
  /// "all-linear", or the comma-separated module names of target_modules.
  std::string targets;
};

/// Reads PEFT's adapter_config.json: `r`, `lora_alpha` and
/// `target_modules` (a list of module names, or "all-linear"). A regex
/// target, DoRA (`use_dora`), or another `peft_type` is an error naming the
/// file and the field.
std::optional<LoRAConfig> readPEFTConfig(llvm::StringRef path,
                                         std::string &error);

} // namespace mlir::tp

#endif // TPOPT_PLAN_LORAADAPTER_H
