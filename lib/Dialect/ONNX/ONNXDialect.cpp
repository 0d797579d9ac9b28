//===- ONNXDialect.cpp - onnx-level IR of the importer --------------------===//

#include "tpopt/Dialect/ONNX/ONNXOps.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

using namespace mlir;
using namespace mlir::tp::onnx_ir;

#include "tpopt/Dialect/ONNX/ONNXDialect.cpp.inc"

void ONNXDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "tpopt/Dialect/ONNX/ONNXOps.cpp.inc"
      >();
}

LogicalResult ONNXDialect::verifyRegionArgAttribute(Operation *op,
                                                    unsigned regionIndex,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  if (attr.getName() == kNameAttrName ||
      attr.getName() == kTransposedCopyOfAttrName) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "argument " << argIndex << ": '"
                               << attr.getName().getValue()
                               << "' must be a string";
    return success();
  }
  if (attr.getName() == kValueAttrName) {
    auto value = dyn_cast<DenseElementsAttr>(attr.getValue());
    Region &region = op->getRegion(regionIndex);
    if (!value)
      return op->emitOpError() << "argument " << argIndex << ": '"
                               << kValueAttrName
                               << "' must be a dense elements attribute";
    if (!region.empty() &&
        region.getArgument(argIndex).getType() != value.getType())
      return op->emitOpError()
             << "argument " << argIndex << ": value of type "
             << value.getType() << " does not match the argument type "
             << region.getArgument(argIndex).getType();
    return success();
  }
  return op->emitOpError() << "argument " << argIndex
                           << ": unknown onnx argument attribute '"
                           << attr.getName().getValue() << "'";
}

#define GET_OP_CLASSES
#include "tpopt/Dialect/ONNX/ONNXOps.cpp.inc"
