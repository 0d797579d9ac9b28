//===- CppLiterals.h - C++ spellings of the emitter's constants -*- C++ -*-===//
//
// Part of tp-to-emitc. EmitC's translator prints a non-finite double as the
// <cmath> macros NAN and INFINITY, which the generated file does not
// include; the emitter spells such values through std::numeric_limits
// (the file includes <limits>) and every finite one with round-trip
// precision.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PASSES_EMIT_CPPLITERALS_H
#define TPOPT_PASSES_EMIT_CPPLITERALS_H

#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <string>

namespace mlir::tp {

/// A C++ expression of type double whose value is exactly `value`.
inline std::string cppDoubleLiteral(double value) {
  if (std::isnan(value))
    return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(value))
    return value > 0 ? "std::numeric_limits<double>::infinity()"
                     : "-std::numeric_limits<double>::infinity()";
  return llvm::formatv("{0:e16}", value).str();
}

} // namespace mlir::tp

#endif // TPOPT_PASSES_EMIT_CPPLITERALS_H
