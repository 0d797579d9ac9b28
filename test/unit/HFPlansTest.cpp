//===- HFPlansTest.cpp - transformers' plans as tp-opt knows them ---------===//
//
// tp-opt's table of transformers' plans (lib/Plan/HFPlans.cpp) against
// transformers itself: test/models/hf_tp_plans.json is written by
// test/models/hf_tp_plans.py from transformers 5.23's classes.
//
//===----------------------------------------------------------------------===//

#include "tpopt/Plan/Architecture.h"
#include "tpopt/Plan/Plan.h"

#include "gtest/gtest.h"

#include <map>

using namespace mlir::tp;

namespace {

std::map<std::string, std::string> asMap(llvm::ArrayRef<HFPlanKey> plan) {
  std::map<std::string, std::string> map;
  for (const HFPlanKey &k : plan)
    map[k.key.str()] = k.style.str();
  return map;
}

std::map<std::string, std::string> asMap(const llvm::json::Object *plan) {
  std::map<std::string, std::string> map;
  for (const auto &[key, style] : *plan)
    map[key.str()] = style.getAsString().value_or("?").str();
  return map;
}

TEST(HFPlansTest, MatchesTransformers) {
  llvm::Expected<llvm::json::Object> table =
      readJSONObject(TPOPT_SOURCE_DIR "/test/models/hf_tp_plans.json");
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  const llvm::json::Object *types = table->getObject("model_types");
  ASSERT_TRUE(types);
  EXPECT_EQ(types->size(), getHFClassPlans().size());
  for (const auto &[modelType, entry] : *types) {
    SCOPED_TRACE(modelType.str());
    const HFClassPlan *plan = lookupHFClassPlan(modelType);
    ASSERT_TRUE(plan);
    const llvm::json::Object *e = entry.getAsObject();
    EXPECT_EQ(plan->configClass, *e->getString("config_class"));
    EXPECT_EQ(plan->causalLMClass, *e->getString("causal_lm_class"));
    EXPECT_EQ(asMap(plan->basePlan), asMap(e->getObject("base_model_tp_plan")));
    EXPECT_EQ(asMap(plan->causalLMPlan),
              asMap(e->getObject("causal_lm_tp_plan")));
  }
}

TEST(HFPlansTest, EveryAcceptedModelTypeHasAPlanTable) {
  // `--plan hf:` needs the class plan of every model_type raising accepts.
  for (const Architecture &arch : getArchitectures())
    for (llvm::StringRef modelType : arch.modelTypes)
      EXPECT_TRUE(lookupHFClassPlan(modelType)) << modelType.str();
}

} // namespace
