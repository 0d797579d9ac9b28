//===- CompileOptions.cpp - option combinations the pipeline refuses ------===//
//
// One check of TPCompileOptions for both front ends: `tpc` prints its
// message before importing, `tp-opt --tp-compile=...` while parsing the
// pipeline. Options are named as the flags tpc exposes them.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Pipeline/Pipeline.h"
#include "tpopt/Plan/Architecture.h"
#include "tpopt/Plan/HFConfig.h"
#include "tpopt/Plan/LoRAAdapter.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::tp;

static llvm::Error fail(const Twine &message) {
  return llvm::createStringError(message);
}

/// --lora-adapter DIR: PEFT's adapter_config.json is read (and refused
/// early, by field) here; the plan pass reads it again when it adds LoRA.
static llvm::Error checkLoRAAdapter(const TPCompileOptions &opts) {
  if (opts.loraRank.getNumOccurrences() || opts.loraAlpha.getNumOccurrences() ||
      opts.loraWeights.getNumOccurrences() ||
      opts.loraTargets.getNumOccurrences())
    return fail("--lora-adapter takes rank, alpha, targets and weights from "
                "the adapter; do not also give "
                "--lora-rank/--lora-alpha/--lora-weights/--lora-targets");
  SmallString<256> config(opts.loraAdapter);
  llvm::sys::path::append(config, "adapter_config.json");
  if (llvm::Expected<LoRAConfig> lora = readPEFTConfig(config); !lora)
    return fail("--lora-adapter: " + llvm::toString(lora.takeError()));
  return llvm::Error::success();
}

/// An architecture tp-opt does not compile is named before raising fails
/// somewhere inside it.
static llvm::Error checkHFConfig(const TPCompileOptions &opts) {
  llvm::Expected<llvm::json::Object> config = readHFConfig(opts.hfConfig);
  if (!config)
    return fail("--hf-config: " + llvm::toString(config.takeError()));
  if (std::optional<StringRef> type = config->getString("model_type")) {
    std::string why = whyModelTypeIsUnsupported(*type);
    if (!why.empty())
      return fail("--hf-config '" + opts.hfConfig + "': " + why);
  }
  return llvm::Error::success();
}

/// What the training options need.
static llvm::Error checkTrainingOptions(const TPCompileOptions &opts) {
  if (opts.optimizer != "adamw" && opts.optimizer != "sgd")
    return fail("--optimizer must be adamw or sgd, got '" + opts.optimizer +
                "'");
  if (opts.optimizer.getNumOccurrences() && !opts.train)
    return fail("--optimizer needs --train");
  if (opts.bucketMib.getNumOccurrences() && !opts.train)
    return fail("--bucket-mib needs --train");
  if (opts.masterWeights != "auto" && opts.masterWeights != "f32" &&
      opts.masterWeights != "none")
    return fail("--master-weights must be auto, f32 or none, got '" +
                opts.masterWeights + "'");
  if (opts.masterWeights.getNumOccurrences() && !opts.train)
    return fail("--master-weights needs --train");
  if (opts.recompute && !opts.train)
    return fail("--recompute needs --train");
  if (opts.dp < 1)
    return fail("--dp must be at least 1, got " + Twine(opts.dp));
  if (opts.dp > 1 && !opts.train)
    return fail("--dp needs --train (data parallelism splits a training "
                "batch)");
  if (opts.zero.getNumOccurrences() && !opts.train)
    return fail("--zero needs --train");
  if (opts.zero < 0 || opts.zero > 3)
    return fail("--zero must be 0, 1, 2 or 3, got " + Twine(opts.zero));
  if (opts.zero > 0 && opts.dp < 2)
    return fail("--zero " + Twine(opts.zero) +
                " shards the optimizer state over data-parallel ranks: it "
                "needs --dp 2 or more");
  if (opts.streamBlockMib.getNumOccurrences() && opts.zero != 3)
    return fail("--stream-block-mib needs --zero 3");
  if (!(opts.streamBlockMib > 0))
    return fail("--stream-block-mib must be positive, got " +
                std::to_string(opts.streamBlockMib));
  if (!(opts.bucketMib > 0))
    return fail("--bucket-mib must be positive, got " +
                std::to_string(opts.bucketMib));
  return llvm::Error::success();
}

llvm::Error mlir::tp::checkTPCompileOptions(const TPCompileOptions &opts) {
  if (opts.tp < 1)
    return fail("--tp must be at least 1");
  // AutoModel raises the same: async-TP fuses the matmuls with the
  // sequence all-gathers and reduce-scatters.
  if (opts.asyncTP && !opts.sp)
    return fail("--async-tp requires sequence parallelism (--sp)");
  if (opts.sp && opts.tp < 2)
    return fail("--sp shards the sequence over the tensor-parallel ranks: it "
                "needs --tp 2 or more");
  if (!opts.loraAdapter.empty())
    if (llvm::Error e = checkLoRAAdapter(opts))
      return e;
  if (!opts.hfConfig.empty())
    if (llvm::Error e = checkHFConfig(opts))
      return e;
  if (opts.dtype != "auto" && opts.dtype != "f32" && opts.dtype != "bf16" &&
      opts.dtype != "f16")
    return fail("--dtype must be auto, f32, bf16 or f16, got '" + opts.dtype +
                "'");
  if (llvm::Error e = checkTrainingOptions(opts))
    return e;
  if (opts.loraRank < 0 || (opts.loraRank > 0) != !opts.loraWeights.empty())
    return fail("LoRA needs both --lora-rank R (positive) and --lora-weights "
                "adapter_model.safetensors");
  return llvm::Error::success();
}
