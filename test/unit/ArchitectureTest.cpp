//===- ArchitectureTest.cpp - the architecture registry -------------------===//

#include "tpopt/Plan/Architecture.h"

#include "gtest/gtest.h"

using namespace mlir::tp;

namespace {

TEST(ArchitectureTest, RecognisesMostSpecificFirst) {
  ArchitectureTraits plain;
  EXPECT_EQ(recognizeArchitecture(plain).name, "llama");
  ArchitectureTraits bias;
  bias.attentionBias = true;
  EXPECT_EQ(recognizeArchitecture(bias).name, "qwen2");
  // Llama's attention_bias biases o_proj as well; Qwen2 never does.
  ArchitectureTraits llamaBias = bias;
  llamaBias.outputProjectionBias = true;
  EXPECT_EQ(recognizeArchitecture(llamaBias).name, "llama");
  ArchitectureTraits qk = bias;
  qk.qkNorm = true;
  EXPECT_EQ(recognizeArchitecture(qk).name, "qwen3");
  ArchitectureTraits gemma = qk;
  gemma.normWeightOffset = true;
  EXPECT_EQ(recognizeArchitecture(gemma).name, "gemma3");
  ArchitectureTraits scaled;
  scaled.embeddingScale = true;
  EXPECT_EQ(recognizeArchitecture(scaled).name, "gemma3");
  ArchitectureTraits hybrid = gemma;
  hybrid.mamba = true;
  EXPECT_EQ(recognizeArchitecture(hybrid).name, "nemotron_h");
  ArchitectureTraits backbone;
  backbone.backboneNames = true;
  EXPECT_EQ(recognizeArchitecture(backbone).name, "nemotron_h");
}

TEST(ArchitectureTest, LooksUpNamesAndModelTypes) {
  ASSERT_NE(lookupArchitecture("qwen3"), nullptr);
  EXPECT_EQ(lookupArchitecture("phi3"), nullptr);
  const Architecture *gemma = lookupArchitectureByModelType("gemma3_text");
  ASSERT_NE(gemma, nullptr);
  EXPECT_EQ(gemma->name, "gemma3");
  EXPECT_EQ(lookupArchitectureByModelType("phi3"), nullptr);
  EXPECT_EQ(getArchitectureNames(), "llama, qwen2, qwen3, gemma3, nemotron_h");
}

TEST(ArchitectureTest, BuiltinPlansComeFromTheRegistry) {
  llvm::Expected<Plan> gemma = getBuiltinPlan("gemma3", "model", true);
  ASSERT_TRUE(static_cast<bool>(gemma));
  const PlanEntry *norm =
      gemma->lookup("model.layers.3.pre_feedforward_layernorm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->style, ParallelStyle::SequenceParallel);
  // Llama's SP plan has no Gemma feed-forward norms.
  llvm::Expected<Plan> llama = getBuiltinPlan("llama", "model", true);
  ASSERT_TRUE(static_cast<bool>(llama));
  EXPECT_EQ(llama->lookup("model.layers.3.pre_feedforward_layernorm"), nullptr);
  // NemotronH: its blocks under the given root; no SP form.
  llvm::Expected<Plan> nemotron =
      getBuiltinPlan("nemotron_h", "backbone", false);
  ASSERT_TRUE(static_cast<bool>(nemotron));
  EXPECT_NE(nemotron->lookup("backbone.layers.0.mixer.up_proj"), nullptr);
  llvm::Expected<Plan> nemotronSP = getBuiltinPlan("nemotron_h", "model", true);
  ASSERT_FALSE(static_cast<bool>(nemotronSP));
  EXPECT_NE(llvm::toString(nemotronSP.takeError())
                .find("does not support sequence parallelism"),
            std::string::npos);
  llvm::Expected<Plan> none = getBuiltinPlan("phi3", "model", false);
  ASSERT_FALSE(static_cast<bool>(none));
  EXPECT_EQ(llvm::toString(none.takeError()),
            "no such plan (auto, llama, qwen2, qwen3, gemma3, nemotron_h, "
            "default, hf:CONFIG.json, file:PLAN.json)");
}

} // namespace
