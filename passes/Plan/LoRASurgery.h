//===- LoRASurgery.h - LoRA branches added to a program's linears -*- C++
//-*-===//
//
// Private to passes/Plan: tp-apply-plan adds each targeted linear's LoRA
// branch before it places parameters (the factors are placed with their
// linear), then annotates the branches.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PASSES_PLAN_LORASURGERY_H
#define TPOPT_PASSES_PLAN_LORASURGERY_H

#include "tpopt/Dialect/TP/TPOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <string>

namespace mlir::tp::plan {

/// The module of a parameter; a LoRA factor belongs to the linear it
/// adapts ("q_proj.lora_A.weight" -> "q_proj").
std::string moduleOf(StringRef fqn);

bool isLoRAFactor(StringRef fqn);

/// The LoRA branch added to a linear: y + ((x A^T) * scale) B^T.
struct LoRABranch {
  LinearOp a, b;
  AddOp sum;
  /// lora_B's bias (lora_bias), or null.
  Value bias;
};

/// Every branch of a program, by the linear it adapts, and its parts.
struct LoRABranches {
  llvm::MapVector<Operation *, LoRABranch> byBase;
  llvm::DenseSet<Operation *> a, b;
  /// The sum `y + LoRA(x)` to its base linear.
  llvm::DenseMap<Operation *, Operation *> baseOfSum;

  bool isFactor(Operation *op) const {
    return a.contains(op) || b.contains(op);
  }
  void clear() {
    byBase.clear();
    a.clear();
    b.clear();
    baseOfSum.clear();
  }
};

/// Where the LoRA configuration and factors come from: PEFT's adapter
/// directory (`adapterDir`: adapter_config.json, adapter_model.safetensors),
/// or the lora-* options with factors from `weights` (none: fresh factors).
struct LoRAOptions {
  StringRef adapterDir;
  StringRef weights;
  int64_t rank = 0;
  double alpha = 32;
  StringRef targets;
};

/// Adds lora_A / lora_B parameters and the LoRA branch to every targeted
/// linear of `func`, recorded in `branches`, and points the parameters an
/// adapter replaces at its tensors. Errors are reported on `func` or the
/// linear.
LogicalResult insertLoRA(func::FuncOp func, const LoRAOptions &options,
                         LoRABranches &branches);

} // namespace mlir::tp::plan

#endif // TPOPT_PASSES_PLAN_LORASURGERY_H
