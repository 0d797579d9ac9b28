//===- Safetensors.cpp - the index of a safetensors file ------------------===//

#include "tpopt/Support/Safetensors.h"
#include "tpopt/Support/BoundedJSON.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

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
    t.file = path.str();
    tensors[name] = std::move(t);
  }
  return tensors;
}

llvm::Expected<llvm::StringMap<SafetensorsTensor>>
mlir::tp::readCheckpointIndex(llvm::StringRef path) {
  std::string file = path.str();
  if (llvm::sys::fs::is_directory(path)) {
    llvm::SmallString<256> index(path), single(path);
    llvm::sys::path::append(index, "model.safetensors.index.json");
    llvm::sys::path::append(single, "model.safetensors");
    if (llvm::sys::fs::exists(index))
      file = index.str().str();
    else if (llvm::sys::fs::exists(single))
      file = single.str().str();
    else
      return llvm::createStringError(
          "'" + path +
          "' holds neither model.safetensors.index.json nor "
          "model.safetensors");
  }
  if (!llvm::StringRef(file).ends_with(".json"))
    return readSafetensorsIndex(file);

  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError("'" + file + "': " + what);
  };
  // An index names each tensor once: megabytes for the largest models.
  JSONLimits limits;
  limits.maxBytes = 64u << 20;
  llvm::Expected<llvm::json::Object> index =
      readBoundedJSONObject(file, limits);
  if (!index)
    return index.takeError();
  const llvm::json::Object *weightMap = index->getObject("weight_map");
  if (!weightMap)
    return fail("has no \"weight_map\" object");
  llvm::StringRef dir = llvm::sys::path::parent_path(file);
  llvm::StringMap<llvm::StringMap<SafetensorsTensor>> shards;
  llvm::StringMap<SafetensorsTensor> tensors;
  for (const auto &[key, value] : *weightMap) {
    std::string name = key.str();
    std::optional<llvm::StringRef> shard = value.getAsString();
    if (!shard || shard->empty() || shard->contains('/') ||
        shard->contains('\\'))
      return fail("tensor '" + name +
                  "': the weight_map must name a file beside the index");
    auto it = shards.find(*shard);
    if (it == shards.end()) {
      llvm::SmallString<256> shardPath(dir);
      llvm::sys::path::append(shardPath, *shard);
      if (!llvm::sys::fs::exists(shardPath))
        return fail("puts tensor '" + name + "' in '" + *shard +
                    "', which cannot be opened");
      llvm::Expected<llvm::StringMap<SafetensorsTensor>> header =
          readSafetensorsIndex(shardPath);
      if (!header)
        return header.takeError();
      it = shards.try_emplace(*shard, std::move(*header)).first;
    }
    auto entry = it->second.find(name);
    if (entry == it->second.end())
      return fail("puts tensor '" + name + "' in '" + *shard +
                  "', which has no such tensor");
    tensors[name] = entry->second;
  }
  return tensors;
}
