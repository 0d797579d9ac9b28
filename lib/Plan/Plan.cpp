//===- Plan.cpp - the built-in tensor-parallel plans ----------------------===//

#include "tpopt/Plan/Plan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir::tp;

llvm::StringRef mlir::tp::stringifyParallelStyle(ParallelStyle style) {
  switch (style) {
  case ParallelStyle::Colwise:
    return "colwise";
  case ParallelStyle::ColwiseGatherOutput:
    return "colwise_gather_output";
  case ParallelStyle::Rowwise:
    return "rowwise";
  case ParallelStyle::SequenceParallel:
    return "sequence_parallel";
  }
  return "?";
}

bool mlir::tp::matchesModulePattern(llvm::StringRef pattern,
                                    llvm::StringRef module) {
  llvm::SmallVector<llvm::StringRef> p, m;
  pattern.split(p, '.');
  module.split(m, '.');
  if (p.size() != m.size())
    return false;
  for (auto [a, b] : llvm::zip(p, m))
    if (a != "*" && a != b)
      return false;
  return true;
}

const PlanEntry *Plan::lookup(llvm::StringRef module) const {
  for (const PlanEntry &entry : entries)
    if (matchesModulePattern(entry.pattern, module))
      return &entry;
  return nullptr;
}

std::optional<Plan> mlir::tp::getBuiltinPlan(llvm::StringRef name,
                                             llvm::StringRef root) {
  using S = ParallelStyle;
  // The decoder body every dense plan shares (AM sections 4.1-4.3, 4.6).
  auto dense = [](std::vector<PlanEntry> head, S lmHead) {
    std::vector<PlanEntry> entries = std::move(head);
    for (const char *proj : {"q_proj", "k_proj", "v_proj"})
      entries.push_back({std::string("model.layers.*.self_attn.") + proj,
                         S::Colwise});
    entries.push_back({"model.layers.*.self_attn.o_proj", S::Rowwise});
    entries.push_back({"model.layers.*.mlp.gate_proj", S::Colwise});
    entries.push_back({"model.layers.*.mlp.up_proj", S::Colwise});
    entries.push_back({"model.layers.*.mlp.down_proj", S::Rowwise});
    entries.push_back({"lm_head", lmHead});
    return entries;
  };
  if (name == "llama" || name == "qwen2" || name == "qwen3" ||
      name == "gemma3")
    // Llama: plain Rowwise embedding; Qwen and Gemma3: VocabParallelEmbedding,
    // the same placement (vocabulary split, partial sums reduced). lm_head
    // keeps vocab-sharded logits (C(out=S(-1))); tpc gathers them.
    return Plan{name.str(),
                dense({{"model.embed_tokens", S::Rowwise}}, S::Colwise)};
  if (name == "default")
    return Plan{"default", dense({{"model.embed_tokens", S::Rowwise}},
                                 S::ColwiseGatherOutput)};
  if (name == "nemotron_h")
    // lm_head and the MLP blocks only; Mamba, attention, embeddings and
    // norms stay replicated (section 4.5).
    return Plan{"nemotron_h",
                {{"lm_head", S::Colwise},
                 {root.str() + ".layers.*.mixer.up_proj", S::Colwise},
                 {root.str() + ".layers.*.mixer.down_proj", S::Rowwise}}};
  return std::nullopt;
}
