//===- ProbeTensor.h - evaluate ONNX side computations ----------*- C++ -*-===//
//
// Exporters compute shapes, position tables, RoPE cos/sin and attention masks
// inside the graph. Raising evaluates those subgraphs concretely at a small
// probe shape (batch and sequence lengths chosen by the raiser) and then
// recognizes their meaning from the values: a causal or sliding-window mask,
// a rotary table with its theta. This header is the small interpreter for
// that: dense tensors of doubles and the ONNX operators such subgraphs use.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PROBE_PROBETENSOR_H
#define TPOPT_PROBE_PROBETENSOR_H

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mlir::tp {

/// A small dense tensor; every element is held as a double (integers up to
/// 2^53 are exact, which covers shapes and indices).
struct ProbeTensor {
  enum class Kind { Float, Int, Bool };
  Kind kind = Kind::Float;
  llvm::SmallVector<int64_t> shape;
  std::vector<double> data;

  int64_t numElements() const;
  int64_t rank() const { return shape.size(); }
  bool isScalarLike() const { return numElements() == 1; }
  /// The element that multi-index `idx` of a larger shape reads when this
  /// tensor is broadcast to it (numpy rules; `idx` has at least our rank).
  int64_t broadcastIndex(llvm::ArrayRef<int64_t> idx) const;
  /// The element broadcast to multi-index `idx`, or nullopt when this
  /// tensor has more dimensions than `idx` or is too short along one of
  /// them (a table smaller than the probe reads).
  std::optional<double> at(llvm::ArrayRef<int64_t> idx) const;
  /// The first element; NaN for an empty tensor (callers that need a
  /// scalar check isScalarLike, but a wrong guess must not read past the
  /// end).
  double scalar() const { return data.empty() ? NAN : data.front(); }

  static ProbeTensor fromAttr(DenseElementsAttr attr);
  static ProbeTensor ints(llvm::ArrayRef<int64_t> shape,
                          std::vector<double> data);
};

/// Converts a probe element to an integer, saturating at the int64 range
/// (exporters write INT64_MAX as an open slice end).
int64_t probeInt(double value);
/// A shape or index tensor's elements, each through probeInt.
llvm::SmallVector<int64_t> probeInts(const ProbeTensor &t);

/// Evaluates one ONNX operator on concrete inputs. `attrs` is the node's
/// ONNX attribute dictionary; a missing optional input is nullopt. Returns
/// the outputs, or an error saying why not (unsupported operator or bad
/// operands); limits output sizes so a mistaken probe cannot explode. Each
/// operator is one function in a table (lib/Probe/ProbeTensor.cpp).
llvm::Expected<std::vector<ProbeTensor>>
evaluateOnnxOp(llvm::StringRef opType, DictionaryAttr attrs,
               llvm::ArrayRef<std::optional<ProbeTensor>> inputs);

} // namespace mlir::tp

#endif // TPOPT_PROBE_PROBETENSOR_H
