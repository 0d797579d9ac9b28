//===- FuzzPlans.cpp - the readers of plans, adapters and safetensors -----===//
//
// One input is written to a file and read as a JSON plan, an HF config
// (base_model_tp_plan, and the typed fields --hf-config reads), a PEFT
// adapter_config.json and a safetensors header: the readers take paths,
// as users give them. Seeds: test models' configs, test/e2e/Inputs/*.json
// and fuzz/corpus/plans/ (hostile nesting, sizes and types).
//
//===----------------------------------------------------------------------===//

#include "tpopt/Plan/HFConfig.h"
#include "tpopt/Plan/LoRAAdapter.h"
#include "tpopt/Plan/Plan.h"
#include "tpopt/Support/Safetensors.h"

#include <cstdio>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static std::string path =
      "/tmp/tpopt-fuzz-plans-" + std::to_string(getpid()) + ".json";
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  llvm::consumeError(mlir::tp::loadJSONPlan(path).takeError());
  llvm::consumeError(mlir::tp::loadHFPlan(path).takeError());
  llvm::consumeError(mlir::tp::readHFConfig(path).takeError());
  llvm::consumeError(mlir::tp::readPEFTConfig(path).takeError());
  llvm::consumeError(mlir::tp::readSafetensorsIndex(path).takeError());
  return 0;
}
