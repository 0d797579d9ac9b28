//===- CheckHFConfig.cpp - cross-check tp.config with config.json --------===//

#include "tpopt/Dialect/TP/ModelConfig.h"
#include "tpopt/Dialect/TP/TPDialect.h"
#include "tpopt/Dialect/TP/TPOps.h"
#include "tpopt/Passes.h"
#include "tpopt/Plan/Architecture.h"
#include "tpopt/Plan/HFConfig.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

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
    llvm::Expected<llvm::json::Object> parsed = readHFConfig(path);
    if (!parsed) {
      module.emitError() << "hf-config: " << llvm::toString(parsed.takeError());
      return signalPassFailure();
    }
    const llvm::json::Object *json = &*parsed;
    if (const llvm::json::Object *text = json->getObject("text_config"))
      json = text;
    FailureOr<ModelConfig> config = ModelConfig::read(module);
    if (failed(config))
      return signalPassFailure();
    if (failed(checkArchitecture(*json, *config)) ||
        failed(checkSizes(*json, *config)) ||
        failed(checkFloats(*json, *config)) ||
        failed(checkRopeScaling(*json)) || failed(checkWindows(*json)))
      return signalPassFailure();
    // The graph does not show it; training needs it.
    if (std::optional<int64_t> pad = json->getInteger("pad_token_id")) {
      config->padTokenId = *pad;
      config->write(module);
    }
  }

  LogicalResult fail(const Twine &message) {
    getOperation().emitError() << "hf-config '" << path << "': " << message;
    return failure();
  }

  /// The config's model_type must be the architecture raising recognised.
  LogicalResult checkArchitecture(const llvm::json::Object &json,
                                  const ModelConfig &config) {
    std::optional<StringRef> modelType = json.getString("model_type");
    if (!modelType)
      return success();
    const Architecture *arch = lookupArchitectureByModelType(*modelType);
    if (!arch)
      return fail(whyModelTypeIsUnsupported(*modelType));
    if (config.architecture && *config.architecture != arch->name)
      return fail("model_type '" + *modelType + "' is " + arch->name +
                  " but the graph is a " + *config.architecture);
    return success();
  }

  LogicalResult checkSizes(const llvm::json::Object &json,
                           const ModelConfig &config) {
    const std::pair<StringRef, ModelConfig::Int> sizes[] = {
        {"hidden_size", config.hiddenSize},
        {"num_hidden_layers", config.numHiddenLayers},
        {"num_attention_heads", config.numAttentionHeads},
        {"num_key_value_heads", config.numKeyValueHeads},
        {"head_dim", config.headDim},
        {"intermediate_size", config.intermediateSize},
        {"vocab_size", config.vocabSize}};
    for (auto [key, got] : sizes) {
      std::optional<int64_t> want = json.getInteger(key);
      if (want && got && *want != *got)
        return fail(Twine(key) + " is " + Twine(*want) + " in the config but " +
                    Twine(*got) + " in the graph");
    }
    std::optional<bool> tie = json.getBoolean("tie_word_embeddings");
    if (tie && config.tieWordEmbeddings && *config.tieWordEmbeddings != *tie)
      return fail(Twine("tie_word_embeddings is ") + (*tie ? "true" : "false") +
                  " in the config but " +
                  (*config.tieWordEmbeddings ? "true" : "false") +
                  " in the graph");
    return success();
  }

  /// Epsilon and RoPE bases, compared as the f32 values exporters store.
  LogicalResult checkFloats(const llvm::json::Object &json,
                            const ModelConfig &config) {
    auto check = [&](StringRef key, std::optional<double> want,
                     std::optional<double> got) {
      if (!want || !got ||
          std::fabs(*got - *want) <= 1e-6 * std::max(1.0, std::fabs(*want)))
        return success();
      return fail(Twine(key) + " is " + llvm::formatv("{0:e}", *want) +
                  " in the config but " + llvm::formatv("{0:e}", *got) +
                  " in the graph");
    };
    std::optional<double> theta = json.getNumber("rope_theta"), localTheta;
    if (const llvm::json::Object *rope = json.getObject("rope_parameters")) {
      if (auto t = rope->getNumber("rope_theta"))
        theta = t;
      if (const llvm::json::Object *full = rope->getObject("full_attention"))
        theta = full->getNumber("rope_theta");
      if (const llvm::json::Object *local =
              rope->getObject("sliding_attention"))
        localTheta = local->getNumber("rope_theta");
    }
    if (failed(check("rms_norm_eps", json.getNumber("rms_norm_eps"),
                     config.rmsNormEps)) ||
        failed(check("rope_theta", theta, config.ropeTheta)))
      return failure();
    if (localTheta && config.ropeLocalBaseFreq)
      return check("sliding_attention rope_theta", localTheta,
                   config.ropeLocalBaseFreq);
    return success();
  }

  /// RoPE scaling: the config's rope_type and parameters (rope_parameters,
  /// or the older rope_scaling) against what raising read off the tables.
  LogicalResult checkRopeScaling(const llvm::json::Object &json) {
    const llvm::json::Object *rope = json.getObject("rope_parameters");
    if (!rope)
      rope = json.getObject("rope_scaling");
    if (!rope)
      return success();
    auto typeOf = [](const llvm::json::Object &o) {
      std::optional<StringRef> t = o.getString("rope_type");
      if (!t)
        t = o.getString("type");
      return t.value_or("default");
    };
    auto supported = [&](StringRef type) -> LogicalResult {
      if (type == "default" || type == "linear" || type == "llama3" ||
          type == "yarn" || type == "dynamic" || type == "longrope")
        return success();
      return fail("rope_type '" + type +
                  "' is not supported yet (tp-opt implements default, "
                  "linear, llama3, yarn, dynamic and longrope)");
    };
    // Per layer type (Gemma3: linear scaling on the global layers of its
    // larger checkpoints), or one set of parameters for every layer.
    const llvm::json::Object *perKind[2] = {
        rope->getObject("full_attention"),
        rope->getObject("sliding_attention")};
    bool perLayerType = perKind[0] || perKind[1];
    for (const llvm::json::Object *sub : perKind)
      if (sub && failed(supported(typeOf(*sub))))
        return failure();
    if (!perLayerType && failed(supported(typeOf(*rope))))
      return failure();
    WalkResult walk = getOperation().walk([&](AttentionOp att) {
      auto op = att.getQ().getDefiningOp<RotaryOp>();
      if (!op)
        return WalkResult::advance();
      const llvm::json::Object *params = rope;
      if (perLayerType) {
        params = perKind[att.getSlidingWindow() ? 1 : 0];
        if (!params)
          return WalkResult::advance();
      }
      if (failed(checkRotary(op, *params, typeOf(*params))))
        return WalkResult::interrupt();
      return WalkResult::advance();
    });
    return failure(walk.wasInterrupted());
  }

  /// One tp.rotary against the config's rope_type and parameters.
  LogicalResult checkRotary(RotaryOp op, const llvm::json::Object &rope,
                            StringRef type) {
    StringRef got = op.getRopeType().value_or("default");
    if (got != type)
      return fail("rope_type is '" + type + "' in the config but '" + got +
                  "' in the graph's rotary tables");
    auto same = [&](StringRef key, std::optional<double> want,
                    std::optional<double> have) -> LogicalResult {
      if (!want || !have ||
          std::fabs(*want - *have) <= 1e-6 * std::max(1.0, *want))
        return success();
      return fail(Twine(key) + " is " + llvm::formatv("{0}", *want) +
                  " in the config but " + llvm::formatv("{0}", *have) +
                  " in the graph's rotary tables");
    };
    auto attr = [](std::optional<APFloat> v) -> std::optional<double> {
      if (!v)
        return std::nullopt;
      return v->convertToDouble();
    };
    std::optional<double> maxPositions;
    if (auto m = op.getOriginalMaxPositionEmbeddings())
      maxPositions = static_cast<double>(*m);
    if (failed(
            same("factor", rope.getNumber("factor"), attr(op.getFactor()))) ||
        failed(same("low_freq_factor", rope.getNumber("low_freq_factor"),
                    attr(op.getLowFreqFactor()))) ||
        failed(same("high_freq_factor", rope.getNumber("high_freq_factor"),
                    attr(op.getHighFreqFactor()))))
      return failure();
    if (failed(same("original_max_position_embeddings",
                    rope.getNumber("original_max_position_embeddings"),
                    maxPositions)) ||
        failed(same("attention_factor", rope.getNumber("attention_factor"),
                    attr(op.getAttentionFactor()))))
      return failure();
    if (type != "yarn")
      return success();
    // transformers' `or` defaults: 0 and null mean 32 and 1.
    auto orDefault = [&](StringRef key, double fallback) {
      double v = rope.getNumber(key).value_or(0);
      return v ? v : fallback;
    };
    if (failed(same("beta_fast", orDefault("beta_fast", 32),
                    attr(op.getBetaFast()))) ||
        failed(same("beta_slow", orDefault("beta_slow", 1),
                    attr(op.getBetaSlow()))))
      return failure();
    return success();
  }

  /// Sliding windows: check the windows the graph shows, supply the rest.
  LogicalResult checkWindows(const llvm::json::Object &json) {
    ModuleOp module = getOperation();
    const llvm::json::Array *layerTypes = json.getArray("layer_types");
    std::optional<int64_t> window = json.getInteger("sliding_window");
    if (!window || json.getBoolean("use_sliding_window") == false)
      return success();
    SmallVector<AttentionOp> attentions;
    module.walk([&](AttentionOp op) { attentions.push_back(op); });
    SmallVector<StringRef> kinds;
    if (layerTypes) {
      for (const llvm::json::Value &v : *layerTypes)
        if (std::optional<StringRef> s = v.getAsString())
          if (*s == "sliding_attention" || *s == "full_attention")
            kinds.push_back(*s);
    } else {
      // No layer_types (Mistral): the window applies to every layer.
      kinds.assign(attentions.size(), "sliding_attention");
    }
    if (kinds.size() != attentions.size())
      return fail(Twine(kinds.size()) +
                  " attention layers in layer_types but " +
                  Twine(attentions.size()) + " in the graph");
    OpBuilder builder(module.getContext());
    for (auto [i, op] : llvm::enumerate(attentions)) {
      auto got = op.getSlidingWindowAttr();
      bool sliding = kinds[i] == "sliding_attention";
      if (!sliding && got)
        return fail("layer " + Twine(i) +
                    " is full_attention in the config but the graph has a "
                    "sliding window of " +
                    Twine(got.getInt()));
      if (sliding && got && got.getInt() != *window)
        return fail("sliding_window is " + Twine(*window) +
                    " in the config but " + Twine(got.getInt()) +
                    " in the graph (layer " + Twine(i) + ")");
      if (sliding && !got)
        op.setSlidingWindowAttr(builder.getI64IntegerAttr(*window));
    }
    return success();
  }
};

} // namespace
