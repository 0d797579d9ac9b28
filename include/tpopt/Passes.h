//===- Passes.h - tp-opt passes ---------------------------------*- C++ -*-===//

#ifndef TPOPT_PASSES_H
#define TPOPT_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "tpopt/Dialect/TP/TPDialect.h"

namespace mlir::tp {

#define GEN_PASS_DECL
#include "tpopt/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tpopt/Passes.h.inc"

} // namespace mlir::tp

#endif // TPOPT_PASSES_H
