//===- BoundedJSON.cpp - JSON read within limits --------------------------===//

#include "tpopt/Support/BoundedJSON.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir::tp;

llvm::Expected<llvm::json::Value>
mlir::tp::parseBoundedJSON(llvm::StringRef text, const JSONLimits &limits,
                           uint64_t baseOffset) {
  if (text.size() > limits.maxBytes)
    return llvm::createStringError("it is " + llvm::Twine(text.size()) +
                                   " bytes (at most " +
                                   llvm::Twine(limits.maxBytes) + " are read)");
  // Brackets outside strings; the parser reports any other syntax error.
  unsigned depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"') {
      inString = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limits.maxDepth)
        return llvm::createStringError(
            "nested deeper than " + llvm::Twine(limits.maxDepth) +
            " levels at byte offset " + llvm::Twine(baseOffset + i));
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return llvm::json::parse(text);
}

llvm::Expected<llvm::json::Object>
mlir::tp::readBoundedJSONObject(llvm::StringRef path,
                                const JSONLimits &limits) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError("'" + path + "' " + what);
  };
  uint64_t size = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, size))
    return llvm::createStringError("cannot read '" + path +
                                   "': " + ec.message());
  if (size > limits.maxBytes)
    return fail("is " + llvm::Twine(size) + " bytes; a JSON file of at most " +
                llvm::Twine(limits.maxBytes) + " is read");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer)
    return llvm::createStringError("cannot read '" + path +
                                   "': " + buffer.getError().message());
  llvm::Expected<llvm::json::Value> json =
      parseBoundedJSON((*buffer)->getBuffer(), limits);
  if (!json)
    return fail("is not JSON: " + llvm::toString(json.takeError()));
  if (llvm::json::Object *object = json->getAsObject())
    return std::move(*object);
  return fail("is not a JSON object");
}
