//===- Plan.h - tensor-parallel plans as data -------------------*- C++ -*-===//
//
// A plan maps module FQN patterns (`*` matches one path component) to the
// parallel style of the module, as NeMo AutoModel's optimized plans do
// (../shared/spec/tp-semantics.md section 4).
//
//===----------------------------------------------------------------------===//

#ifndef TPOPT_PLAN_PLAN_H
#define TPOPT_PLAN_PLAN_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::tp {

enum class ParallelStyle {
  /// Linear: weight and bias split on the output features (dim 0); the
  /// output stays sharded on its last dimension.
  Colwise,
  /// Colwise whose output is gathered back (HF colwise_rep / lm_head C(out=R)).
  ColwiseGatherOutput,
  /// Linear: weight split on the input features (dim 1), bias replicated;
  /// the partial output is all-reduced. Embedding: vocabulary split (dim 0),
  /// masked lookup, partial sum all-reduced.
  Rowwise,
  /// Parameters replicated (gradients partial over the sequence shards);
  /// activations sharded on the sequence (dim 1).
  SequenceParallel,
  /// Parameters replicated with partial gradients, summed over the group
  /// (HF replicated_with_grad_allreduce: per-head q/k norms).
  ReplicatedWithGradAllreduce,
};

llvm::StringRef stringifyParallelStyle(ParallelStyle style);

struct PlanEntry {
  /// Module FQN pattern, e.g. "model.layers.*.self_attn.q_proj".
  std::string pattern;
  ParallelStyle style;
  /// Rowwise with output_layouts=Shard(1): the partial output is
  /// reduce-scattered on the sequence instead of all-reduced.
  bool outputSequenceSharded = false;
};

struct Plan {
  std::string name;
  std::vector<PlanEntry> entries;

  /// The first entry whose pattern matches the module FQN.
  const PlanEntry *lookup(llvm::StringRef module) const;
  /// Whether some activations are sequence-sharded (sequence parallelism).
  bool isSequenceParallel() const;
};

/// The JSON object in `path`; an error naming the file.
llvm::Expected<llvm::json::Object> readJSONObject(llvm::StringRef path);

/// `*` matches exactly one dot-separated component.
bool matchesModulePattern(llvm::StringRef pattern, llvm::StringRef module);

/// The dense decoder plan AutoModel's optimized plans share: embedding
/// and o/down projections Rowwise, q/k/v and gate/up Colwise, `lmHead` for
/// lm_head; with `sequenceParallel`, `layerNorms` (and model.norm) run on
/// sequence shards and the Rowwise outputs reduce-scatter onto them.
Plan buildDecoderPlan(llvm::StringRef name, ParallelStyle lmHead,
                      llvm::ArrayRef<llvm::StringRef> layerNorms,
                      bool sequenceParallel);

/// The optimized plan of an architecture (llama, qwen2, qwen3, gemma3,
/// nemotron_h) or the default base plan ("default"). With
/// `sequenceParallel`, AutoModel's SP form: embedding and o/down
/// projections reduce-scatter onto the sequence, the norms run on sequence
/// shards, and column-split projections gather the sequence back;
/// NemotronH has none (an error). `root` is NemotronH's block
/// container: "model" in transformers 5, "backbone" in the older remote
/// code.
llvm::Expected<Plan> getBuiltinPlan(llvm::StringRef name, llvm::StringRef root,
                                    bool sequenceParallel);

/// The HF plan of a transformers `config.json`: its `base_model_tp_plan`,
/// or when it has none, the plan transformers' class declares for its
/// `model_type` (llama, qwen2, qwen3, gemma3/gemma3_text). Keys are relative
/// to the inner model and get the `model.` prefix; `model.embed_tokens` is
/// added as the vocabulary-split embedding when absent and `lm_head` is
/// column-split with sharded logits (../shared/spec/tp-semantics.md 2.2).
/// An error names the file and the key.
llvm::Expected<Plan> loadHFPlan(llvm::StringRef configPath);

/// A user's JSON plan: an object from module FQN globs (`*` matches one
/// path component) to a style string or to an object with "style" and the
/// optional "input_layouts", "output_layouts" ("replicate", "shard(-1)",
/// "shard(1)" for the sequence) and "use_local_output"; "sequence_parallel"
/// marks modules that run on sequence shards. Used verbatim (nothing added), as
/// a custom plan is in NeMo. An error names the file and the key.
llvm::Expected<Plan> loadJSONPlan(llvm::StringRef path);

} // namespace mlir::tp

#endif // TPOPT_PLAN_PLAN_H
