//===- CheckHFConfig.cpp - cross-check tp.config with config.json --------===//

#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Passes.h"
#include "tpopt/Plan/Architecture.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

namespace mlir::tp {
#define GEN_PASS_DEF_TPCHECKHFCONFIG
#include "tpopt/Passes.h.inc"
} // namespace mlir::tp

using namespace mlir;
using namespace mlir::tp;

namespace {

struct TPCheckHFConfigPass
    : public tp::impl::TPCheckHFConfigBase<TPCheckHFConfigPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fail = [&](const Twine &message) {
      module.emitError() << "hf-config '" << path << "': " << message;
      signalPassFailure();
    };
    auto buffer = llvm::MemoryBuffer::getFile(path);
    if (!buffer)
      return fail("cannot read it: " + buffer.getError().message());
    llvm::Expected<llvm::json::Value> parsed =
        llvm::json::parse((*buffer)->getBuffer());
    if (!parsed)
      return fail("not valid JSON: " + llvm::toString(parsed.takeError()));
    const llvm::json::Object *json = parsed->getAsObject();
    if (!json)
      return fail("not a JSON object");
    if (const llvm::json::Object *text = json->getObject("text_config"))
      json = text;
    auto config = module->getAttrOfType<DictionaryAttr>("tp.config");
    if (!config)
      return fail("the module has no tp.config (run --tp-raise-onnx first)");
    // The architecture: the config's model_type must be the one raising
    // recognised.
    if (std::optional<StringRef> modelType = json->getString("model_type")) {
      const Architecture *arch = lookupArchitectureByModelType(*modelType);
      if (!arch)
        return fail("model_type '" + *modelType +
                    "' is not an architecture tp-opt compiles (" +
                    getArchitectureNames() + ")");
      auto detected = config.getAs<StringAttr>("architecture");
      if (detected && detected.getValue() != arch->name)
        return fail("model_type '" + *modelType + "' is " + arch->name +
                    " but the graph is a " + detected.getValue());
    }

    // Integers.
    for (StringRef key : {"hidden_size", "num_hidden_layers",
                          "num_attention_heads", "num_key_value_heads",
                          "head_dim", "intermediate_size", "vocab_size"}) {
      std::optional<int64_t> want = json->getInteger(key);
      auto got = config.getAs<IntegerAttr>(key);
      if (want && got && *want != got.getInt())
        return fail(Twine(key) + " is " + Twine(*want) + " in the config but " +
                    Twine(got.getInt()) + " in the graph");
    }
    // Floats, compared as the f32 values exporters store.
    auto checkFloat = [&](StringRef key, std::optional<double> want,
                          StringRef graphKey) -> bool {
      auto got = config.getAs<FloatAttr>(graphKey);
      if (!want || !got)
        return true;
      double g = got.getValueAsDouble();
      if (std::fabs(g - *want) > 1e-6 * std::max(1.0, std::fabs(*want))) {
        fail(Twine(key) + " is " + llvm::formatv("{0:e}", *want) +
             " in the config but " + llvm::formatv("{0:e}", g) +
             " in the graph");
        return false;
      }
      return true;
    };
    if (!checkFloat("rms_norm_eps", json->getNumber("rms_norm_eps"),
                    "rms_norm_eps"))
      return;
    std::optional<double> theta = json->getNumber("rope_theta"), localTheta;
    if (const llvm::json::Object *rope = json->getObject("rope_parameters")) {
      if (auto t = rope->getNumber("rope_theta"))
        theta = t;
      if (const llvm::json::Object *full = rope->getObject("full_attention"))
        theta = full->getNumber("rope_theta");
      if (const llvm::json::Object *local =
              rope->getObject("sliding_attention"))
        localTheta = local->getNumber("rope_theta");
    }
    if (!checkFloat("rope_theta", theta, "rope_theta"))
      return;
    if (localTheta && config.get("rope_local_base_freq") &&
        !checkFloat("sliding_attention rope_theta", localTheta,
                    "rope_local_base_freq"))
      return;
    if (std::optional<bool> tie = json->getBoolean("tie_word_embeddings")) {
      auto got = config.getAs<BoolAttr>("tie_word_embeddings");
      if (got && got.getValue() != *tie)
        return fail(Twine("tie_word_embeddings is ") +
                    (*tie ? "true" : "false") + " in the config but " +
                    (got.getValue() ? "true" : "false") + " in the graph");
    }

    // Sliding windows: check the windows the graph shows, supply the rest.
    const llvm::json::Array *layerTypes = json->getArray("layer_types");
    std::optional<int64_t> window = json->getInteger("sliding_window");
    if (!layerTypes || !window)
      return;
    SmallVector<AttentionOp> attentions;
    module.walk([&](AttentionOp op) { attentions.push_back(op); });
    SmallVector<StringRef> kinds;
    for (const llvm::json::Value &v : *layerTypes)
      if (std::optional<StringRef> s = v.getAsString())
        if (*s == "sliding_attention" || *s == "full_attention")
          kinds.push_back(*s);
    if (kinds.size() != attentions.size())
      return fail(Twine(kinds.size()) +
                  " attention layers in layer_types "
                  "but " +
                  Twine(attentions.size()) + " in the graph");
    OpBuilder builder(module.getContext());
    for (auto [i, op] : llvm::enumerate(attentions)) {
      auto got = op.getSlidingWindowAttr();
      bool sliding = kinds[i] == "sliding_attention";
      if (!sliding && got)
        return fail("layer " + Twine(i) +
                    " is full_attention in the config "
                    "but the graph has a sliding window of " +
                    Twine(got.getInt()));
      if (sliding && got && got.getInt() != *window)
        return fail("sliding_window is " + Twine(*window) +
                    " in the config but " + Twine(got.getInt()) +
                    " in the graph (layer " + Twine(i) + ")");
      if (sliding && !got)
        op.setSlidingWindowAttr(builder.getI64IntegerAttr(*window));
    }
  }
};

} // namespace
