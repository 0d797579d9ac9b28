//===- Architectures.cpp - the architectures tp-opt compiles --------------===//
//
// The registry (include/tpopt/Plan/Architecture.h). Each entry says how
// raising recognises the architecture and which plan AutoModel applies to
// it (../shared/spec/tp-semantics.md section 4).
//
//===----------------------------------------------------------------------===//

#include "tpopt/Plan/Architecture.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir::tp;
using llvm::StringLiteral;
using llvm::StringRef;

namespace {

constexpr StringRef kLlamaNorms[] = {"input_layernorm",
                                     "post_attention_layernorm"};
constexpr StringRef kGemmaNorms[] = {
    "input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
    "post_feedforward_layernorm"};

// lm_head keeps vocab-sharded logits (C(out=S(-1))); the partitioned
// program gathers them.
Plan llamaPlan(StringRef root, bool sp) {
  return buildDecoderPlan("llama", root, ParallelStyle::Colwise, kLlamaNorms,
                          sp);
}
Plan qwen2Plan(StringRef root, bool sp) {
  return buildDecoderPlan("qwen2", root, ParallelStyle::Colwise, kLlamaNorms,
                          sp);
}
Plan qwen3Plan(StringRef root, bool sp) {
  return buildDecoderPlan("qwen3", root, ParallelStyle::Colwise, kLlamaNorms,
                          sp);
}
Plan gemma3Plan(StringRef root, bool sp) {
  return buildDecoderPlan("gemma3", root, ParallelStyle::Colwise, kGemmaNorms,
                          sp);
}

Plan nemotronHPlan(StringRef root, bool) {
  // lm_head and the MLP blocks only; Mamba, attention, embeddings and
  // norms stay replicated (section 4.5).
  using S = ParallelStyle;
  return Plan{"nemotron_h",
              {{"lm_head", S::Colwise},
               {root.str() + ".layers.*.mixer.up_proj", S::Colwise},
               {root.str() + ".layers.*.mixer.down_proj", S::Rowwise}},
              "built-in plan 'nemotron_h' (NeMo AutoModel's "
              "NemotronHParallelizationStrategy)"};
}

constexpr StringLiteral kNemotronHTypes[] = {"nemotron_h"};
constexpr StringLiteral kGemma3Types[] = {"gemma3", "gemma3_text"};
constexpr StringLiteral kQwen3Types[] = {"qwen3"};
constexpr StringLiteral kQwen2Types[] = {"qwen2"};
// Mistral is a Llama decoder (a sliding window when its config sets one).
constexpr StringLiteral kLlamaTypes[] = {"llama", "mistral"};

// Most specific first: Mamba layers or `backbone.` names are NemotronH;
// Gemma's offset norms or scaled embedding; per-head q/k norms are Qwen3;
// a query bias without an output-projection bias is Qwen2 (Llama's
// attention_bias biases o_proj too); any other decoder is Llama.
const Architecture kArchitectures[] = {
    {"nemotron_h", kNemotronHTypes,
     [](const ArchitectureTraits &t) { return t.mamba || t.backboneNames; },
     nemotronHPlan, /*noSequenceParallel=*/
     "NemotronH does not support sequence parallelism (its Mamba mixers run "
     "on whole sequences)",
     /*tiedEmbeddings=*/true,
     /*perHeadNorms=*/false, /*defaultPadTokenId=*/0,
     /*embeddingPaddingIdx=*/false},
    {"gemma3", kGemma3Types,
     [](const ArchitectureTraits &t) {
       return t.normWeightOffset || t.embeddingScale;
     },
     gemma3Plan, /*noSequenceParallel=*/"", /*tiedEmbeddings=*/true,
     /*perHeadNorms=*/true, /*defaultPadTokenId=*/0,
     /*embeddingPaddingIdx=*/true, /*offsetNorms=*/true},
    {"qwen3", kQwen3Types, [](const ArchitectureTraits &t) { return t.qkNorm; },
     qwen3Plan, /*noSequenceParallel=*/"", /*tiedEmbeddings=*/true,
     /*perHeadNorms=*/true, /*defaultPadTokenId=*/-1},
    {"qwen2", kQwen2Types,
     [](const ArchitectureTraits &t) {
       return t.attentionBias && !t.outputProjectionBias;
     },
     qwen2Plan,
     /*noSequenceParallel=*/"", /*tiedEmbeddings=*/true,
     /*perHeadNorms=*/false, /*defaultPadTokenId=*/-1},
    {"llama", kLlamaTypes, [](const ArchitectureTraits &) { return true; },
     llamaPlan, /*noSequenceParallel=*/"", /*tiedEmbeddings=*/true,
     /*perHeadNorms=*/false, /*defaultPadTokenId=*/-1},
};

} // namespace

llvm::ArrayRef<Architecture> mlir::tp::getArchitectures() {
  return kArchitectures;
}

const Architecture *mlir::tp::lookupArchitecture(StringRef name) {
  for (const Architecture &arch : kArchitectures)
    if (arch.name == name)
      return &arch;
  return nullptr;
}

const Architecture *
mlir::tp::lookupArchitectureByModelType(StringRef modelType) {
  for (const Architecture &arch : kArchitectures)
    if (llvm::is_contained(arch.modelTypes, modelType))
      return &arch;
  return nullptr;
}

const Architecture &
mlir::tp::recognizeArchitecture(const ArchitectureTraits &traits) {
  for (const Architecture &arch : kArchitectures)
    if (arch.recognizes(traits))
      return arch;
  return kArchitectures[std::size(kArchitectures) - 1];
}

std::string mlir::tp::getArchitectureNames() {
  // Listed in the order users know them (the registry is in recognition
  // order).
  static constexpr StringRef order[] = {"llama", "qwen2", "qwen3", "gemma3",
                                        "nemotron_h"};
  std::string names;
  for (StringRef name : order)
    if (lookupArchitecture(name))
      names += (names.empty() ? "" : ", ") + name.str();
  for (const Architecture &arch : kArchitectures)
    if (!llvm::is_contained(order, StringRef(arch.name)))
      names += ", " + arch.name.str();
  return names;
}

namespace {

/// Architectures users bring that tp-opt does not compile, and what they
/// need that it lacks.
constexpr std::pair<StringLiteral, StringLiteral> kUnsupportedModelTypes[] = {
    {"phi3", "it has no built-in plan or config check yet (its graphs "
             "raise without --hf-config; at tp > 1 give a JSON plan, as in "
             "docs/tp.md)"},
    {"phi", "its parallel attention/MLP block and LayerNorm are not raised"},
    {"gpt2", "its Conv1D projections, learned positions and LayerNorm are "
             "not raised"},
    {"gemma2", "its attention soft-capping layout is not raised (Gemma3 is)"},
    {"gemma", "its blocks are not raised (Gemma3 is)"},
    {"mixtral", "its MoE experts are not supported"},
    {"qwen2_moe", "its MoE experts are not supported"},
    {"qwen3_moe", "its MoE experts are not supported"},
    {"deepseek_v3", "its MoE experts and multi-head latent attention are not "
                    "supported"},
    {"falcon", "its fused query_key_value projection is not raised"},
    {"gpt_neox", "its fused query_key_value projection is not raised"},
};

} // namespace

std::string mlir::tp::whyModelTypeIsUnsupported(StringRef modelType) {
  if (lookupArchitectureByModelType(modelType))
    return "";
  // In the order users know the architectures.
  std::string accepted, names = getArchitectureNames();
  llvm::SmallVector<StringRef> ordered;
  StringRef(names).split(ordered, ", ");
  for (StringRef name : ordered)
    for (StringRef type : lookupArchitecture(name)->modelTypes)
      accepted += (accepted.empty() ? "" : ", ") + type.str();
  for (const auto &[type, why] : kUnsupportedModelTypes)
    if (type == modelType)
      return (modelType + " is not supported: " + why +
              " (tp-opt compiles the model_types " + accepted + ")")
          .str();
  return ("model_type '" + modelType +
          "' is not an architecture tp-opt compiles (model_types " + accepted +
          ")")
      .str();
}
