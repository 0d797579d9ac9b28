//===- LoRAConfigTest.cpp - PEFT's matching rules -------------------------===//
//
// LoRAConfig against PEFT itself: test/models/peft_matching.json holds, for
// configurations of target_modules, exclude_modules, layers_to_transform,
// layers_pattern, modules_to_save, rank_pattern and alpha_pattern, what
// peft 0.21 answers for each of a list of module names (written by
// test/models/make_peft.py).
//
//===----------------------------------------------------------------------===//

#include "tpopt/Plan/LoRAAdapter.h"
#include "tpopt/Plan/Plan.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace mlir::tp;

namespace {

/// `fields` written as an adapter_config.json and read back.
LoRAConfig readConfig(const llvm::json::Object &fields) {
  llvm::SmallString<128> path;
  EXPECT_FALSE(
      llvm::sys::fs::createTemporaryFile("adapter_config", "json", path));
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    llvm::json::Object object = fields;
    object["peft_type"] = "LORA";
    os << llvm::json::Value(std::move(object));
  }
  llvm::Expected<LoRAConfig> config = readPEFTConfig(path);
  llvm::sys::fs::remove(path);
  if (!config) {
    ADD_FAILURE() << llvm::toString(config.takeError());
    return LoRAConfig();
  }
  return *config;
}

TEST(LoRAConfigTest, MatchesPEFT) {
  auto buffer = llvm::MemoryBuffer::getFile(TPOPT_SOURCE_DIR
                                            "/test/models/peft_matching.json");
  ASSERT_TRUE(bool(buffer));
  llvm::Expected<llvm::json::Value> json =
      llvm::json::parse((*buffer)->getBuffer());
  ASSERT_TRUE(bool(json)) << llvm::toString(json.takeError());
  const llvm::json::Array *cases = json->getAsArray();
  ASSERT_TRUE(cases && !cases->empty());
  int compared = 0;
  for (const llvm::json::Value &c : *cases) {
    const llvm::json::Object *fields = c.getAsObject()->getObject("config");
    const llvm::json::Object *modules = c.getAsObject()->getObject("modules");
    ASSERT_TRUE(fields && modules);
    LoRAConfig config = readConfig(*fields);
    std::string shown;
    llvm::raw_string_ostream(shown)
        << llvm::json::Value(llvm::json::Object(*fields));
    for (const auto &[module, answer] : *modules) {
      llvm::Expected<std::optional<LoRAConfig::ModuleLoRA>> got =
          config.lookup(module, module == "lm_head");
      ASSERT_TRUE(bool(got)) << llvm::toString(got.takeError());
      const llvm::json::Array *expected = answer.getAsArray();
      EXPECT_EQ(got->has_value(), expected != nullptr)
          << module.str() << " under " << shown;
      if (expected && *got) {
        EXPECT_EQ((*got)->rank, (*expected)[0].getAsInteger())
            << module.str() << " under " << shown;
        EXPECT_EQ((*got)->alpha, (*expected)[1].getAsNumber())
            << module.str() << " under " << shown;
        EXPECT_DOUBLE_EQ((*got)->scale, (*got)->alpha / (*got)->rank);
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, 200);
}

TEST(LoRAConfigTest, RsLoRAScale) {
  llvm::json::Object fields{{"r", 16},
                            {"lora_alpha", 8},
                            {"use_rslora", true},
                            {"target_modules", llvm::json::Array{"q_proj"}}};
  auto got = readConfig(fields).lookup("model.layers.0.self_attn.q_proj",
                                       /*isOutputLayer=*/false);
  ASSERT_TRUE(bool(got) && got->has_value());
  EXPECT_DOUBLE_EQ((*got)->scale, 2.0); // 8 / sqrt(16)
}

TEST(LoRAConfigTest, PythonRegexToPOSIX) {
  auto posix = [](llvm::StringRef re) {
    llvm::Expected<std::string> out = pythonRegexToPOSIX(re);
    return out ? *out : "error: " + llvm::toString(out.takeError());
  };
  EXPECT_EQ(posix(R"(.*\.\d+\.q_proj)"), R"(^(.*\.[0-9]+\.q_proj)$)");
  EXPECT_EQ(posix(R"(.*?_proj)"), R"(^(.*_proj)$)");
  EXPECT_EQ(posix(R"([\w.]+)"), R"(^([A-Za-z0-9_.]+)$)");
  EXPECT_EQ(posix(R"(a\?b)"), R"(^(a\?b)$)");
  EXPECT_EQ(posix(R"((?:q|k)_proj)"),
            "error: regular expression '(?:q|k)_proj': the group '(?' has no "
            "POSIX form");
  EXPECT_EQ(posix(R"(\bq_proj)"),
            "error: regular expression '\\bq_proj': the escape '\\b' has no "
            "POSIX form");
}

} // namespace
