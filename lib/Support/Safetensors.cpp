//===- Safetensors.cpp - the index of a safetensors file ------------------===//

#include "tpopt/Support/Safetensors.h"
#include "tpopt/Support/BoundedJSON.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir::tp;

llvm::Expected<llvm::StringMap<SafetensorsTensor>>
mlir::tp::readSafetensorsIndex(llvm::StringRef path) {
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError("'" + path + "': " + what);
  };
  uint64_t fileSize = 0;
  if (std::error_code ec = llvm::sys::fs::file_size(path, fileSize))
    return fail("cannot read: " + ec.message());
  auto prefix = llvm::MemoryBuffer::getFileSlice(path, 8, 0);
  if (!prefix || fileSize < 8)
    return fail("not a safetensors file (shorter than its 8-byte header "
                "length)");
  uint64_t headerSize =
      llvm::support::endian::read64le((*prefix)->getBufferStart());
  if (headerSize > fileSize - 8)
    return fail("header length " + llvm::Twine(headerSize) +
                " at offset 0 runs past the end of the file (" +
                llvm::Twine(fileSize) + " bytes)");
  // The format caps the header at 100 MB.
  JSONLimits limits;
  limits.maxBytes = 100'000'000;
  if (headerSize > limits.maxBytes)
    return fail("header length " + llvm::Twine(headerSize) +
                " at offset 0 is over safetensors' 100 MB limit");
  auto header = llvm::MemoryBuffer::getFileSlice(path, headerSize, 8);
  if (!header)
    return fail("cannot read the header: " + header.getError().message());
  llvm::Expected<llvm::json::Value> json =
      parseBoundedJSON((*header)->getBuffer(), limits, /*baseOffset=*/8);
  if (!json)
    return fail("header at offset 8 is not JSON: " +
                llvm::toString(json.takeError()));
  const llvm::json::Object *object = json->getAsObject();
  if (!object)
    return fail("header at offset 8 is not a JSON object");

  uint64_t dataStart = 8 + headerSize;
  llvm::StringMap<SafetensorsTensor> tensors;
  for (const auto &member : *object) {
    // Named, not a structured binding: the lambda below captures it.
    llvm::StringRef name = member.first;
    const llvm::json::Value &value = member.second;
    if (name == "__metadata__")
      continue;
    auto bad = [&](const llvm::Twine &what) {
      return fail("tensor '" + name.str() + "': " + what);
    };
    const llvm::json::Object *entry = value.getAsObject();
    const llvm::json::Array *shape = entry ? entry->getArray("shape") : nullptr;
    const llvm::json::Array *offsets =
        entry ? entry->getArray("data_offsets") : nullptr;
    std::optional<llvm::StringRef> dtype =
        entry ? entry->getString("dtype") : std::nullopt;
    if (!shape || !offsets || !dtype || offsets->size() != 2)
      return bad("expected dtype, shape and data_offsets [begin, end]");
    SafetensorsTensor t;
    t.dtype = dtype->str();
    for (const llvm::json::Value &d : *shape) {
      std::optional<int64_t> n = d.getAsInteger();
      if (!n || *n < 0)
        return bad("shape has a non-integer or negative dimension");
      t.shape.push_back(*n);
    }
    std::optional<int64_t> begin = (*offsets)[0].getAsInteger(),
                           end = (*offsets)[1].getAsInteger();
    if (!begin || !end || *begin < 0 || *end < *begin)
      return bad("data_offsets must be two increasing integers");
    t.offset = dataStart + *begin;
    t.length = *end - *begin;
    if (t.offset + t.length > fileSize)
      return bad("bytes [" + llvm::Twine(t.offset) + ", " +
                 llvm::Twine(t.offset + t.length) +
                 ") run past the end of the file (" + llvm::Twine(fileSize) +
                 " bytes)");
    tensors[name] = std::move(t);
  }
  return tensors;
}
