//===- LoRAAdapter.h - PEFT LoRA adapters -----------------------*- C++ -*-===//
//
// PEFT saves a LoRA adapter as adapter_config.json (rank, alpha, targets)
// and adapter_model.safetensors (the factors; see Support/Safetensors.h).
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PLAN_LORAADAPTER_H
#define TPOPT_PLAN_LORAADAPTER_H

#include "tpopt/Support/Safetensors.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::tp {

/// The LoRA factor of linear `module` ("lora_A" or "lora_B") in an
/// adapter: PEFT's "base_model.model.<module>.<factor>.weight", or the bare
/// "<module>.<factor>.weight". Returns the key found, or nullptr.
const llvm::StringMapEntry<SafetensorsTensor> *
findLoRAFactor(const llvm::StringMap<SafetensorsTensor> &adapter,
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
llvm::Expected<LoRAConfig> readPEFTConfig(llvm::StringRef path);

} // namespace mlir::tp

#endif // TPOPT_PLAN_LORAADAPTER_H
