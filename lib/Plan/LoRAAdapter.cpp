//===- LoRAAdapter.cpp - the header of a safetensors file
//------------------===//

#include "tpopt/Plan/LoRAAdapter.h"
#include "tpopt/Plan/Plan.h"

#include "llvm/Support/Endian.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

using namespace mlir::tp;

std::optional<llvm::StringMap<AdapterTensor>>
mlir::tp::readSafetensorsIndex(llvm::StringRef path, std::string &error) {
  auto fail = [&](const llvm::Twine &what) {
    error = ("'" + path + "': " + what).str();
    return std::nullopt;
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
  auto header = llvm::MemoryBuffer::getFileSlice(path, headerSize, 8);
  if (!header)
    return fail("cannot read the header: " + header.getError().message());
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*header)->getBuffer());
  if (!json)
    return fail("header at offset 8 is not JSON: " +
                llvm::toString(json.takeError()));
  const llvm::json::Object *object = json->getAsObject();
  if (!object)
    return fail("header at offset 8 is not a JSON object");

  uint64_t dataStart = 8 + headerSize;
  llvm::StringMap<AdapterTensor> tensors;
  for (const auto &[name, value] : *object) {
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
    AdapterTensor t;
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

const llvm::StringMapEntry<AdapterTensor> *
mlir::tp::findLoRAFactor(const llvm::StringMap<AdapterTensor> &adapter,
                         llvm::StringRef module, llvm::StringRef factor) {
  std::string bare = (module + "." + factor + ".weight").str();
  for (const std::string &key : {"base_model.model." + bare, bare}) {
    auto it = adapter.find(key);
    if (it != adapter.end())
      return &*it;
  }
  return nullptr;
}

std::optional<LoRAConfig> mlir::tp::readPEFTConfig(llvm::StringRef path,
                                                   std::string &error) {
  std::optional<llvm::json::Object> json = readJSONObject(path, error);
  if (!json)
    return std::nullopt;
  auto fail = [&](const llvm::Twine &what) {
    error = ("'" + path + "': " + what).str();
    return std::nullopt;
  };
  if (std::optional<llvm::StringRef> type = json->getString("peft_type"))
    if (*type != "LORA")
      return fail("peft_type is '" + *type + "', not LORA");
  if (json->getBoolean("use_dora").value_or(false))
    return fail("use_dora: DoRA is not supported");
  LoRAConfig config;
  std::optional<int64_t> rank = json->getInteger("r");
  std::optional<double> alpha = json->getNumber("lora_alpha");
  if (!rank || *rank < 1)
    return fail("r must be a positive integer");
  if (!alpha)
    return fail("lora_alpha must be a number");
  config.rank = *rank;
  config.alpha = *alpha;
  const llvm::json::Value *targets = json->get("target_modules");
  if (!targets)
    return fail("no target_modules");
  if (std::optional<llvm::StringRef> text = targets->getAsString()) {
    if (*text != "all-linear")
      return fail("target_modules '" + *text +
                  "' is a regular expression; give a list of module names");
    config.targets = "all-linear";
  } else if (const llvm::json::Array *names = targets->getAsArray()) {
    for (const llvm::json::Value &name : *names) {
      std::optional<llvm::StringRef> text = name.getAsString();
      if (!text)
        return fail("target_modules holds a non-string");
      config.targets += (config.targets.empty() ? "" : ",") + text->str();
    }
    if (config.targets.empty())
      return fail("target_modules is empty");
  } else {
    return fail("target_modules must be a list of module names or "
                "\"all-linear\"");
  }
  return config;
}
