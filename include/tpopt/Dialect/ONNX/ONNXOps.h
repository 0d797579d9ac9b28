//===- ONNXOps.h - onnx-level IR of the importer ----------------*- C++ -*-===//

#ifndef TPOPT_DIALECT_ONNX_ONNXOPS_H
#define TPOPT_DIALECT_ONNX_ONNXOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "tpopt/Dialect/ONNX/ONNXDialect.h.inc"

#define GET_OP_CLASSES
#include "tpopt/Dialect/ONNX/ONNXOps.h.inc"

#endif // TPOPT_DIALECT_ONNX_ONNXOPS_H
