//===- RuntimeCalls.h - the runtime's calls as signatures -------*- C++ -*-===//
//
// One RuntimeSignature per entry of the runtime's call table
// (runtime/include/tprt/Calls.def): mlir::tp::calls::Name, or the entry's
// Id for an overload. The ops' RuntimeCallOpInterface tables are made of
// these, so that the compiler and tprt.h read one declaration.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_DIALECT_TP_RUNTIMECALLS_H
#define TPOPT_DIALECT_TP_RUNTIMECALLS_H

#include "tpopt/Dialect/TP/TPInterfaces.h"

#include "tprt/CallMacros.h"

#include <iterator>

namespace mlir::tp::calls {

#define TPRT_RESULTS_Tensor 1
#define TPRT_RESULTS_Void 0
#define TPRT_RESULTS_Tensors2 2
#define TPRT_RESULTS_Tensors3 3
#define TPRT_RESULTS_Tensors9 9
#define TPRT_RESULTS_TensorsN kVariadicResults
#define TPRT_EACH_PARAM(kind, name) RuntimeArg::kind,
// The kinds after a first placeholder (a call may have no parameter
// besides the context, and an array may not be empty).
#define TPRT_OVERLOAD(Id, Name, Result, Backends, Params)                      \
  inline constexpr RuntimeArg Id##Params_[] = {RuntimeArg::Tensor,             \
                                               TPRT_FOR_EACH_PARAM(Params)};   \
  inline constexpr RuntimeSignature Id{                                        \
      "tprt::" #Name,                                                          \
      ArrayRef<RuntimeArg>(Id##Params_ + 1, std::size(Id##Params_) - 1),       \
      TPRT_RESULTS_##Result};
#define TPRT_CALL(Name, Result, Backends, Params)                              \
  TPRT_OVERLOAD(Name, Name, Result, Backends, Params)
#include "tprt/Calls.def"
#undef TPRT_EACH_PARAM
#undef TPRT_RESULTS_Tensor
#undef TPRT_RESULTS_Void
#undef TPRT_RESULTS_Tensors2
#undef TPRT_RESULTS_Tensors3
#undef TPRT_RESULTS_Tensors9
#undef TPRT_RESULTS_TensorsN

/// `signature` whose consuming form (RuntimeSignature::consuming) is
/// `consuming`.
constexpr RuntimeSignature withConsuming(RuntimeSignature signature,
                                         const RuntimeSignature &consuming) {
  signature.consuming = &consuming;
  return signature;
}

} // namespace mlir::tp::calls

#endif // TPOPT_DIALECT_TP_RUNTIMECALLS_H
