//===- TPAttrs.cpp - tp dialect attributes --------------------------------===//

#include "tpopt/Dialect/TP/TPAttrs.h"
#include "tpopt/Dialect/TP/TPDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::tp;

#include "tpopt/Dialect/TP/TPEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "tpopt/Dialect/TP/TPAttrs.cpp.inc"

void TPDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "tpopt/Dialect/TP/TPAttrs.cpp.inc"
      >();
}
