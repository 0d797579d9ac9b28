//===- BoundedJSON.h - JSON read within limits ------------------*- C++ -*-===//
//
// llvm::json::parse recurses once per nesting level and holds the whole
// document: a hostile file (a plan, a config.json, a safetensors header)
// nested a few hundred thousand levels deep overflows the stack. Every JSON
// the tools read goes through these functions, which check the size and the
// nesting before parsing.
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_SUPPORT_BOUNDEDJSON_H
#define TPOPT_SUPPORT_BOUNDEDJSON_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <cstdint>

namespace mlir::tp {

struct JSONLimits {
  /// Configuration files (plans, config.json, adapter_config.json) are
  /// kilobytes; safetensors allows headers up to 100 MB.
  uint64_t maxBytes = 16u << 20;
  /// HF configs nest four levels; every reader stays far inside this.
  unsigned maxDepth = 64;
};

/// `text` parsed as JSON once its size and nesting are within `limits`; an
/// error names the byte offset (counted from `baseOffset`) where a limit is
/// crossed or the syntax breaks.
llvm::Expected<llvm::json::Value>
parseBoundedJSON(llvm::StringRef text, const JSONLimits &limits = {},
                 uint64_t baseOffset = 0);

/// The JSON object in the file `path`, its size checked before it is read;
/// errors name the file.
llvm::Expected<llvm::json::Object>
readBoundedJSONObject(llvm::StringRef path, const JSONLimits &limits = {});

} // namespace mlir::tp

#endif // TPOPT_SUPPORT_BOUNDEDJSON_H
