//===- TPOps.h - tp dialect operations --------------------------*- C++ -*-===//

#ifndef TPOPT_DIALECT_TP_TPOPS_H
#define TPOPT_DIALECT_TP_TPOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPInterfaces.h"

#define GET_OP_CLASSES
#include "tpopt/Dialect/TP/TPOps.h.inc"

#endif // TPOPT_DIALECT_TP_TPOPS_H
