//===- Plan.cpp - the built-in tensor-parallel plans ----------------------===//

#include "tpopt/Plan/Plan.h"
#include "tpopt/Plan/Architecture.h"
#include "tpopt/Support/BoundedJSON.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/JSON.h"

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
  case ParallelStyle::ReplicatedWithGradAllreduce:
    return "replicated_with_grad_allreduce";
  case ParallelStyle::Replicate:
    return "replicate";
  }
  return "?";
}

llvm::Expected<llvm::json::Object>
mlir::tp::readJSONObject(llvm::StringRef path) {
  return readBoundedJSONObject(path);
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

bool Plan::isSequenceParallel() const {
  return llvm::any_of(entries, [](const PlanEntry &e) {
    return e.outputSequenceSharded ||
           e.style == ParallelStyle::SequenceParallel;
  });
}

Plan mlir::tp::buildDecoderPlan(llvm::StringRef name, llvm::StringRef root,
                                ParallelStyle lmHead,
                                llvm::ArrayRef<llvm::StringRef> layerNorms,
                                bool sp) {
  using S = ParallelStyle;
  // The decoder body every dense plan shares (AM sections 4.1-4.3, 4.6).
  // Under SP the embedding and the row-split projections reduce-scatter
  // onto the sequence and the norms run on sequence shards; column-split
  // projections (lm_head's C(in=S(1)) included) gather it back.
  // Llama: plain Rowwise embedding; Qwen and Gemma3: VocabParallelEmbedding,
  // the same placement (vocabulary split, partial sums reduced).
  std::string layers = root.str() + ".layers.*.";
  std::vector<PlanEntry> entries{
      {root.str() + ".embed_tokens", S::Rowwise, sp}};
  for (const char *proj : {"q_proj", "k_proj", "v_proj"})
    entries.push_back({layers + "self_attn." + proj, S::Colwise});
  entries.push_back({layers + "self_attn.o_proj", S::Rowwise, sp});
  entries.push_back({layers + "mlp.gate_proj", S::Colwise});
  entries.push_back({layers + "mlp.up_proj", S::Colwise});
  entries.push_back({layers + "mlp.down_proj", S::Rowwise, sp});
  if (sp) {
    for (llvm::StringRef norm : layerNorms)
      entries.push_back({layers + norm.str(), S::SequenceParallel});
    entries.push_back({root.str() + ".norm", S::SequenceParallel});
  }
  entries.push_back({"lm_head", lmHead});
  std::string source = "built-in plan '" + name.str() +
                       "' (NeMo AutoModel's optimized plan" +
                       (sp ? ", sequence-parallel form" : "") + ")";
  return Plan{name.str(), std::move(entries), std::move(source)};
}

llvm::Expected<Plan> mlir::tp::getBuiltinPlan(llvm::StringRef name,
                                              llvm::StringRef root, bool sp) {
  if (name == "default")
    return buildDecoderPlan("default", root, ParallelStyle::ColwiseGatherOutput,
                            {"input_layernorm", "post_attention_layernorm"},
                            sp);
  if (const Architecture *arch = lookupArchitecture(name)) {
    if (sp && !arch->noSequenceParallel.empty())
      return llvm::createStringError(arch->noSequenceParallel);
    return arch->builtinPlan(root, sp);
  }
  return llvm::createStringError("no such plan (auto, " +
                                 getArchitectureNames() +
                                 ", default, hf:CONFIG.json, file:PLAN.json)");
}

bool mlir::tp::isMoreSpecificPattern(llvm::StringRef a, llvm::StringRef b) {
  return std::make_pair(llvm::count(a, '*'), a) <
         std::make_pair(llvm::count(b, '*'), b);
}

llvm::Expected<Plan> mlir::tp::loadJSONPlan(llvm::StringRef path) {
  llvm::Expected<llvm::json::Object> object = readJSONObject(path);
  if (!object)
    return object.takeError();
  if (object->empty())
    return llvm::createStringError("'" + path + "' is an empty plan");
  using S = ParallelStyle;
  Plan plan{"file:" + path.str(),
            {},
            "JSON plan '" + path.str() + "' (used verbatim)"};
  for (const auto &[keyRef, value] : *object) {
    std::string key = keyRef.str();
    auto fail = [&](const std::string &what) {
      return llvm::createStringError("'" + path + "': plan key '" + key +
                                     "': " + what);
    };
    std::string style, in, out, gradReduction;
    bool exclude = false;
    if (std::optional<llvm::StringRef> s = value.getAsString()) {
      style = s->str();
    } else if (const llvm::json::Object *o = value.getAsObject()) {
      for (const auto &[field, v] : *o) {
        if (field == "exclude") {
          std::optional<bool> flag = v.getAsBoolean();
          if (!flag)
            return fail("exclude must be true or false");
          exclude = *flag;
          continue;
        }
        if (field == "use_local_output") {
          // Local tensors or DTensors is a distinction of eager PyTorch; a
          // compiled rank program holds local tensors either way.
          if (!v.getAsBoolean())
            return fail("use_local_output must be true or false");
          continue;
        }
        std::optional<llvm::StringRef> text = v.getAsString();
        if (!text)
          return fail("'" + field.str() + "' must be a string");
        if (field == "style")
          style = text->str();
        else if (field == "input_layouts")
          in = text->str();
        else if (field == "output_layouts")
          out = text->str();
        else if (field == "grad_reduction")
          gradReduction = text->str();
        else
          return fail("unknown field '" + field.str() + "'");
      }
      if (!gradReduction.empty() && gradReduction != "mean" &&
          gradReduction != "sum")
        return fail("grad_reduction must be \"mean\" or \"sum\", got '" +
                    gradReduction + "'");
      // Only a gradient class or an exclusion: the module stays replicated.
      if (style.empty() && (!gradReduction.empty() || exclude))
        style = "replicate";
      if (exclude && !gradReduction.empty())
        return fail("an excluded module's parameters have no gradient class "
                    "(exclude and grad_reduction)");
    } else {
      return fail("expected a style string or an object");
    }
    for (const std::string *layout : {&in, &out})
      if (!layout->empty() && *layout != "replicate" &&
          *layout != "shard(-1)" && *layout != "shard(1)")
        return fail("layout '" + *layout +
                    "' is not supported (replicate, shard(-1), shard(1))");
    std::optional<S> translated;
    bool sequenceOut = false;
    if (style == "colwise" || style == "colwise_gather_output") {
      // A sequence-sharded input (shard(1)) is gathered back first.
      if (in == "shard(-1)")
        return fail("a colwise module takes a replicated or "
                    "sequence-sharded input");
      if (out == "shard(1)")
        return fail("a colwise module gives an output split on its last "
                    "dimension or replicated");
      bool gathered = style == "colwise_gather_output" || out == "replicate";
      translated = gathered ? S::ColwiseGatherOutput : S::Colwise;
    } else if (style == "rowwise") {
      if (out == "shard(-1)")
        return fail("a rowwise module gives a replicated or "
                    "sequence-sharded (shard(1)) output");
      if (in == "shard(1)")
        return fail("a rowwise module takes an input split on its last "
                    "dimension");
      sequenceOut = out == "shard(1)";
      translated = S::Rowwise;
    } else if (style == "replicated_with_grad_allreduce") {
      translated = S::ReplicatedWithGradAllreduce;
    } else if (style == "sequence_parallel") {
      translated = S::SequenceParallel;
    } else if (style == "replicate") {
      translated = S::Replicate;
    } else if (style.empty()) {
      return fail("no style");
    } else {
      return fail("unknown style '" + style +
                  "' (colwise, colwise_gather_output, rowwise, "
                  "replicated_with_grad_allreduce, sequence_parallel, "
                  "replicate)");
    }
    bool colwise =
        *translated == S::Colwise || *translated == S::ColwiseGatherOutput;
    if ((!gradReduction.empty() || exclude) && colwise)
      return fail("grad_reduction and exclude are for replicated parameters; "
                  "a colwise module's are split");
    PlanEntry entry{key, *translated, sequenceOut};
    entry.styleName = style;
    entry.gradReduction = gradReduction;
    entry.exclude = exclude;
    // RowwiseParallel(input_layouts=Replicate()): each rank takes its block
    // of the input (transformers' rowwise_split_input).
    entry.inputReplicated = *translated == S::Rowwise && in == "replicate";
    plan.entries.push_back(std::move(entry));
  }
  llvm::sort(plan.entries, [](const PlanEntry &a, const PlanEntry &b) {
    return isMoreSpecificPattern(a.pattern, b.pattern);
  });
  return plan;
}
