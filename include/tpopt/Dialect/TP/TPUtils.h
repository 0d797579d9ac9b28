//===- TPUtils.h - small helpers shared by tp passes ------------*- C++ -*-===//

#ifndef TPOPT_DIALECT_TP_TPUTILS_H
#define TPOPT_DIALECT_TP_TPUTILS_H

#include "mlir/IR/BuiltinTypes.h"
#include <cstdint>
#include <optional>

namespace mlir::tp {

/// Size in bytes of one stored element of `type` (an integer or float; i1 is
/// stored as one byte), or nullopt for index and non-scalar types.
std::optional<uint64_t> getElementByteSize(Type type);

/// Size in bytes of a statically shaped tensor, or nullopt when the shape is
/// dynamic, the element size is unknown, or the size overflows 64 bits.
std::optional<uint64_t> getTensorByteSize(RankedTensorType type);

} // namespace mlir::tp

#endif // TPOPT_DIALECT_TP_TPUTILS_H
