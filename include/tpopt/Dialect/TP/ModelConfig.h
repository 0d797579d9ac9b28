//===- ModelConfig.h - the typed configuration of a raised model -*- C++
//-*-===//
//
// Raising records what the graph shows of the model's configuration on the
// module as `tp.config`, a dictionary keyed like HF's config.json (so that
// it reads like one). This is its typed form: every field has one type
// (ModelConfig.def), the dialect verifies the dictionary against it, and
// passes read and write fields through it instead of by string key.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_DIALECT_TP_MODELCONFIG_H
#define TPOPT_DIALECT_TP_MODELCONFIG_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::tp {

struct ModelConfig {
  using Int = std::optional<int64_t>;
  using Float = std::optional<double>;
  using Bool = std::optional<bool>;
  using String = std::optional<std::string>;
  using Strings = std::optional<std::vector<std::string>>;

#define TP_CONFIG_FIELD(KIND, KEY, MEMBER) KIND MEMBER;
#include "tpopt/Dialect/TP/ModelConfig.def"

  /// The module attribute holding it.
  static constexpr llvm::StringLiteral kAttrName = "tp.config";

  /// Checks that every entry of `dict` is a known field of its type.
  static LogicalResult verify(DictionaryAttr dict,
                              function_ref<InFlightDiagnostic()> emitError);
  /// The typed form of `dict` (which must verify).
  static ModelConfig fromAttr(DictionaryAttr dict);
  /// The configuration of `module`; failure, with an error on the module,
  /// when it has none (raising has not run) or it does not verify.
  static FailureOr<ModelConfig> read(ModuleOp module);

  /// The dictionary form; absent fields are left out.
  DictionaryAttr toAttr(MLIRContext *ctx) const;
  void write(ModuleOp module) const {
    module->setAttr(kAttrName, toAttr(module.getContext()));
  }
};

} // namespace mlir::tp

#endif // TPOPT_DIALECT_TP_MODELCONFIG_H
