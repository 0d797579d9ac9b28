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
  /// Parameters replicated, named by the plan; activations untouched (HF
  /// replicate; local_params and all_reduce, which tp-opt's local-tensor
  /// programs satisfy as they are).
  Replicate,
};

llvm::StringRef stringifyParallelStyle(ParallelStyle style);

struct PlanEntry {
  /// Module FQN pattern, e.g. "model.layers.*.self_attn.q_proj".
  std::string pattern;
  ParallelStyle style;
  /// Rowwise with output_layouts=Shard(1): the partial output is
  /// reduce-scattered on the sequence instead of all-reduced.
  bool outputSequenceSharded = false;
  /// Rowwise with input_layouts=Replicate (HF rowwise_rep,
  /// rowwise_split_input): each rank slices its block of the input.
  bool inputReplicated = false;
  /// SequenceParallel that takes its input onto the sequence shards itself
  /// (transformers' sequence_parallel redistributes a replicated input).
  bool shardsInput = false;
  /// The style as the plan spells it (for diagnostics).
  std::string styleName = "";
  /// A JSON plan's "grad_reduction" ("mean" or "sum"; empty: derived by
  /// tp-partition from the backward): the replica class of the module's
  /// replicated parameters.
  std::string gradReduction = "";
  /// A JSON plan's "exclude": true: the module's replicated parameters are
  /// owned by each rank (owner-sharded elsewhere, e.g. expert tables), and
  /// neither broadcast at init nor synchronized.
  bool exclude = false;
  /// Set for a style tp-opt does not implement: why. Placing a module with
  /// it is an error naming the key and the style; a key that matches no
  /// module is only a warning.
  std::string unsupported = "";
};

struct Plan {
  std::string name;
  std::vector<PlanEntry> entries;
  /// Where the plan came from, for the report: built-in, a config file's
  /// base_model_tp_plan, transformers' class table, or a JSON file.
  std::string source = "";

  /// The first entry whose pattern matches the module FQN.
  const PlanEntry *lookup(llvm::StringRef module) const;
  /// Whether some activations are sequence-sharded (sequence parallelism).
  bool isSequenceParallel() const;
};

/// The JSON object in `path`; an error naming the file.
llvm::Expected<llvm::json::Object> readJSONObject(llvm::StringRef path);

/// `*` matches exactly one dot-separated component.
bool matchesModulePattern(llvm::StringRef pattern, llvm::StringRef module);

/// JSON objects are unordered: when two keys match one module, the one with
/// fewer wildcards (the more specific) comes first, deterministically.
bool isMoreSpecificPattern(llvm::StringRef a, llvm::StringRef b);

/// The dense decoder plan AutoModel's optimized plans share, under the
/// inner model `root` ("model", "model.language_model"): embedding
/// and o/down projections Rowwise, q/k/v and gate/up Colwise, `lmHead` for
/// lm_head; with `sequenceParallel`, `layerNorms` (and model.norm) run on
/// sequence shards and the Rowwise outputs reduce-scatter onto them.
Plan buildDecoderPlan(llvm::StringRef name, llvm::StringRef root,
                      ParallelStyle lmHead,
                      llvm::ArrayRef<llvm::StringRef> layerNorms,
                      bool sequenceParallel);

/// The optimized plan of an architecture (llama, qwen2, qwen3, gemma3,
/// nemotron_h) or the default base plan ("default"). With
/// `sequenceParallel`, AutoModel's SP form: embedding and o/down
/// projections reduce-scatter onto the sequence, the norms run on sequence
/// shards, and column-split projections gather the sequence back;
/// NemotronH has none (an error). `root` is the inner model's path:
/// "model", "model.language_model" (Gemma3 inside
/// Gemma3ForConditionalGeneration), or "backbone" (NemotronH's older remote
/// code).
llvm::Expected<Plan> getBuiltinPlan(llvm::StringRef name, llvm::StringRef root,
                                    bool sequenceParallel);

/// One entry of a plan as transformers writes it: module key, style name.
struct HFPlanKey {
  llvm::StringLiteral key;
  llvm::StringLiteral style;
};

/// The plans transformers declares for one model_type: its config class's
/// `base_model_tp_plan` (keys relative to the inner model) and its
/// causal-LM class's `_tp_plan` (lm_head). The table is compared with
/// transformers itself by tp-unittests (test/models/hf_tp_plans.json).
struct HFClassPlan {
  llvm::StringLiteral modelType;
  llvm::StringLiteral configClass;
  llvm::ArrayRef<HFPlanKey> basePlan;
  llvm::StringLiteral causalLMClass;
  llvm::ArrayRef<HFPlanKey> causalLMPlan;
};

/// The model_types whose transformers plans tp-opt knows.
llvm::ArrayRef<HFClassPlan> getHFClassPlans();
const HFClassPlan *lookupHFClassPlan(llvm::StringRef modelType);

/// The HF plan of a transformers `config.json`, resolved as transformers,
/// AutoModel and NeMo RL do (../shared/spec/tp-semantics.md 2.2): the
/// file's `base_model_tp_plan`, or when it has none the one transformers'
/// config class declares for its `model_type`; its keys re-prefixed with
/// `innerPrefix` (the inner model's path: "model", "backbone",
/// "model.language_model"); the causal-LM class's `_tp_plan` added
/// (lm_head column-split with sharded logits); a vocabulary-split embedding
/// added when no entry places it. Every transformers 5.23 style is either
/// translated or marked unsupported with the reason (an error only where
/// it places a module). An error names the file and the key.
llvm::Expected<Plan> loadHFPlan(llvm::StringRef configPath,
                                llvm::StringRef innerPrefix = "model");

/// A user's JSON plan: an object from module FQN globs (`*` matches one
/// path component) to a style string or to an object with "style" and the
/// optional "input_layouts", "output_layouts" ("replicate", "shard(-1)",
/// "shard(1)" for the sequence) and "use_local_output"; "sequence_parallel"
/// marks modules that run on sequence shards. Used verbatim (nothing added), as
/// a custom plan is in NeMo. An error names the file and the key.
llvm::Expected<Plan> loadJSONPlan(llvm::StringRef path);

} // namespace mlir::tp

#endif // TPOPT_PLAN_PLAN_H
