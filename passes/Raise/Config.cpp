//===- Config.cpp - the configuration and architecture of a raised graph --===//
//
// What the raised program shows of the model's HF configuration (sizes,
// epsilons, RoPE bases, sliding windows, block types) becomes the module's
// `tp.config`; the architecture is the registry's reading of the traits the
// graph shows (include/tpopt/Plan/Architecture.h).
//
//===----------------------------------------------------------------------===//

#include "Raiser.h"

#include "tpopt/Plan/Architecture.h"

#include <set>

using namespace mlir;
using namespace mlir::tp;
using namespace mlir::tp::raise;

namespace {

/// Reads one raised function into `tp.config` entries.
class ConfigReader {
public:
  ConfigReader(func::FuncOp func) : func(func), builder(func.getContext()) {}

  LogicalResult read();
  DictionaryAttr getConfig() {
    SmallVector<NamedAttribute> entries;
    for (auto &[key, value] : config)
      entries.push_back(builder.getNamedAttr(key, value));
    return builder.getDictionaryAttr(entries);
  }

private:
  void setInt(StringRef key, int64_t v) {
    config[key.str()] = builder.getI64IntegerAttr(v);
  }
  StringRef fqnOf(Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      if (auto fqn = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                       TPDialect::kFqnAttrName))
        return fqn.getValue();
    return "";
  }
  void countLayers();
  void readAttention(AttentionOp att);
  void readDecoder();
  void readBlockTypes();
  LogicalResult readArchitecture();

  func::FuncOp func;
  Builder builder;
  std::map<std::string, Attribute> config;
  ArchitectureTraits traits;
  bool tied = false;
  SmallVector<Attribute> layerTypes, blockTypes;
};

void ConfigReader::countLayers() {
  std::set<int64_t> layers;
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    auto fqn = func.getArgAttrOfType<StringAttr>(i, TPDialect::kFqnAttrName);
    if (!fqn)
      continue;
    StringRef rest = fqn.getValue();
    traits.backboneNames |= rest.starts_with("backbone.");
    size_t pos = rest.find("layers.");
    if (pos == StringRef::npos)
      continue;
    int64_t layer;
    if (!rest.drop_front(pos + 7).split('.').first.getAsInteger(10, layer))
      layers.insert(layer);
  }
  setInt("num_hidden_layers", layers.size());
}

void ConfigReader::readAttention(AttentionOp att) {
  if (!config.count("num_attention_heads")) {
    setInt("num_attention_heads", att.getNumHeads());
    setInt("num_key_value_heads", att.getNumKvHeads());
    setInt("head_dim", att.getHeadDim());
  }
  bool sliding = static_cast<bool>(att.getSlidingWindowAttr());
  layerTypes.push_back(
      builder.getStringAttr(sliding ? "sliding_attention" : "full_attention"));
  if (sliding)
    config["sliding_window"] = att.getSlidingWindowAttr();
  if (auto rot = att.getQ().getDefiningOp<RotaryOp>()) {
    StringRef key = sliding ? "rope_local_base_freq" : "rope_theta";
    if (!config.count(key.str()))
      config[key.str()] = rot.getThetaAttr();
  }
}

void ConfigReader::readDecoder() {
  Value embedTable;
  func.walk([&](Operation *op) {
    if (auto emb = dyn_cast<EmbeddingOp>(op)) {
      auto table = emb.getTable().getType();
      setInt("vocab_size", table.getDimSize(0));
      setInt("hidden_size", table.getDimSize(1));
      embedTable = emb.getTable();
      traits.embeddingScale |= llvm::any_of(
          emb->getUsers(), [](Operation *u) { return isa<ScaleOp>(u); });
    } else if (auto att = dyn_cast<AttentionOp>(op)) {
      readAttention(att);
    } else if (auto norm = dyn_cast<RmsNormOp>(op)) {
      if (norm.getGroupSizeAttr())
        traits.qkNorm = true;
      else if (!config.count("rms_norm_eps"))
        config["rms_norm_eps"] = norm.getEpsilonAttr();
      traits.normWeightOffset |= norm.getWeightOffset().convertToDouble() != 0;
    } else if (auto lin = dyn_cast<LinearOp>(op)) {
      StringRef fqn = fqnOf(lin.getWeight());
      if (fqn.ends_with("q_proj.weight") && lin.getBias())
        traits.attentionBias = true;
      if ((fqn.ends_with(".gate_proj.weight") ||
           fqn.ends_with(".up_proj.weight")) &&
          !config.count("intermediate_size"))
        setInt("intermediate_size", lin.getWeight().getType().getDimSize(0));
      // The output projection reading the embedding table: tied.
      if (embedTable && lin.getWeight() == embedTable &&
          llvm::any_of(lin->getUsers(),
                       [](Operation *u) { return isa<func::ReturnOp>(u); }))
        tied = true;
    }
  });
}

/// NemotronH's hybrid pattern: which layers are Mamba, attention or MLP.
void ConfigReader::readBlockTypes() {
  func.walk([&](Operation *op) {
    if (auto m = dyn_cast<Mamba2MixerOp>(op)) {
      blockTypes.push_back(builder.getStringAttr("mamba"));
      setInt("mamba_num_heads", m.getNumHeads());
      setInt("mamba_head_dim", m.getHeadDim());
      setInt("n_groups", m.getNGroups());
      setInt("ssm_state_size", m.getStateSize());
      setInt("conv_kernel", m.getConvKernel());
      traits.mamba = true;
    } else if (isa<AttentionOp>(op)) {
      blockTypes.push_back(builder.getStringAttr("attention"));
    } else if (isa<ReluSquaredOp>(op)) {
      blockTypes.push_back(builder.getStringAttr("mlp"));
    }
  });
}

LogicalResult ConfigReader::readArchitecture() {
  const Architecture &arch = recognizeArchitecture(traits);
  if (tied && !arch.tiedEmbeddings)
    return func.emitError() << "the graph ties lm_head to the embedding, "
                               "which "
                            << arch.name << " does not";
  if (traits.qkNorm && !arch.perHeadNorms)
    return func.emitError() << "the graph has per-head q/k norms, which "
                            << arch.name << " does not";
  config["architecture"] = builder.getStringAttr(arch.name);
  return success();
}

LogicalResult ConfigReader::read() {
  countLayers();
  readDecoder();
  readBlockTypes();
  if (failed(readArchitecture()))
    return failure();
  if (traits.mamba)
    config["layers_block_type"] = builder.getArrayAttr(blockTypes);
  // One theta for all layers is rope_theta, whatever their kind.
  if (!config.count("rope_theta") && config.count("rope_local_base_freq")) {
    config["rope_theta"] = config["rope_local_base_freq"];
    config.erase("rope_local_base_freq");
  }
  if (config.count("sliding_window"))
    config["layer_types"] = builder.getArrayAttr(layerTypes);
  config["tie_word_embeddings"] = builder.getBoolAttr(tied);
  config["attention_bias"] = builder.getBoolAttr(traits.attentionBias);
  config["qk_norm"] = builder.getBoolAttr(traits.qkNorm);
  return success();
}

} // namespace

LogicalResult Raiser::recordConfig(ModuleOp module, func::FuncOp func) {
  ConfigReader reader(func);
  if (failed(reader.read()))
    return failure();
  module->setAttr("tp.config", reader.getConfig());
  return success();
}
