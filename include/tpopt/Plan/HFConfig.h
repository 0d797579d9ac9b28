//===- HFConfig.h - a transformers config.json, typed -----------*- C++ -*-===//
//
// `--hf-config` and `--plan hf:config.json` read a transformers
// config.json. llvm::json's getters answer "absent" for a field of the
// wrong type, so a `"vocab_size": "128"` would silently not be checked:
// every field tp-opt reads has its type checked once, here, when the file
// is read.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PLAN_HFCONFIG_H
#define TPOPT_PLAN_HFCONFIG_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

namespace mlir::tp {

/// The config.json at `path`, read within the JSON limits, with every field
/// tp-opt reads (at the top level, in `text_config` and in the RoPE
/// parameters) of its JSON type or null, which transformers reads as
/// unset; an error names the file and the field.
llvm::Expected<llvm::json::Object> readHFConfig(llvm::StringRef path);

/// The same checks on a config already read; `origin` names it in errors.
llvm::Error checkHFConfigTypes(const llvm::json::Object &config,
                               llvm::StringRef origin);

} // namespace mlir::tp

#endif // TPOPT_PLAN_HFCONFIG_H
