//===- Architecture.h - the architectures tp-opt compiles -------*- C++ -*-===//
//
// The architecture registry: for each supported decoder LM, its name, the
// HuggingFace model_types that are it, how raising recognises it from what
// the graph shows, its built-in TP plan (and SP form), and what it supports.
// Raising, plans, `tpc --arch` and `--hf-config` checks all read it; adding
// an architecture is one entry in lib/Plan/Architectures.cpp (see
// docs/development.md).
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PLAN_ARCHITECTURE_H
#define TPOPT_PLAN_ARCHITECTURE_H

#include "tpopt/Plan/Plan.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace mlir::tp {

/// What raising saw in a graph that tells architectures apart.
struct ArchitectureTraits {
  /// Mamba2 mixers (hybrid SSM models).
  bool mamba = false;
  /// Parameters under `backbone.` (NemotronH's remote-code names).
  bool backboneNames = false;
  /// RMS norms with a weight offset (Gemma's `1 + w`).
  bool normWeightOffset = false;
  /// The embedding scaled by sqrt(hidden) (Gemma).
  bool embeddingScale = false;
  /// Per-head q/k norms.
  bool qkNorm = false;
  /// A bias on the query projection.
  bool attentionBias = false;
  /// A bias on the attention output projection (Llama's attention_bias
  /// biases o_proj too; Qwen2's q/k/v only).
  bool outputProjectionBias = false;
};

struct Architecture {
  /// The name tp-opt uses (`tp.config.architecture`, `--arch`, plan names).
  llvm::StringLiteral name;
  /// The HF `model_type`s of this architecture (config.json).
  llvm::ArrayRef<llvm::StringLiteral> modelTypes;
  /// Whether a graph with `traits` is this architecture. The registry is
  /// tried in order, most specific first; the last entry accepts any graph.
  bool (*recognizes)(const ArchitectureTraits &traits);
  /// The built-in plan (AutoModel's optimized plan), or its sequence-
  /// parallel form; `root` is the block container ("model" or "backbone").
  Plan (*builtinPlan)(llvm::StringRef root, bool sequenceParallel);
  /// Why it has no sequence-parallel plan; empty when it has one.
  llvm::StringLiteral noSequenceParallel;
  /// Whether its graphs may tie lm_head to the embedding, and may have
  /// per-head q/k norms (raising refuses a graph that shows what its
  /// architecture does not have).
  bool tiedEmbeddings;
  bool perHeadNorms;
  /// transformers' default pad_token_id of its config (-1: none): the
  /// embedding's padding_idx, whose row PyTorch never trains, when its
  /// modeling code passes it (`embeddingPaddingIdx`).
  int64_t defaultPadTokenId;
  bool embeddingPaddingIdx = true;
  /// Whether its RMS norms scale by `1 + w` (Gemma): a graph whose norms
  /// have no offset was exported with `1 + w` folded into the weights.
  bool offsetNorms = false;
};

/// Every supported architecture, in recognition order.
llvm::ArrayRef<Architecture> getArchitectures();

/// The architecture named `name`; null if none.
const Architecture *lookupArchitecture(llvm::StringRef name);

/// The architecture whose HF model_types include `modelType`; null if none.
const Architecture *lookupArchitectureByModelType(llvm::StringRef modelType);

/// The first architecture that recognises `traits`.
const Architecture &recognizeArchitecture(const ArchitectureTraits &traits);

/// Why a HF `model_type` is refused: known architectures say what they
/// need that tp-opt lacks ("phi3 is not supported: its fused qkv_proj and
/// gate_up_proj are not raised ..."); others that tp-opt does not compile
/// them. Empty for a model_type of a supported architecture.
std::string whyModelTypeIsUnsupported(llvm::StringRef modelType);

/// "llama, qwen2, qwen3, gemma3, nemotron_h": for help texts and errors.
std::string getArchitectureNames();

} // namespace mlir::tp

#endif // TPOPT_PLAN_ARCHITECTURE_H
