//===- TPDialect.h - tp dialect ---------------------------------*- C++ -*-===//

#ifndef TPOPT_DIALECT_TP_TPDIALECT_H
#define TPOPT_DIALECT_TP_TPDIALECT_H

#include "mlir/IR/Dialect.h"

#include "tpopt/Dialect/TP/TPDialect.h.inc"

#endif // TPOPT_DIALECT_TP_TPDIALECT_H
