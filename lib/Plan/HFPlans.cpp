//===- HFPlans.cpp - transformers' tensor-parallel plans ------------------===//
//
// The plans transformers 5.23 declares for the model_types tp-opt accepts,
// and `--plan hf:config.json`: how a config's plan is resolved (as
// transformers, AutoModel and NeMo RL resolve it) and how each of
// transformers' style strings translates to tp-opt's placements
// (../shared/spec/tp-semantics.md 2.1, 2.2; docs/tp.md has the table).
//
//===----------------------------------------------------------------------===//

#include "tpopt/Plan/HFConfig.h"
#include "tpopt/Plan/Plan.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir::tp;
using llvm::StringRef;

namespace {

// Config classes' base_model_tp_plan (test/models/hf_tp_plans.json holds
// transformers' own, compared by tp-unittests).
constexpr HFPlanKey kDensePlan[] = {
    {"layers.*.self_attn.q_proj", "colwise"},
    {"layers.*.self_attn.k_proj", "colwise"},
    {"layers.*.self_attn.v_proj", "colwise"},
    {"layers.*.self_attn.o_proj", "rowwise"},
    {"layers.*.mlp.gate_proj", "colwise"},
    {"layers.*.mlp.up_proj", "colwise"},
    {"layers.*.mlp.down_proj", "rowwise"},
};
constexpr HFPlanKey kPerHeadNormPlan[] = {
    {"layers.*.self_attn.q_proj", "colwise"},
    {"layers.*.self_attn.k_proj", "colwise"},
    {"layers.*.self_attn.v_proj", "colwise"},
    {"layers.*.self_attn.q_norm", "replicated_with_grad_allreduce"},
    {"layers.*.self_attn.k_norm", "replicated_with_grad_allreduce"},
    {"layers.*.self_attn.o_proj", "rowwise"},
    {"layers.*.mlp.gate_proj", "colwise"},
    {"layers.*.mlp.up_proj", "colwise"},
    {"layers.*.mlp.down_proj", "rowwise"},
};
constexpr HFPlanKey kNemotronHPlan[] = {
    {"embeddings", "embedding_rowwise"},
    {"layers.*.mixer.experts.up_proj", "colwise"},
    {"layers.*.mixer.experts.down_proj", "rowwise"},
    {"layers.*.mixer.experts", "moe_tp_experts"},
};
constexpr HFPlanKey kLMHeadGathered[] = {{"lm_head", "colwise_gather_output"}};

const HFClassPlan kHFClassPlans[] = {
    {"llama", "LlamaConfig", kDensePlan, "LlamaForCausalLM", kLMHeadGathered},
    {"mistral", "MistralConfig", kDensePlan, "MistralForCausalLM",
     kLMHeadGathered},
    {"qwen2", "Qwen2Config", kDensePlan, "Qwen2ForCausalLM", kLMHeadGathered},
    {"qwen3", "Qwen3Config", kPerHeadNormPlan, "Qwen3ForCausalLM",
     kLMHeadGathered},
    // Gemma3Config (multimodal) declares none; its text_config does.
    {"gemma3", "Gemma3TextConfig", kPerHeadNormPlan,
     "Gemma3ForConditionalGeneration", kLMHeadGathered},
    {"gemma3_text", "Gemma3TextConfig", kPerHeadNormPlan, "Gemma3ForCausalLM",
     kLMHeadGathered},
    {"nemotron_h",
     "NemotronHConfig",
     kNemotronHPlan,
     "NemotronHForCausalLM",
     {}},
};

/// How one transformers style places a module: `entry` filled, or the
/// reason tp-opt does not implement it (empty for an unknown style).
struct Translation {
  bool known = true;
  std::string unsupported;
};

Translation translateStyle(StringRef style, bool isLMHead, PlanEntry &entry) {
  using S = ParallelStyle;
  entry.styleName = style.str();
  Translation t;
  if (style == "colwise") {
    entry.style = S::Colwise;
  } else if (style == "colwise_rep" || style == "colwise_gather_output") {
    // lm_head keeps vocabulary-sharded logits (AM and RL rewrite it so);
    // the program gathers them at its end, the same values.
    entry.style = isLMHead ? S::Colwise : S::ColwiseGatherOutput;
  } else if (style == "rowwise") {
    entry.style = S::Rowwise;
  } else if (style == "rowwise_rep" || style == "rowwise_split_input") {
    entry.style = S::Rowwise;
    entry.inputReplicated = true;
  } else if (style == "embedding_rowwise") {
    entry.style = S::Rowwise;
  } else if (style == "embedding_colwise") {
    // Hidden features split, lookups gathered back (out=Replicate).
    entry.style = S::ColwiseGatherOutput;
  } else if (style == "replicated_with_grad_allreduce") {
    entry.style = S::ReplicatedWithGradAllreduce;
  } else if (style == "sequence_parallel") {
    entry.style = S::SequenceParallel;
    entry.shardsInput = true;
  } else if (style == "replicate" || style == "local_params" ||
             style == "all_reduce") {
    // replicate: every rank keeps the whole parameter. local_params: the
    // module runs on local tensors, which is all a rank program holds.
    // all_reduce: completes a module's partial output, which tp-opt's
    // row-split modules already do at their boundary.
    entry.style = S::Replicate;
  } else if (style == "local_colwise") {
    entry.style = S::Colwise; // transformers 4.x: Colwise on local tensors
  } else if (style == "local_rowwise") {
    entry.style = S::Rowwise;
  } else if (style == "packed_colwise" || style == "packed_rowwise" ||
             style == "local_packed_rowwise") {
    t.unsupported = "each rank's block of every part of a fused projection "
                    "(gate_up_proj, qkv_proj); tp-opt splits one as "
                    "colwise_gather_output";
  } else if (style == "moe_tp_experts" || style == "moe_identity_expert" ||
             style == "ep_dispatch_experts" || style == "ep_router" ||
             style == "grouped_gemm" || style.starts_with("megamoe_")) {
    t.unsupported = "transformers' MoE experts";
  } else if (style == "mla_kv_a_proj") {
    t.unsupported = "multi-head latent attention";
  } else if (style == "local" || style == "gather") {
    t.unsupported = "transformers 4.x's IsolatedParallel / GatherParallel";
  } else {
    t.known = false;
  }
  if (!t.unsupported.empty())
    entry.unsupported = t.unsupported;
  return t;
}

} // namespace

llvm::ArrayRef<HFClassPlan> mlir::tp::getHFClassPlans() {
  return kHFClassPlans;
}

const HFClassPlan *mlir::tp::lookupHFClassPlan(StringRef modelType) {
  for (const HFClassPlan &plan : kHFClassPlans)
    if (plan.modelType == modelType)
      return &plan;
  return nullptr;
}

llvm::Expected<Plan> mlir::tp::loadHFPlan(StringRef configPath,
                                          StringRef innerPrefix) {
  llvm::Expected<llvm::json::Object> config = readHFConfig(configPath);
  if (!config)
    return config.takeError();
  auto fail = [&](const llvm::Twine &what) {
    return llvm::createStringError("'" + configPath + "': " + what);
  };
  StringRef modelType = config->getString("model_type").value_or("");
  const HFClassPlan *classPlan = lookupHFClassPlan(modelType);

  std::vector<std::pair<std::string, std::string>> keys;
  std::string source;
  if (const llvm::json::Value *value = config->get("base_model_tp_plan")) {
    const llvm::json::Object *plan = value->getAsObject();
    if (!plan)
      return fail("base_model_tp_plan is not an object");
    for (const auto &[key, style] : *plan) {
      std::optional<StringRef> s = style.getAsString();
      if (!s)
        return fail("plan key '" + key.str() +
                    "' does not map to a style string");
      keys.push_back({key.str(), s->str()});
    }
    source = "transformers plan: the base_model_tp_plan of '" +
             configPath.str() + "'";
  } else {
    if (!classPlan || classPlan->basePlan.empty())
      return fail("has no base_model_tp_plan and transformers declares none "
                  "for model_type '" +
                  (modelType.empty() ? StringRef("<none>") : modelType) + "'");
    for (const HFPlanKey &k : classPlan->basePlan)
      keys.push_back({k.key.str(), k.style.str()});
    source = "transformers plan: transformers 5.23's " +
             classPlan->configClass.str() +
             ".base_model_tp_plan (model_type '" + modelType.str() + "'; '" +
             configPath.str() + "' declares none)";
  }
  source += ", keys under '" + innerPrefix.str() + ".'";
  for (std::pair<std::string, std::string> &k : keys)
    k.first = innerPrefix.str() + "." + k.first;
  // The causal-LM class's own plan (lm_head), at the top level.
  if (classPlan) {
    for (const HFPlanKey &k : classPlan->causalLMPlan)
      keys.push_back({k.key.str(), k.style.str()});
    if (!classPlan->causalLMPlan.empty())
      source += ", with " + classPlan->causalLMClass.str() + "._tp_plan";
  } else {
    keys.push_back({"lm_head", "colwise_gather_output"});
    source += ", with lm_head column-split";
  }
  llvm::sort(keys, [](const auto &a, const auto &b) {
    return isMoreSpecificPattern(a.first, b.first);
  });

  Plan plan{"hf:" + configPath.str(), {}, std::move(source)};
  bool placesEmbedding = false;
  for (const auto &[key, style] : keys) {
    PlanEntry entry{key, ParallelStyle::Replicate};
    Translation t = translateStyle(style, key == "lm_head", entry);
    if (!t.known) {
      // Named as the file or table writes it.
      StringRef written = key;
      written.consume_front((innerPrefix + ".").str());
      return fail("plan key '" + written + "': unknown style '" + style +
                  "' (not a transformers 5.23 style)");
    }
    placesEmbedding |= StringRef(key).ends_with(".embed_tokens") ||
                       StringRef(style).starts_with("embedding_");
    plan.entries.push_back(std::move(entry));
  }
  // transformers' rule for a plan that leaves the embedding out: it is
  // vocabulary-split (rowwise_rep on an embedding).
  if (!placesEmbedding) {
    PlanEntry entry{innerPrefix.str() + ".embed_tokens",
                    ParallelStyle::Rowwise};
    entry.styleName = "embedding_rowwise";
    plan.entries.push_back(std::move(entry));
    plan.source += ", embed_tokens vocabulary-split";
  }
  return plan;
}
