//===- LoRAAdapter.cpp - PEFT LoRA adapters -------------------------------===//

#include "tpopt/Plan/LoRAAdapter.h"
#include "tpopt/Plan/Plan.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"

using namespace mlir::tp;

const llvm::StringMapEntry<SafetensorsTensor> *
mlir::tp::findLoRAFactor(const llvm::StringMap<SafetensorsTensor> &adapter,
                         llvm::StringRef module, llvm::StringRef factor) {
  std::string bare = (module + "." + factor + ".weight").str();
  for (const std::string &key : {"base_model.model." + bare, bare}) {
    auto it = adapter.find(key);
    if (it != adapter.end())
      return &*it;
  }
  return nullptr;
}

llvm::Expected<LoRAConfig> mlir::tp::readPEFTConfig(llvm::StringRef path) {
  llvm::Expected<llvm::json::Object> json = readJSONObject(path);
  if (!json)
    return json.takeError();
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError("'" + path + "': " + what);
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
