//===- TPAttrs.h - tp dialect attributes ------------------------*- C++ -*-===//

#ifndef TPOPT_DIALECT_TP_TPATTRS_H
#define TPOPT_DIALECT_TP_TPATTRS_H

#include "mlir/IR/Attributes.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "tpopt/Dialect/TP/TPEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tpopt/Dialect/TP/TPAttrs.h.inc"

#endif // TPOPT_DIALECT_TP_TPATTRS_H
